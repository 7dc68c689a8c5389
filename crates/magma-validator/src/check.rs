//! `check` and `exchange`: every contract error of a document, then lints.

use magma_protocol::documents::Document;
use magma_protocol::{AgentRequest, AgentResponse, ErrorKind, Issue};
use magma_protocol::{SpecializedCoachingRequest, SpecializedCoachingResponse};

use crate::explain::{
    COACHING_MISMATCH_FIX, COACHING_MISMATCH_IMPACT, MISMATCH_FIX, MISMATCH_IMPACT, fix_for,
    invalid_document_impact,
};
use crate::lint;
use crate::report::{Finding, Report, shorten};

/// The documents of the contract, as magma-protocol registers them: the
/// four of inference, then those of the coaching extension, then those of
/// local dataset export. Their names are the `--kind` values of `check` and
/// the `kind`s of `batch`.
pub use magma_protocol::documents::{DocumentKind, UnknownKind};

/// Turns the reference's problems with a document into findings, each with
/// its location, kind, impact and fix: every one, or the first
/// [`MAX_REPORTED_ERRORS`](magma_protocol::MAX_REPORTED_ERRORS) and one
/// `too_many_errors` finding that counts the rest.
pub fn issue_findings(kind: DocumentKind, error: &magma_protocol::Error) -> Vec<Finding> {
    let mut findings: Vec<Finding> = error
        .issues()
        .iter()
        .map(|issue| issue_finding(kind.name(), invalid_document_impact(kind), issue))
        .collect();
    if error.omitted() > 0 {
        let message = format!(
            "{} more problems of the same document are not listed (the first {} are)",
            error.omitted(),
            error.issues().len()
        );
        findings.push(
            Finding::error(kind.name(), "too_many_errors", "(document)", message)
                .with_impact(invalid_document_impact(kind))
                .with_fix("fix the problems listed, then check the document again"),
        );
    }
    findings
}

pub(crate) fn issue_finding(document: &str, impact: &str, issue: &Issue) -> Finding {
    let (location, message) = match (issue.position(), issue.detail()) {
        (Some(p), Some(detail)) => (
            format!("line {} column {}", p.line, p.column),
            format!("{}: {detail}", issue.message()),
        ),
        _ => (issue.location().to_string(), issue.message().to_owned()),
    };
    let mut finding = Finding::error(document, issue.kind().as_str(), location, message)
        .with_impact(impact)
        .with_fix(fix_for(issue.kind()));
    if issue.kind() != ErrorKind::JsonInvalid {
        // One character more than shown: `shorten` marks the cut.
        if let Some(input) = issue.input_text_head(121) {
            finding = finding.with_input(shorten(&input, 120));
        }
    }
    finding
}

/// Checks one document: every contract error, then the lints that need no
/// other document (duplicate keys, `say` with tool calls, empty decisions,
/// `protocol_version`, the inference capability).
///
/// ```
/// use magma_validator::{DocumentKind, check_document};
///
/// let report = check_document(
///     DocumentKind::Request,
///     br#"{"request_id": "", "inputs": [{"id": 7.0, "instruction": {"type": "user", "content": "hi"}}]}"#,
/// );
/// let codes: Vec<(&str, &str)> = report
///     .errors()
///     .map(|f| (f.code.as_str(), f.location.as_str()))
///     .collect();
/// assert_eq!(codes, [("string_too_short", "request_id"), ("int_type", "inputs[0].id")]);
/// ```
pub fn check_document(kind: DocumentKind, bytes: &[u8]) -> Report {
    let mut report = Report::new(kind.name());
    match kind.parse(bytes) {
        Ok(Document::Response(response)) => {
            report.findings.extend(lint::response(&response, None));
            report.notes.push(
                "unknown_tool, unknown_robot and memory_list_dropped need the request: \
                 give it with --request (or use `exchange`)"
                    .to_owned(),
            );
        }
        Ok(Document::Info(info)) => report.findings.extend(lint::info(&info)),
        Ok(Document::CoachingResponse(response)) => {
            report.findings.extend(lint::coaching_response(&response));
            report.notes.push(
                "whether the reply answers its request (request_id, reinjection point \
                 ids) needs the request: give it with --request (or use `exchange \
                 --coaching`)"
                    .to_owned(),
            );
        }
        // The other documents have no lint of their own.
        Ok(_) => {}
        Err(e) => report.findings.extend(issue_findings(kind, &e)),
    }
    report
        .findings
        .extend(lint::duplicate_keys(kind.name(), bytes));
    name_trailing_commas(bytes, &mut report.findings);
    report.sort();
    report
}

