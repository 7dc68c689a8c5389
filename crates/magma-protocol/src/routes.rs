//! The contract's routes: every endpoint once, with its path and methods,
//! and the run id a coaching session's path carries.
//!
//! The server routes by [`Endpoint::recognize`], the client and the probe
//! build paths from [`Endpoint::path`] and [`coaching_session_path`], and the
//! OpenAPI document lists [`Endpoint::ALL`]: a path is written here and
//! nowhere else.
//!
//! ```
//! use magma_protocol::routes::{Endpoint, coaching_session_path, decode_run_id};
//!
//! assert_eq!(Endpoint::Responses.path(), "/v1/responses");
//! let path = coaching_session_path("run/1 été");
//! assert_eq!(path, "/v1/coaching/sessions/run%2F1%20%C3%A9t%C3%A9");
//! let (endpoint, segment) = Endpoint::recognize(&path).unwrap();
//! assert_eq!(endpoint, Endpoint::CoachingSession);
//! assert_eq!(decode_run_id(segment.unwrap()).as_deref(), Some("run/1 été"));
//! ```

/// An endpoint of the agent contract (protocol 2.0 and its coaching
/// extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Endpoint {
    /// `GET /health`: readiness.
    Health,
    /// `GET /v1/info`: the agent's identity and capabilities.
    Info,
    /// `POST /v1/responses`: inference.
    Responses,
    /// `POST /v1/coaching`: one repair request of GEN's coaching loop.
    Coaching,
    /// `PUT` and `DELETE /v1/coaching/sessions/{run_id}`: a GEN run's
    /// coaching session.
    CoachingSession,
}

/// The path of a coaching session up to its run id.
const SESSIONS_PREFIX: &str = "/v1/coaching/sessions/";

impl Endpoint {
    /// Every endpoint, in the order the contract's documents list them.
    pub const ALL: [Endpoint; 5] = [
        Endpoint::Health,
        Endpoint::Info,
        Endpoint::Responses,
        Endpoint::Coaching,
        Endpoint::CoachingSession,
    ];

    /// The path, with `{run_id}` standing for the percent-encoded run id of
    /// [`Endpoint::CoachingSession`] (the OpenAPI template).
    pub const fn path(self) -> &'static str {
        match self {
            Endpoint::Health => "/health",
            Endpoint::Info => "/v1/info",
            Endpoint::Responses => "/v1/responses",
            Endpoint::Coaching => "/v1/coaching",
            Endpoint::CoachingSession => "/v1/coaching/sessions/{run_id}",
        }
    }

    /// The methods the contract defines on it (a server also answers
    /// `HEAD` where `GET` is defined).
    pub const fn methods(self) -> &'static [&'static str] {
        match self {
            Endpoint::Health | Endpoint::Info => &["GET"],
            Endpoint::Responses | Endpoint::Coaching => &["POST"],
            Endpoint::CoachingSession => &["PUT", "DELETE"],
        }
    }

    /// A short stable name (`health`, `info`, `responses`, `coaching`,
    /// `coaching_session`): a metric label, a log field.
    pub const fn name(self) -> &'static str {
        match self {
            Endpoint::Health => "health",
            Endpoint::Info => "info",
            Endpoint::Responses => "responses",
            Endpoint::Coaching => "coaching",
            Endpoint::CoachingSession => "coaching_session",
        }
    }

    /// Whether it belongs to the coaching extension, which an agent may
    /// leave out.
    pub const fn is_coaching(self) -> bool {
        matches!(self, Endpoint::Coaching | Endpoint::CoachingSession)
    }

    /// The endpoint a request path names, and for a coaching session the
    /// path's last segment (the run id, still percent-encoded: see
    /// [`decode_run_id`]). A session path needs a non-empty segment without
    /// `/`; anything else is `None`.
    pub fn recognize(path: &str) -> Option<(Endpoint, Option<&str>)> {
        if let Some(segment) = path.strip_prefix(SESSIONS_PREFIX) {
            return (!segment.is_empty() && !segment.contains('/'))
                .then_some((Endpoint::CoachingSession, Some(segment)));
        }
        Endpoint::ALL
            .into_iter()
            .find(|e| *e != Endpoint::CoachingSession && e.path() == path)
            .map(|e| (e, None))
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.path())
    }
}

/// The run id percent-encoded with no safe character but the unreserved
/// ones, as GEN quotes it (`urllib.parse.quote(run_id, safe='')`).
pub fn encode_run_id(run_id: &str) -> String {
    let mut out = String::with_capacity(run_id.len());
    for b in run_id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    out
}

/// `/v1/coaching/sessions/{run_id}` for this run id, encoded by
/// [`encode_run_id`].
pub fn coaching_session_path(run_id: &str) -> String {
    let mut path = String::from(SESSIONS_PREFIX);
    path.push_str(&encode_run_id(run_id));
    path
}

/// The run id of a session path's segment: `%XX` with two hex digits
/// decoded, anything else kept as it is (as Starlette decodes). `None` when
/// the decoded bytes are not UTF-8 or the run id is empty.
pub fn decode_run_id(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: Option<&u8>| b.and_then(|b| char::from(*b).to_digit(16));
        match (bytes[i], hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
            (b'%', Some(h), Some(l)) => {
                // Two hex digits: below 256.
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok().filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_is_recognized_by_its_own_path() {
        for e in Endpoint::ALL {
            let path = match e {
                Endpoint::CoachingSession => coaching_session_path("r"),
                _ => e.path().to_owned(),
            };
            let segment = (e == Endpoint::CoachingSession).then_some("r");
            assert_eq!(Endpoint::recognize(&path), Some((e, segment)), "{e}");
        }
    }

    #[test]
    fn other_paths_are_not_endpoints() {
        for path in [
            "",
            "/",
            "/health/",
            "/v1/responses/",
            "/v1/coaching/sessions/",
            "/v1/coaching/sessions/a/b",
            "/v1/coaching/sessions/{run_id}/x",
            "/V1/info",
            "/openapi.json",
        ] {
            assert_eq!(Endpoint::recognize(path), None, "{path:?}");
        }
    }

    #[test]
    fn run_ids_are_quoted_as_gen_quotes_them() {
        assert_eq!(encode_run_id("abc-1_2.3~"), "abc-1_2.3~");
        assert_eq!(
            encode_run_id("run/1 été?#%"),
            "run%2F1%20%C3%A9t%C3%A9%3F%23%25"
        );
        assert_eq!(encode_run_id(""), "");
    }

    #[test]
    fn run_ids_are_decoded_as_starlette_decodes_them() {
        assert_eq!(decode_run_id("abc").unwrap(), "abc");
        assert_eq!(decode_run_id("run%2F1%20x").unwrap(), "run/1 x");
        assert_eq!(decode_run_id("%C3%A9t%c3%a9").unwrap(), "été");
        assert_eq!(decode_run_id("100%").unwrap(), "100%");
        assert_eq!(decode_run_id("%zz%4").unwrap(), "%zz%4");
        assert_eq!(decode_run_id("%FF"), None);
        assert_eq!(decode_run_id(""), None);
    }

    #[test]
    fn encoding_then_decoding_gives_the_run_id_back() {
        for id in ["a", "run/1 été?#%", "%41", "\u{1F916} x", "a%2Fb"] {
            assert_eq!(decode_run_id(&encode_run_id(id)).as_deref(), Some(id));
        }
    }
}
