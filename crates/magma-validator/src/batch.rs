//! `batch`: one verdict per JSON Lines case, fast, in order.

use std::borrow::Cow;
use std::io::{self, BufRead, Write};

use magma_protocol::documents::CaseKind;
use magma_protocol::{ErrorKind, ExchangeError, Issue, Segment};
use serde::Deserialize;

/// The verdict on one case: accepted or rejected, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `true` for `accept`.
    pub accept: bool,
    /// `ok`; `json_invalid`; `<type>@<dotted.loc>` of the first problem
    /// (`int_type@inputs.0.id`, just `<type>` at the root);
    /// `candidates_mismatch`; `request:<type>@<loc>` for an exchange whose
    /// request is invalid; `invalid_line:<what>` for a line that is not a
    /// case.
    pub reason: String,
}

impl Verdict {
    fn ok() -> Verdict {
        Verdict {
            accept: true,
            reason: "ok".to_owned(),
        }
    }

    fn reject(reason: impl Into<String>) -> Verdict {
        Verdict {
            accept: false,
            reason: reason.into(),
        }
    }

    /// `accept` or `reject`.
    pub fn word(&self) -> &'static str {
        if self.accept { "accept" } else { "reject" }
    }
}

/// The reason for one problem: `json_invalid`, or `<type>@<dotted.loc>`
/// (`int_type@inputs.0.id`), or `<type>` for the document root.
pub fn reason_of(issue: &Issue) -> String {
    if issue.kind() == ErrorKind::JsonInvalid {
        return "json_invalid".to_owned();
    }
    let segments = issue.location().segments();
    let mut reason = issue.kind().as_str().to_owned();
    for (i, seg) in segments.iter().enumerate() {
        reason.push(if i == 0 { '@' } else { '.' });
        match seg {
            Segment::Key(k) => reason.push_str(k),
            Segment::Index(n) => reason.push_str(&n.to_string()),
        }
    }
    reason
}

fn first_reason(e: &magma_protocol::Error) -> String {
    reason_of(e.first())
}

/// The verdict on one case, exactly as magma-protocol gives it. `kind` is
/// a document kind of the registry (`request`, `response`, `info`,
/// `health`, the coaching and export documents: see
/// [`DocumentKind`](crate::DocumentKind)) or an exchange, which needs
/// `request`: `exchange` (reason `candidates_mismatch` when the candidates
/// do not match) or `coaching_exchange` (a reply with the request it
/// answers; reason `coaching_mismatch` when `validate_request` fails).
pub fn verdict(kind: &str, doc: &[u8], request: Option<&[u8]>) -> Verdict {
    let result = match kind.parse() {
        Ok(CaseKind::Document(kind)) => kind.parse(doc).map(drop),
        Ok(CaseKind::Exchange(kind)) => {
            let Some(request) = request else {
                return Verdict::reject("invalid_line:missing_request");
            };
            return match kind.validate(request, doc) {
                Ok(()) => Verdict::ok(),
                Err(ExchangeError::Request(e)) => {
                    Verdict::reject(format!("request:{}", first_reason(&e)))
                }
                Err(ExchangeError::Response(e)) => Verdict::reject(first_reason(&e)),
                // A mismatch is named by its kind alone (`candidates_mismatch`,
                // `coaching_mismatch`).
                Err(other) => Verdict::reject(
                    other
                        .issues()
                        .first()
                        .map_or("invalid", |issue| issue.kind().as_str()),
                ),
            };
        }
        _ => return Verdict::reject("invalid_line:unknown_kind"),
    };
    match result {
        Ok(()) => Verdict::ok(),
        Err(e) => Verdict::reject(first_reason(&e)),
    }
}

#[derive(Deserialize)]
struct Case<'a> {
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    doc: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request: Option<Cow<'a, str>>,
}

/// The verdict on one input line (without its line ending).
pub fn line_verdict(line: &[u8]) -> Verdict {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return Verdict::reject("invalid_line:empty");
    }
    // Only an object is a case (serde would also read a struct from an array).
    if trimmed[0] != b'{' {
        return Verdict::reject(diagnose(trimmed));
    }
    let case: Case<'_> = match serde_json::from_slice(trimmed) {
        Ok(case) => case,
        Err(_) => return Verdict::reject(diagnose(trimmed)),
    };
    let Some(kind) = case.kind else {
        return Verdict::reject("invalid_line:missing_kind");
    };
    let Some(doc) = case.doc else {
        return Verdict::reject("invalid_line:missing_doc");
    };
    verdict(
        &kind,
        doc.as_bytes(),
        case.request.as_deref().map(str::as_bytes),
    )
}

