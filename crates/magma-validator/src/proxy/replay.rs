//! `magma-validate replay FILE --agent URL`: the recorded requests sent to
//! another agent, each answer checked and its decisions compared with the
//! recorded ones.

use std::fmt::Write as _;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::Duration;

use magma_client::{Client, RawRequest};
use magma_protocol::{AgentResponse, Outcome};
use serde::Serialize;

use super::inspect::{Route, inspect};
use super::record::{RecordedExchange, RecordedFinding};

/// How `replay` reaches the other agent.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReplayConfig {
    /// The agent's base URL.
    pub agent: String,
    /// PEM CA certificates to trust for `https`.
    pub cacert: Option<PathBuf>,
    /// PEM client certificate and key for mutual TLS.
    pub client_identity: Option<(PathBuf, PathBuf)>,
    /// Seconds one call may take.
    pub timeout: Duration,
}

impl ReplayConfig {
    /// Replay against `agent` with the defaults.
    pub fn new(agent: impl Into<String>) -> ReplayConfig {
        ReplayConfig {
            agent: agent.into(),
            cacert: None,
            client_identity: None,
            timeout: magma_client::DEFAULT_TIMEOUT,
        }
    }
}

/// One replayed exchange.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayExchange {
    /// The recorded exchange id.
    pub id: u64,
    /// Method and path.
    pub route: String,
    /// The recorded status.
    pub recorded_status: u16,
    /// The new agent's status (`None`: it could not be reached).
    pub status: Option<u16>,
    /// Contract findings on the new answer.
    pub findings: Vec<RecordedFinding>,
    /// How the new answer differs from the recorded one.
    pub differences: Vec<String>,
}

/// The result of a replay.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplayReport {
    /// The agent replayed against.
    pub agent: String,
    /// Exchanges replayed.
    pub exchanges: Vec<ReplayExchange>,
    /// Recorded lines not replayed, with why (line number: reason).
    pub skipped: Vec<String>,
}

impl ReplayReport {
    /// Exchanges whose answer differs from the recorded one.
    pub fn different(&self) -> usize {
        self.exchanges
            .iter()
            .filter(|e| !e.differences.is_empty())
            .count()
    }

    /// Exchanges with an error finding.
    pub fn failed(&self) -> usize {
        self.exchanges
            .iter()
            .filter(|e| e.findings.iter().any(|f| f.severity == "error"))
            .count()
    }

    /// 0: same answers and no contract error; 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.different() > 0 || self.failed() > 0)
    }
}

/// Why a replay could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The agent URL or its TLS files are not usable.
    #[error("agent {url}: {why}")]
    Agent {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// The recording cannot be read.
    #[error("cannot read the recording: {0}")]
    Read(#[from] std::io::Error),
}

fn recorded_request(r: &RecordedExchange) -> Option<&str> {
    match r.kind.as_str() {
        "exchange" | "coaching_exchange" => r.request.as_deref(),
        "request" | "coaching_request" | "coaching_session" => r.doc.as_deref(),
        _ => r.request_body.as_ref().and_then(|b| b.text.as_deref()),
    }
}

fn recorded_answer(r: &RecordedExchange) -> Option<&str> {
    match r.kind.as_str() {
        "exchange" | "coaching_exchange" => r.doc.as_deref(),
        _ => r.answer_body.as_ref().and_then(|b| b.text.as_deref()),
    }
}

/// Replays every `POST /v1/responses` and coaching exchange of the
/// recording, in order.
pub fn replay(input: impl BufRead, config: &ReplayConfig) -> Result<ReplayReport, ReplayError> {
    let mut builder = Client::builder(config.agent.clone()).timeout(config.timeout);
    if let Some(ca) = &config.cacert {
        builder = builder.ca_file(ca.clone());
    }
    if let Some((cert, key)) = &config.client_identity {
        builder = builder.client_identity_files(cert.clone(), key.clone());
    }
    let client = builder.build().map_err(|e| ReplayError::Agent {
        url: config.agent.clone(),
        why: e.to_string(),
    })?;
    let mut report = ReplayReport {
        agent: config.agent.clone(),
        ..ReplayReport::default()
    };
    // Lines are written as their checks end: the ids give the order in
    // which the consumer sent them (a session before its coaching requests).
    let mut recorded_lines = Vec::new();
    for (n, line) in input.lines().enumerate() {
        let line = line?;
        let number = n + 1;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<RecordedExchange>(&line) {
            Ok(r) => recorded_lines.push((number, r)),
            Err(e) => report
                .skipped
                .push(format!("line {number}: not a recorded exchange: {e}")),
        }
    }
    recorded_lines.sort_by_key(|(_, r)| r.id);
    for (number, recorded) in recorded_lines {
        let route = Route::of(&recorded.method, &recorded.path);
        if matches!(route, Route::Health | Route::Info | Route::Other) {
            continue;
        }
        let request = match recorded_request(&recorded) {
            Some(r) => r,
            None if recorded.method == "DELETE" => "",
            None => {
                report.skipped.push(format!(
                    "line {number} (exchange {}): the request was recorded by digest",
                    recorded.id
                ));
                continue;
            }
        };
        let Ok(method) = recorded.method.parse::<http::Method>() else {
            report
                .skipped
                .push(format!("line {number}: method {:?}", recorded.method));
            continue;
        };
        let mut raw = RawRequest::new(method, recorded.path.clone());
        if !request.is_empty() {
            raw = raw.json(request.to_owned());
        }
        let mut exchange = ReplayExchange {
            id: recorded.id,
            route: format!("{} {}", recorded.method, recorded.path),
            recorded_status: recorded.status,
            status: None,
            findings: Vec::new(),
            differences: Vec::new(),
        };
        match client.execute(raw) {
            Err(e) => exchange
                .differences
                .push(format!("the agent could not be reached: {e}")),
            Ok(answer) => {
                let status = answer.status().as_u16();
                exchange.status = Some(status);
                let ct = answer
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok());
                let inspection = inspect(route, request.as_bytes(), status, ct, answer.body());
                exchange.findings = inspection
                    .findings
                    .iter()
                    .filter(|c| c.check != "request" && c.check != "coaching_request")
                    .map(|c| RecordedFinding::new(c.check, &c.finding))
                    .collect();
                if status != recorded.status {
                    exchange
                        .differences
                        .push(format!("status {status}, recorded {}", recorded.status));
                } else if route == Route::Responses && status == 200 {
                    match recorded_answer(&recorded) {
                        Some(old) => {
                            exchange.differences =
                                decision_differences(old.as_bytes(), answer.body());
                        }
                        None => exchange.differences.push(
                            "the recorded answer is by digest: decisions not compared".to_owned(),
                        ),
                    }
                } else if route == Route::Coaching && status == 200 {
                    if let Some(old) = recorded_answer(&recorded) {
                        exchange.differences = proposal_differences(old.as_bytes(), answer.body());
                    }
                }
            }
        }
        report.exchanges.push(exchange);
    }
    Ok(report)
}

