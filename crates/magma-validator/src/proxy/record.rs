//! `--record FILE`: one JSON line per exchange, in `batch`'s case format
//! (`kind`, `doc`, `request` as the documents' text) plus what was seen.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::report::Finding;

/// One recorded exchange. `kind`, `doc` and `request` are a case of
/// `magma-validate batch`; the other fields say what happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedExchange {
    /// The exchange id of the proxy's log lines.
    pub id: u64,
    /// The `batch` kind of the line (`exchange`, `request`, `health`,
    /// `info`, `coaching_session`, `coaching_request`, `coaching_exchange`,
    /// or `none` when nothing was checked).
    pub kind: String,
    /// The checked document (the answer, or the request when the answer is
    /// not a document), as text; absent when it is recorded by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    /// The request body the answer is checked against, for `exchange` and
    /// `coaching_exchange`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The method.
    pub method: String,
    /// The path and query, relative to the upstream URL.
    pub path: String,
    /// The request body (as text), when it is not `doc` or `request`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_body: Option<Body>,
    /// The answer body, when it is not `doc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_body: Option<Body>,
    /// The upstream's status, or the proxy's own (`502`, `504`, `413`).
    pub status: u16,
    /// Milliseconds since the Unix epoch when the request arrived.
    pub started_ms: u64,
    /// Milliseconds from the request's arrival to the whole answer.
    pub latency_ms: f64,
    /// Keys whose values were replaced by `"[redacted]"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    /// Documents recorded by digest (over the size limit) or not UTF-8.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub digests: Vec<Digest>,
    /// The findings of the exchange.
    pub findings: Vec<RecordedFinding>,
}

/// A body kept in the recording when it is neither `doc` nor `request`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Body {
    /// The text, absent when recorded by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A body recorded by its digest instead of its bytes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Digest {
    /// Which body: `doc`, `request`, `request_body` or `answer_body`.
    pub field: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Lowercase hex SHA-256 of the bytes.
    pub sha256: String,
    /// Why: `size` (over `--record-body-limit`) or `not_utf8`.
    pub reason: String,
}

/// A finding as recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedFinding {
    /// The proxy check it belongs to (`request`, `response`, ...).
    pub check: String,
    /// `error` or `warning`.
    pub severity: String,
    /// The code (pydantic error type or lint name).
    pub code: String,
    /// Where in the document.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

impl RecordedFinding {
    pub(crate) fn new(check: &str, f: &Finding) -> RecordedFinding {
        RecordedFinding {
            check: check.to_owned(),
            severity: f.severity.as_str().to_owned(),
            code: f.code.clone(),
            location: f.location.clone(),
            message: f.message.clone(),
        }
    }
}

/// Lowercase hex SHA-256.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = String::with_capacity(64);
    for b in digest.as_ref() {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The text of a body for the recording: itself, or `None` with a digest
/// entry when it is over `limit` bytes or not UTF-8. `redact` replaces the
/// values of those keys inside every `memory` object (re-serialising the
/// document only when a key was found).
pub(crate) fn body_text(
    field: &str,
    bytes: &[u8],
    limit: usize,
    redact: &[String],
    redacted: &mut Vec<String>,
    digests: &mut Vec<Digest>,
) -> Option<String> {
    let digest = |reason: &str| Digest {
        field: field.to_owned(),
        bytes: bytes.len() as u64,
        sha256: sha256_hex(bytes),
        reason: reason.to_owned(),
    };
    if bytes.len() > limit {
        digests.push(digest("size"));
        return None;
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        digests.push(digest("not_utf8"));
        return None;
    };
    if redact.is_empty() || !redact.iter().any(|k| text.contains(k.as_str())) {
        return Some(text.to_owned());
    }
    let Ok(mut value) = serde_json::from_str::<Value>(text) else {
        return Some(text.to_owned());
    };
    let mut found = Vec::new();
    redact_memory(&mut value, redact, &mut found);
    if found.is_empty() {
        return Some(text.to_owned());
    }
    for key in found {
        if !redacted.contains(&key) {
            redacted.push(key);
        }
    }
    Some(value.to_string())
}

fn redact_memory(value: &mut Value, keys: &[String], found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (name, v) in map.iter_mut() {
                if name == "memory" {
                    if let Value::Object(memory) = v {
                        for key in keys {
                            if let Some(slot) = memory.get_mut(key) {
                                *slot = Value::String("[redacted]".to_owned());
                                found.push(key.clone());
                            }
                        }
                    }
                }
                redact_memory(v, keys, found);
            }
        }
        Value::Array(items) => {
            for v in items {
                redact_memory(v, keys, found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_replaces_memory_keys_only() {
        let doc = br#"[{"memory":{"token":"abc","n":1},"output":{"say":"token"}}]"#;
        let mut redacted = Vec::new();
        let mut digests = Vec::new();
        let text = body_text(
            "doc",
            doc,
            1 << 20,
            &["token".to_owned()],
            &mut redacted,
            &mut digests,
        )
        .unwrap();
        assert!(text.contains(r#""token":"[redacted]""#), "{text}");
        assert!(text.contains(r#""say":"token""#), "{text}");
        assert_eq!(redacted, ["token"]);
    }

    #[test]
    fn large_bodies_go_by_digest() {
        let mut redacted = Vec::new();
        let mut digests = Vec::new();
        assert!(body_text("doc", b"abc", 2, &[], &mut redacted, &mut digests).is_none());
        assert_eq!(
            digests[0].sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digests[0].reason, "size");
    }
}