/// A JSON syntax error at a closing `}` or `]` right after a comma is a
/// trailing comma: the reference's words (`expected a value`, located as
/// FastAPI does) stay, and the finding says what it is and how to fix it.
fn name_trailing_commas(bytes: &[u8], findings: &mut [Finding]) {
    for finding in findings.iter_mut().filter(|f| f.code == "json_invalid") {
        let Some((line, column)) = finding
            .location
            .strip_prefix("line ")
            .and_then(|rest| rest.split_once(" column "))
            .and_then(|(l, c)| Some((l.parse().ok()?, c.parse().ok()?)))
        else {
            continue;
        };
        let Some((close, comma_line, comma_column)) = trailing_comma(bytes, line, column) else {
            continue;
        };
        finding.message = format!(
            "{}: a trailing comma: the ',' at line {comma_line} column {comma_column} is \
             followed by '{close}', and JSON allows no comma before a closing bracket",
            finding.message
        );
        finding.fix = format!(
            "remove the ',' at line {comma_line} column {comma_column} (JSON, unlike \
             JavaScript or Python literals, has no trailing commas; json.dumps never writes one)"
        );
    }
}

/// `(closing bracket, line, column)` of a comma followed only by whitespace
/// and the `}` or `]` at 1-based `line` and `column` (in characters).
fn trailing_comma(bytes: &[u8], line: usize, column: usize) -> Option<(char, usize, usize)> {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.split('\n').collect();
    let close = lines
        .get(line.checked_sub(1)?)?
        .chars()
        .nth(column.checked_sub(1)?)?;
    if close != '}' && close != ']' {
        return None;
    }
    // Walk back from the bracket over whitespace, across lines.
    let (mut l, mut c) = (line - 1, column - 1);
    loop {
        let chars: Vec<char> = lines[l].chars().collect();
        while c > 0 {
            c -= 1;
            match chars[c] {
                ' ' | '\t' | '\r' => {}
                ',' => return Some((close, l + 1, c + 1)),
                _ => return None,
            }
        }
        l = l.checked_sub(1)?;
        c = lines[l].chars().count();
    }
}

/// Checks a request and its response together: both documents, the
/// candidate sequence (where it first differs), and the lints that need
/// both (tool names, robots, `memory_list`).
///
/// ```
/// use magma_validator::check_exchange;
///
/// let request = br#"{"request_id": "r", "inputs": [{"id": 7, "instruction": {"type": "user", "content": "hi"}, "num_outputs": 2}]}"#;
/// let response = br#"[{"request_id": "r", "source_id": 7, "candidate_index": 1, "status": "completed", "memory": {}, "output": {"say": "hello"}}]"#;
/// let report = check_exchange(request, response);
/// let mismatch = report.errors().next().unwrap();
/// assert_eq!(mismatch.code, "candidates_mismatch");
/// assert!(mismatch.message.contains("candidate 0 should be"));
/// ```
pub fn check_exchange(request: &[u8], response: &[u8]) -> Report {
    exchange_report(request, response, false)
}

