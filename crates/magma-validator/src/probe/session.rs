//! One probe run's connection to the agent and the shared logic of an
//! exchange: send, check status, body, candidate sequence and lints.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use magma_client::http::Method;
use magma_client::http::header::{ACCEPT, HeaderName, HeaderValue};
use magma_client::{Client, ErrorKind, RawRequest, RawResponse, TransportCause};
use magma_protocol::routes::Endpoint;
use magma_protocol::{AgentRequest, AgentResponse, Outcome};

use super::{AgentIdentity, Check, ProbeConfig, ProbeError};
use crate::check::{issue_findings, mismatch_finding};
use crate::explain::Lint;
use crate::report::{Finding, shorten};
use crate::{DocumentKind, lint};

/// Most contract errors listed per check; the rest are counted.
const MAX_ERRORS: usize = 25;

pub(crate) const TRANSPORT_IMPACT: &str = "BENCH and GEN never retry: a transport error or a \
     timeout is fatal for the run (their timeout is magma_agent_timeout, 360 s by default)";
pub(crate) const RESPONSES_STATUS_IMPACT: &str = "BENCH and GEN call raise_for_status on every \
     POST /v1/responses: a non-2xx answer is fatal for the run (GEN appends the body to its \
     error)";

/// The first answer of `GET /health` that was not 503.
#[derive(Debug)]
pub(crate) struct Ready {
    pub(crate) answer: RawResponse,
    pub(crate) attempts: u32,
    pub(crate) waited: Duration,
}

/// Candidates of the valid responses to the inference checks.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) candidates: usize,
    pub(crate) completed: usize,
    /// Error candidates by `error.code`.
    pub(crate) error_codes: BTreeMap<String, usize>,
}

#[derive(Debug)]
pub(crate) struct Session {
    client: Client,
    /// For the calls made side by side ([`post_json_at_once`](Self::post_json_at_once)):
    /// each answer is limited to a [`AT_ONCE`](super::checks::AT_ONCE)th of
    /// `max_response_bytes`, so that all of them together stay within it.
    client_at_once: Client,
    pub(crate) config: ProbeConfig,
    headers: Vec<(HeaderName, HeaderValue)>,
    seq: u64,
    /// `METHOD path: content-type` of 2xx answers whose type is not JSON.
    pub(crate) content_types: Vec<String>,
    pub(crate) json_answers: usize,
    pub(crate) ready: Option<Ready>,
    pub(crate) agent: Option<AgentIdentity>,
    pub(crate) tally: Tally,
    /// What `/v1/info` advertised of coaching, and the probe's session.
    pub(crate) coaching: CoachingState,
    /// When the run must be over.
    pub(crate) deadline: Instant,
    /// The concurrency checks' shared measurement, once made.
    pub(crate) busy: Option<super::checks::BusyRun>,
}

/// The coaching side of a probe run.
#[derive(Debug, Default)]
pub(crate) struct CoachingState {
    /// `/v1/info` was read (else the coaching checks cannot know).
    pub(crate) known: bool,
    /// `specialized_coaching`.
    pub(crate) kinds: Vec<String>,
    /// `coaching_resume`.
    pub(crate) resume: bool,
    /// The run id of the session the probe opened, once open.
    pub(crate) run_id: Option<String>,
    /// Every proposal of the agent's `corrected` repairs, with the request
    /// it answered: `coaching/reinject` sends them back as GEN does.
    pub(crate) proposals: Vec<(
        magma_protocol::coaching::SpecializedCoachingRequest,
        magma_protocol::coaching::CoachingProposal,
    )>,
}

/// `Name: value` as a header, or why not.
pub(crate) fn parse_header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), String> {
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| format!("{:?} is not a valid header name", name.trim()))?;
    let value = HeaderValue::from_str(value.trim())
        .map_err(|_| format!("the value of header {name} holds a character not allowed"))?;
    Ok((name, value))
}