/// Why a line is not a case.
fn diagnose(line: &[u8]) -> String {
    let what = match serde_json::from_slice::<serde::de::IgnoredAny>(line) {
        Err(_) => "not_json",
        Ok(_) if line.first() != Some(&b'{') => "not_object",
        Ok(_) => "bad_fields",
    };
    format!("invalid_line:{what}")
}

/// Counts of a batch run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Lines read (each got one output line).
    pub lines: u64,
    /// Accepted cases.
    pub accepted: u64,
    /// Rejected cases and invalid lines.
    pub rejected: u64,
}

/// Reads JSON Lines cases (`{"kind","doc","request"?}`, other keys ignored)
/// and writes one `{"verdict","reason"}` line per input line, in order. A
/// line that is not a case gets a `reject` with an `invalid_line:` reason,
/// so the output stays aligned with the input. Only I/O fails.
pub fn run_batch(mut input: impl BufRead, mut output: impl Write) -> io::Result<BatchStats> {
    let mut stats = BatchStats::default();
    let mut line = Vec::with_capacity(64 * 1024);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let mut text: &[u8] = &line;
        if stats.lines == 0 {
            text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        }
        let text = text.strip_suffix(b"\n").unwrap_or(text);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        let v = line_verdict(text);
        stats.lines += 1;
        if v.accept {
            stats.accepted += 1;
        } else {
            stats.rejected += 1;
        }
        output.write_all(b"{\"verdict\":\"")?;
        output.write_all(v.word().as_bytes())?;
        output.write_all(b"\",\"reason\":")?;
        serde_json::to_writer(&mut output, &v.reason).map_err(io::Error::other)?;
        output.write_all(b"}\n")?;
    }
    output.flush()?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &str) -> Vec<String> {
        let mut out = Vec::new();
        run_batch(input.as_bytes(), &mut out).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn reasons_name_the_first_problem() {
        let lines = run(concat!(
            r#"{"kind":"request","doc":"{\"request_id\":\"r\",\"inputs\":[{\"id\":7.0,\"instruction\":{\"type\":\"user\",\"content\":\"\"}}]}","id":"x"}"#,
            "\n",
            r#"{"kind":"health","doc":"{}"}"#,
            "\n",
            r#"{"kind":"health","doc":"[]"}"#,
            "\n",
            r#"{"kind":"info","doc":"{"}"#,
            "\n",
        ));
        assert_eq!(
            lines,
            [
                r#"{"verdict":"reject","reason":"int_type@inputs.0.id"}"#,
                r#"{"verdict":"accept","reason":"ok"}"#,
                r#"{"verdict":"reject","reason":"model_type"}"#,
                r#"{"verdict":"reject","reason":"json_invalid"}"#,
            ]
        );
    }

    #[test]
    fn exchanges_say_which_side_failed() {
        let req = r#"{\"request_id\":\"r\",\"inputs\":[{\"id\":1,\"instruction\":{\"type\":\"user\",\"content\":\"\"},\"num_outputs\":2}]}"#;
        let one = r#"[{\"request_id\":\"r\",\"source_id\":1,\"candidate_index\":0,\"status\":\"completed\",\"memory\":{},\"output\":{}}]"#;
        let input = format!(
            "{{\"kind\":\"exchange\",\"doc\":\"{one}\",\"request\":\"{req}\"}}\n\
             {{\"kind\":\"exchange\",\"doc\":\"[]\",\"request\":\"{{\\\"inputs\\\":[]}}\"}}\n\
             {{\"kind\":\"exchange\",\"doc\":\"[]\"}}\n"
        );
        assert_eq!(
            run(&input),
            [
                r#"{"verdict":"reject","reason":"candidates_mismatch"}"#,
                r#"{"verdict":"reject","reason":"request:missing@request_id"}"#,
                r#"{"verdict":"reject","reason":"invalid_line:missing_request"}"#,
            ]
        );
    }

    #[test]
    fn every_line_gets_an_answer() {
        let lines = run(
            "\n[1,2]\nnot json\n{\"doc\":\"{}\"}\n{\"kind\":\"x\",\"doc\":\"{}\"}\n{\"kind\":\"health\",\"doc\":5}\n{\"kind\":\"health\",\"doc\":\"{}\"}",
        );
        let reasons: Vec<&str> = lines
            .iter()
            .map(|l| {
                l.split("\"reason\":\"")
                    .nth(1)
                    .unwrap()
                    .trim_end_matches("\"}")
            })
            .collect();
        assert_eq!(
            reasons,
            [
                "invalid_line:empty",
                "invalid_line:not_object",
                "invalid_line:not_json",
                "invalid_line:missing_kind",
                "invalid_line:unknown_kind",
                "invalid_line:bad_fields",
                "ok"
            ]
        );
    }
}