/// [`check_exchange`], and with `error_candidates` a warning for each
/// candidate that is an error (the proxy's view of a run: which exchange
/// carried errors and why; a single document check leaves them out, since
/// an error candidate is valid on the wire).
pub(crate) fn exchange_report(request: &[u8], response: &[u8], error_candidates: bool) -> Report {
    let mut report = Report::new("exchange");
    let req = AgentRequest::from_slice(request);
    let resp = AgentResponse::from_slice(response);
    if let Err(e) = &req {
        report
            .findings
            .extend(issue_findings(DocumentKind::Request, e));
    }
    if let Err(e) = &resp {
        report
            .findings
            .extend(issue_findings(DocumentKind::Response, e));
    }
    match (&req, &resp) {
        (Ok(req), Ok(resp)) => {
            if let Err(m) = resp.validate_request(req) {
                report.findings.push(mismatch_finding(&m));
            }
            report.findings.extend(lint::response(resp, Some(req)));
        }
        (Err(_), Ok(resp)) => {
            report.findings.extend(lint::response(resp, None));
            report.notes.push(
                "the request is invalid: the candidate sequence and the lints that need \
                 the request were not checked"
                    .to_owned(),
            );
        }
        (_, Err(_)) => {}
    }
    if let (true, Ok(resp)) = (error_candidates, &resp) {
        report.findings.extend(lint::error_candidates(resp));
    }
    report
        .findings
        .extend(lint::duplicate_keys("request", request));
    report
        .findings
        .extend(lint::duplicate_keys("response", response));
    report.sort();
    report
}

pub(crate) fn mismatch_finding(m: &magma_protocol::CandidateMismatch) -> Finding {
    let issue = m.to_issue();
    Finding::error(
        "exchange",
        ErrorKind::CandidatesMismatch.as_str(),
        issue.location().to_string(),
        m.to_string(),
    )
    .with_impact(MISMATCH_IMPACT)
    .with_fix(MISMATCH_FIX)
}

/// Checks a coaching request and its reply together: both documents, then
/// the reference's `validate_request` (the reply echoes the request's
/// `request_id`, and every proposal names one of its reinjection points).
///
/// ```
/// use magma_validator::check_coaching_exchange;
///
/// let request = br#"{"run_id": "run", "request_id": "r1", "kind": "format",
///     "stage": {"id": 0, "goal": "g"}, "target_step_id": 1,
///     "trajectory": [{"id": 1, "input": {"id": 0, "instruction": {"type": "user", "content": "hi"}}}],
///     "reinjection_points": [{"id": "p1", "input_step_id": 1}]}"#;
/// let reply = br#"{"request_id": "r1", "status": "corrected",
///     "proposals": [{"reinjection_point_id": "p2", "extra_keys": {}}]}"#;
/// let report = check_coaching_exchange(request, reply);
/// let mismatch = report.errors().next().unwrap();
/// assert_eq!(mismatch.code, "coaching_mismatch");
/// assert_eq!(mismatch.location, "proposals[0].reinjection_point_id");
/// ```
pub fn check_coaching_exchange(request: &[u8], response: &[u8]) -> Report {
    let mut report = Report::new("exchange");
    let req = SpecializedCoachingRequest::from_slice(request);
    let resp = SpecializedCoachingResponse::from_slice(response);
    if let Err(e) = &req {
        report
            .findings
            .extend(issue_findings(DocumentKind::CoachingRequest, e));
    }
    if let Err(e) = &resp {
        report
            .findings
            .extend(issue_findings(DocumentKind::CoachingResponse, e));
    }
    if let Ok(resp) = &resp {
        report.findings.extend(lint::coaching_response(resp));
    }
    match (&req, &resp) {
        (Ok(req), Ok(resp)) => {
            if let Err(e) = resp.validate_request(req) {
                report.findings.extend(coaching_mismatch_findings(&e));
            }
        }
        (Err(_), Ok(_)) => report.notes.push(
            "the request is invalid: whether the reply answers it was not checked".to_owned(),
        ),
        (_, Err(_)) => {}
    }
    report
        .findings
        .extend(lint::duplicate_keys("request", request));
    report
        .findings
        .extend(lint::duplicate_keys("response", response));
    report.sort();
    report
}

/// The findings of a failed `SpecializedCoachingResponse::validate_request`.
pub(crate) fn coaching_mismatch_findings(e: &magma_protocol::Error) -> Vec<Finding> {
    e.issues()
        .iter()
        .map(|issue| {
            let mut finding = Finding::error(
                "exchange",
                ErrorKind::CoachingMismatch.as_str(),
                issue.location().to_string(),
                issue.message().to_owned(),
            )
            .with_impact(COACHING_MISMATCH_IMPACT)
            .with_fix(COACHING_MISMATCH_FIX);
            if let Some(input) = issue.input_text_head(121) {
                finding = finding.with_input(shorten(&input, 120));
            }
            finding
        })
        .collect()
}