impl Session {
    pub(crate) fn new(config: &ProbeConfig) -> Result<Session, ProbeError> {
        #[allow(unused_mut)] // only changed with the `tls` feature
        let mut builder = Client::builder(config.url.clone())
            .timeout(config.timeout)
            .max_response_bytes(config.max_response_bytes)
            .connect_timeout(config.timeout.min(Duration::from_secs(30)))
            .user_agent(format!("magma-validate/{}", env!("CARGO_PKG_VERSION")))
            // BENCH and GEN open a new connection for every call.
            .pool_max_idle_per_host(0);
        if let Some(ca) = &config.cacert {
            #[cfg(feature = "tls")]
            {
                builder = builder.ca_file(ca);
            }
            #[cfg(not(feature = "tls"))]
            return Err(ProbeError::Config(format!(
                "--cacert {} needs the `tls` feature of magma-validator",
                ca.display()
            )));
        }
        if let Some((cert, key)) = &config.client_identity {
            #[cfg(feature = "tls")]
            {
                builder = builder.client_identity_files(cert, key);
            }
            #[cfg(not(feature = "tls"))]
            return Err(ProbeError::Config(format!(
                "--cert {} --key {} need the `tls` feature of magma-validator",
                cert.display(),
                key.display()
            )));
        }
        let headers = config
            .headers
            .iter()
            .map(|(n, v)| {
                parse_header(n, v).map_err(|e| ProbeError::Config(format!("--header: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let at_once = u64::try_from(super::checks::AT_ONCE).unwrap_or(1);
        let client_at_once = builder
            .clone()
            .max_response_bytes((config.max_response_bytes / at_once).max(1))
            .build()
            .map_err(|e| ProbeError::Config(e.to_string()))?;
        let client = builder
            .build()
            .map_err(|e| ProbeError::Config(e.to_string()))?;
        Ok(Session {
            client,
            client_at_once,
            config: config.clone(),
            headers,
            seq: 0,
            content_types: Vec::new(),
            json_answers: 0,
            ready: None,
            agent: None,
            tally: Tally::default(),
            coaching: CoachingState::default(),
            busy: None,
            deadline: Instant::now()
                .checked_add(config.effective_deadline())
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365)),
        })
    }

    /// Time left before the run's deadline.
    pub(crate) fn time_left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    pub(crate) fn base_url(&self) -> &str {
        self.client.base_url()
    }

    /// A fresh request id, hex like BENCH's uuid4().hex.
    pub(crate) fn request_id(&mut self, what: &str) -> String {
        self.seq += 1;
        format!("magma-validate-{what}-{:08x}", self.seq)
    }

    /// Sends `request` with the user's headers.
    pub(crate) fn call(&self, request: RawRequest) -> Result<RawResponse, magma_client::Error> {
        self.call_on(&self.client, request)
    }

    /// Like [`post_json`](Self::post_json), for one of several calls made
    /// at once from other threads: the answer may be at most a
    /// [`AT_ONCE`](super::checks::AT_ONCE)th of `max_response_bytes`.
    pub(crate) fn post_json_at_once(
        &self,
        path: &str,
        body: String,
    ) -> Result<RawResponse, magma_client::Error> {
        self.call_on(
            &self.client_at_once,
            RawRequest::post(path)
                .header(ACCEPT, HeaderValue::from_static("application/json"))
                .json(body),
        )
    }

    fn call_on(
        &self,
        client: &Client,
        mut request: RawRequest,
    ) -> Result<RawResponse, magma_client::Error> {
        for (name, value) in &self.headers {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        // No call outlives the run's deadline (a few milliseconds at least,
        // so that a call past it fails as a timeout instead of not at all).
        let left = self.time_left().max(Duration::from_millis(10));
        if left < self.config.timeout {
            request = request.timeout(left);
        }
        client.execute(request)
    }

    pub(crate) fn get(&self, path: &str) -> Result<RawResponse, magma_client::Error> {
        self.call(
            RawRequest::get(path).header(ACCEPT, HeaderValue::from_static("application/json")),
        )
    }

    pub(crate) fn post_json(
        &self,
        path: &str,
        body: String,
    ) -> Result<RawResponse, magma_client::Error> {
        self.call(
            RawRequest::post(path)
                .header(ACCEPT, HeaderValue::from_static("application/json"))
                .json(body),
        )
    }

    /// Notes the `Content-Type` of a 2xx answer that carries a document.
    pub(crate) fn observe_content_type(&mut self, method: &Method, path: &str, r: &RawResponse) {
        self.json_answers += 1;
        let ct = r.content_type();
        if !ct.is_some_and(is_json_type) {
            let shown = ct.map_or_else(|| "no Content-Type".to_owned(), |c| shorten(c, 80));
            let entry = format!("{method} {path}: {shown}");
            if !self.content_types.contains(&entry) {
                self.content_types.push(entry);
            }
        }
    }

    /// Sends `request` and checks everything about the answer: status,
    /// body, candidate sequence and lints. `None` when the answer cannot be
    /// used (the failure is in `check`).
    pub(crate) fn respond(
        &mut self,
        check: &mut Check,
        request: &AgentRequest,
    ) -> Option<AgentResponse> {
        self.respond_with(check, request, request.to_json_string())
    }

    /// Like [`respond`](Self::respond), sending `body` (the same request,
    /// written differently).
    pub(crate) fn respond_with(
        &mut self,
        check: &mut Check,
        request: &AgentRequest,
        body: String,
    ) -> Option<AgentResponse> {
        let answer = self.post_json(Endpoint::Responses.path(), body);
        self.judge_answer(check, request, answer)
    }

    /// Checks an answer to `request` sent earlier (by another thread, for
    /// the concurrency checks) as [`respond`](Self::respond) does.
    pub(crate) fn judge_answer(
        &mut self,
        check: &mut Check,
        request: &AgentRequest,
        answer: Result<RawResponse, magma_client::Error>,
    ) -> Option<AgentResponse> {
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                check.push(transport_finding(&e));
                return None;
            }
        };
        if !answer.status().is_success() {
            check.push(
                Finding::error(
                    "http",
                    "http_status",
                    format!("POST {}", Endpoint::Responses),
                    format!(
                        "answered {} to a valid request: {}",
                        answer.status(),
                        body_excerpt(&answer)
                    ),
                )
                .with_impact(RESPONSES_STATUS_IMPACT)
                .with_fix(status_fix(answer.status().as_u16(), answer.body())),
            );
            return None;
        }
        self.observe_content_type(&Method::POST, Endpoint::Responses.path(), &answer);
        check.extend(lint::duplicate_keys("response", answer.body()));
        // More candidates than asked for: refused before any is built, so
        // that a hostile answer of many small ones costs the probe nothing.
        if let Err(m) = AgentResponse::check_candidate_count(answer.body(), request) {
            check.push(mismatch_finding(&m));
            return None;
        }
        let response = match AgentResponse::from_slice(answer.body()) {
            Ok(r) => r,
            Err(e) => {
                push_capped(check, DocumentKind::Response, &e);
                return None;
            }
        };
        if let Err(m) = response.validate_request(request) {
            check.push(mismatch_finding(&m));
            return None;
        }
        check.extend(lint::response(&response, Some(request)));
        check.extend(lint::error_candidates(&response));
        for c in response.candidates() {
            self.tally.candidates += 1;
            match &c.outcome {
                Outcome::Completed(_) => self.tally.completed += 1,
                Outcome::Error(e) => {
                    *self
                        .tally
                        .error_codes
                        .entry(e.code.as_str().to_owned())
                        .or_default() += 1;
                }
            }
        }
        Some(response)
    }
}

/// Adds the problems of an invalid document: at most [`MAX_ERRORS`] of
/// them, and one more whose message counts the rest, those the document's
/// error only counted ([`magma_protocol::Error::omitted`]) included.
pub(crate) fn push_capped(check: &mut Check, kind: DocumentKind, error: &magma_protocol::Error) {
    let total = error.issues().len() + error.omitted();
    let mut it = issue_findings(kind, error)
        .into_iter()
        .filter(|f| f.code != "too_many_errors");
    for f in it.by_ref().take(MAX_ERRORS) {
        check.push(f);
    }
    if let Some(mut more) = it.next() {
        more.message = format!(
            "{} (and {} more problems not listed)",
            more.message,
            total - MAX_ERRORS - 1
        );
        check.push(more);
    }
}

/// `application/json`, `application/x+json`, with or without parameters.
pub(crate) fn is_json_type(ct: &str) -> bool {
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The start of a body, for messages.
pub(crate) fn body_excerpt(r: &RawResponse) -> String {
    crate::report::body_excerpt(r.body())
}

/// A failed call, as an error finding.
pub(crate) fn transport_finding(e: &magma_client::Error) -> Finding {
    let code = match e.kind() {
        ErrorKind::Timeout(_) | ErrorKind::ConnectTimeout(_) => "timeout",
        ErrorKind::ConnectionRefused | ErrorKind::Connect => "connection",
        ErrorKind::BodyTooLarge { .. } => "body_too_large",
        ErrorKind::Tls(_) => "tls",
        // The cause's own name, except that a timeout is one code however
        // it was seen, and an unnamed cause is a plain transport failure.
        ErrorKind::Transport(TransportCause::TimedOut) => "timeout",
        ErrorKind::Transport(TransportCause::Other) => "transport",
        ErrorKind::Transport(cause) => cause.as_str(),
        _ => "transport",
    };
    let fix = match code {
        "timeout" => "answer within the consumers' timeout; run long inference off the event loop",
        "connection" => "keep the agent running and accepting connections for the whole run",
        "body_too_large" => "keep responses below the limit (see --max-response-bytes)",
        "head_too_large" => "keep the status line and headers of an answer well under 400 kB",
        "malformed_head" => "answer with a valid HTTP/1.1 status line and headers",
        "bad_chunked_encoding" => {
            "send a valid chunked body (hex chunk sizes, CRLF, a last chunk of size 0)"
        }
        "truncated_body" => {
            "send the whole body: as many bytes as Content-Length says, or the last chunk"
        }
        _ => {
            "answer every request with a complete HTTP/1.1 response; do not close the \
              connection before the body is complete"
        }
    };
    Finding::error("http", code, "", e.to_string())
        .with_impact(TRANSPORT_IMPACT)
        .with_fix(fix)
}

/// A lint promoted to an error for the probe (BENCH refuses to start).
pub(crate) fn as_error(mut f: Finding) -> Finding {
    f.severity = crate::Severity::Error;
    f
}

/// The content-type lint for the aggregated observations.
pub(crate) fn content_type_finding(entries: &[String]) -> Finding {
    Finding::warning(
        "http",
        Lint::ContentType.code(),
        "",
        format!(
            "2xx JSON answers without a JSON Content-Type: {}",
            entries.join("; ")
        ),
    )
    .with_impact(Lint::ContentType.impact())
    .with_fix(Lint::ContentType.fix())
}

/// The client's words for a TLS failure, without advice about its own API,
/// and the flag that helps.
pub(crate) fn tls_error(why: &str, config: &ProbeConfig) -> ProbeError {
    // The client names its builder methods; the probe names its flags.
    let mut text = why.to_owned();
    for (from, to) in [
        (
            " (mutual TLS; see ClientBuilder::client_identity_files)",
            " (mutual TLS)",
        ),
        ("; set one with ClientBuilder::client_identity_files", ""),
        ("; trust the CA with ClientBuilder::ca_file (--cacert)", ""),
    ] {
        text = text.replace(from, to);
    }
    if let Some(at) = text.find("ClientBuilder::") {
        let cut = text[..at].rfind(';').unwrap_or(at);
        text.truncate(cut);
    }
    let lower = text.to_ascii_lowercase();
    let hint = if lower.contains("client certificate") {
        if config.client_identity.is_some() {
            "The agent asks for a client certificate (mutual TLS) and refused the one given \
             with --cert/--key: use a certificate signed by a CA the agent trusts"
        } else {
            "The agent asks for a client certificate (mutual TLS): pass one with \
             --cert FILE --key FILE"
        }
    } else if lower.contains("not trusted") {
        "BENCH and GEN (Python requests) verify certificates the same way and would not \
         connect either; pass the CA that signed the agent's certificate with --cacert (and \
         give it to the consumers with REQUESTS_CA_BUNDLE)"
    } else if lower.contains("did not answer with tls") || lower.contains("is it speaking tls") {
        "The agent speaks plain HTTP on this port: use an http:// URL, or put TLS in front \
         of it"
    } else if lower.contains("not valid for this host name") {
        "Use the host name the certificate was issued for in the URL"
    } else {
        ""
    };
    ProbeError::Tls {
        why: text,
        hint: hint.to_owned(),
    }
}

/// How to fix a non-200 answer to a valid request: a 500 that says the agent
/// returned the wrong number of candidates (magma-server's) is a miscount,
/// not a failure to report as an error candidate.
pub(crate) fn status_fix(status: u16, body: &[u8]) -> &'static str {
    if is_miscount(status, body) {
        MISCOUNT_FIX
    } else {
        "answer every valid request with 200 and a JSON array; report a failure of one \
         candidate as an error candidate in place, not as an HTTP error"
    }
}

/// Whether a non-200 answer says the agent returned the wrong number of
/// candidates (magma-server's 500, or the reference's validation message).
pub(crate) fn is_miscount(status: u16, body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    status == 500
        && (text.contains("wrong number of candidates") || text.contains("candidates must match"))
}

/// How to fix a miscount.
pub(crate) const MISCOUNT_FIX: &str = "the agent returned the wrong number of candidates: give every input exactly \
     num_outputs candidates (respond returns num_outputs of them; respond_batch one list \
     of num_outputs per input, in request order)";

#[cfg(test)]
mod tests {
    use super::transport_finding;
    use magma_testkit::stub::RawServer;

    /// The finding's code is the cause magma-client names, a timeout is
    /// `timeout` and a cause without a name `transport`.
    #[test]
    fn transport_findings_carry_the_cause_as_their_code() {
        let cases: [(&[u8], &str); 3] = [
            (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"status\"",
                "truncated_body",
            ),
            (b"this is not http\r\n\r\n", "malformed_head"),
            (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                "bad_chunked_encoding",
            ),
        ];
        for (answer, code) in cases {
            let raw = RawServer::start(Some(answer.to_vec()));
            let client = magma_client::Client::new(raw.url()).expect("client");
            let err = client.health().expect_err("a broken answer");
            let finding = transport_finding(&err);
            assert_eq!(finding.code, code, "{err:?}");
            assert_eq!(finding.document, "http");
        }
    }
}