/// How two answers to the same `/v1/responses` request differ, candidate by
/// candidate: status, `say`, tool calls.
fn decision_differences(old: &[u8], new: &[u8]) -> Vec<String> {
    let (old, new) = match (
        AgentResponse::from_slice(old),
        AgentResponse::from_slice(new),
    ) {
        (Ok(o), Ok(n)) => (o, n),
        (Err(_), Err(_)) => return Vec::new(),
        (Err(_), Ok(_)) => {
            return vec!["the recorded answer was invalid, the new one is valid".to_owned()];
        }
        (Ok(_), Err(_)) => return vec!["the new answer is invalid (see the findings)".to_owned()],
    };
    let mut out = Vec::new();
    let (o, n) = (old.candidates(), new.candidates());
    if o.len() != n.len() {
        out.push(format!("{} candidates, recorded {}", n.len(), o.len()));
    }
    for (i, (a, b)) in o.iter().zip(n).enumerate() {
        let at = format!(
            "[{i}] (input {}, candidate {})",
            b.source_id, b.candidate_index
        );
        match (&a.outcome, &b.outcome) {
            (Outcome::Completed(x), Outcome::Completed(y)) => {
                if x.say != y.say {
                    out.push(format!("{at}: say {:?}, recorded {:?}", y.say, x.say));
                }
                if x.tool_calls != y.tool_calls {
                    let names = |d: &magma_protocol::AgentDecision| -> Vec<String> {
                        d.tool_calls
                            .iter()
                            .map(|t| {
                                format!("{}@{}", t.name.as_str(), t.target_robot_name.as_str())
                            })
                            .collect()
                    };
                    out.push(format!(
                        "{at}: tool calls [{}], recorded [{}]{}",
                        names(y).join(", "),
                        names(x).join(", "),
                        if names(x) == names(y) {
                            " (same tools, other arguments)"
                        } else {
                            ""
                        }
                    ));
                }
            }
            (Outcome::Error(_), Outcome::Error(_)) => {}
            (_, Outcome::Error(e)) => {
                out.push(format!(
                    "{at}: an error candidate ({}), recorded completed",
                    e.message
                ));
            }
            (Outcome::Error(_), _) => {
                out.push(format!("{at}: completed, recorded an error candidate"));
            }
        }
    }
    out
}

/// How two coaching replies differ: their status and proposals.
fn proposal_differences(old: &[u8], new: &[u8]) -> Vec<String> {
    let parse = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).ok();
    let (Some(old), Some(new)) = (parse(old), parse(new)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for key in ["status", "proposals"] {
        if old.get(key) != new.get(key) {
            out.push(format!(
                "{key} {}, recorded {}",
                new.get(key)
                    .map_or_else(|| "absent".to_owned(), ToString::to_string),
                old.get(key)
                    .map_or_else(|| "absent".to_owned(), ToString::to_string)
            ));
        }
    }
    out
}

/// The replay as text.
pub fn replay_human(r: &ReplayReport) -> String {
    let mut out = String::new();
    for e in &r.exchanges {
        if e.differences.is_empty() && e.findings.is_empty() {
            continue;
        }
        let _ = writeln!(out, "exchange {} {}:", e.id, e.route);
        for d in &e.differences {
            let _ = writeln!(out, "  different: {d}");
        }
        for f in &e.findings {
            let at = if f.location.is_empty() {
                String::new()
            } else {
                format!(" at {}", f.location)
            };
            let _ = writeln!(
                out,
                "  {} {} {}{at}: {}",
                f.check, f.severity, f.code, f.message
            );
        }
    }
    for s in &r.skipped {
        let _ = writeln!(out, "skipped: {s}");
    }
    let _ = writeln!(
        out,
        "magma-validate replay: {} exchanges against {}: {} same, {} different, {} with contract errors",
        r.exchanges.len(),
        r.agent,
        r.exchanges.len() - r.different(),
        r.different(),
        r.failed()
    );
    out
}

/// The replay as JSON.
pub fn replay_json(r: &ReplayReport) -> String {
    let mut text = serde_json::to_string_pretty(r).unwrap_or_default();
    text.push('\n');
    text
}
