//! What the proxy checks of one exchange: the route decides the documents,
//! the existing checks of the crate find the faults.

use magma_protocol::AgentRequest;
use magma_protocol::coaching::CoachingProposal;
use magma_protocol::routes::Endpoint;

use crate::check::{DocumentKind, check_coaching_exchange, check_document, exchange_report};
use crate::refusal::invalid_request_answer;
use crate::report::{Finding, Severity, body_excerpt, shorten};

/// A route of the agent contract (paths relative to the upstream base URL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Health,
    Info,
    Responses,
    CoachingOpen,
    CoachingClose,
    Coaching,
    Other,
}

impl Route {
    pub(crate) fn of(method: &str, path: &str) -> Route {
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        match (
            method,
            Endpoint::recognize(path).map(|(endpoint, _)| endpoint),
        ) {
            ("GET", Some(Endpoint::Health)) => Route::Health,
            ("GET", Some(Endpoint::Info)) => Route::Info,
            ("POST", Some(Endpoint::Responses)) => Route::Responses,
            ("POST", Some(Endpoint::Coaching)) => Route::Coaching,
            ("PUT", Some(Endpoint::CoachingSession)) => Route::CoachingOpen,
            ("DELETE", Some(Endpoint::CoachingSession)) => Route::CoachingClose,
            _ => Route::Other,
        }
    }
}

/// One finding of the proxy: the check it belongs to (a JUnit test case of
/// the summary) and the finding itself.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    pub(crate) check: &'static str,
    pub(crate) finding: Finding,
}

/// What an exchange was checked as, for the recording (`batch` kinds) and
/// the counters.
#[derive(Debug)]
pub(crate) struct Inspection {
    /// The `batch` kind of the recorded line: `exchange`, `request`,
    /// `health`, `info`, `coaching_session`, `coaching_request`,
    /// `coaching_exchange`, or `none` when there is no document to check.
    pub(crate) kind: &'static str,
    /// The checks run (each counted as passed or failed).
    pub(crate) checks: Vec<&'static str>,
    pub(crate) findings: Vec<Checked>,
}

fn push(out: &mut Vec<Checked>, check: &'static str, findings: Vec<Finding>) {
    out.extend(
        findings
            .into_iter()
            .map(|finding| Checked { check, finding }),
    );
}

fn json_content_type(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| {
        let essence = ct.split(';').next().unwrap_or("").trim();
        essence.eq_ignore_ascii_case("application/json")
            || essence.to_ascii_lowercase().ends_with("+json")
    })
}

/// Checks one exchange; `status` is the upstream's status.
pub(crate) fn inspect(
    route: Route,
    request: &[u8],
    status: u16,
    content_type: Option<&str>,
    answer: &[u8],
) -> Inspection {
    let mut findings = Vec::new();
    let mut checks = Vec::new();
    let ok = status == 200;
    let kind = match route {
        Route::Health => {
            checks.push("health");
            if ok {
                push(
                    &mut findings,
                    "health",
                    check_document(DocumentKind::Health, answer).findings,
                );
                "health"
            } else {
                findings.push(Checked {
                    check: "health",
                    finding: health_status_finding(status, answer),
                });
                "none"
            }
        }
        Route::Info => {
            checks.push("info");
            if ok {
                push(
                    &mut findings,
                    "info",
                    check_document(DocumentKind::Info, answer).findings,
                );
            } else {
                findings.push(Checked {
                    check: "info",
                    finding: status_finding(
                        status,
                        &format!("GET {}", Endpoint::Info),
                        "BENCH and GEN read /v1/info before the first episode: the run stops there",
                    ),
                });
            }
            "info"
        }
        Route::Responses => {
            checks.push("request");
            let request_report = check_document(DocumentKind::Request, request);
            let request_ok = request_report.is_conformant();
            let nan = request_report.errors().all(|f| f.code == "finite_number");
            push(&mut findings, "request", request_report.findings);
            if let Ok(parsed) = AgentRequest::from_slice(request) {
                checks.push("reinjected_payload");
                push(&mut findings, "reinjected_payload", reinjected(&parsed));
            }
            checks.push("response");
            if !request_ok {
                let what = "a request the reference refuses with 422";
                if let Some(mut finding) =
                    invalid_request_answer(status, what, &body_excerpt(answer), nan)
                {
                    // No consumer can send NaN: a 500 for it (FastAPI's own
                    // answer) is worth knowing, not a failed exchange.
                    if nan && finding.code == "server_error_on_invalid_request" {
                        finding.severity = Severity::Warning;
                    }
                    findings.push(Checked {
                        check: "response",
                        finding,
                    });
                }
            }
            if ok {
                let report = exchange_report(request, answer, true);
                // The request's own findings are above already.
                let answer_findings = report
                    .findings
                    .into_iter()
                    .filter(|f| f.document != "request")
                    .collect();
                push(&mut findings, "response", answer_findings);
                "exchange"
            } else {
                if request_ok {
                    findings.push(Checked {
                        check: "response",
                        finding: status_finding(
                            status,
                            &format!("POST {}", Endpoint::Responses),
                            "BENCH counts the episode as failed; GEN marks the node invalid",
                        ),
                    });
                }
                "request"
            }
        }
        Route::CoachingOpen => {
            checks.push("coaching_session");
            push(
                &mut findings,
                "coaching_session",
                check_document(DocumentKind::CoachingSession, request).findings,
            );
            "coaching_session"
        }
        Route::Coaching => {
            checks.push("coaching_request");
            let request_report = check_document(DocumentKind::CoachingRequest, request);
            push(&mut findings, "coaching_request", request_report.findings);
            checks.push("coaching_response");
            if ok {
                let report = check_coaching_exchange(request, answer);
                let answer_findings = report
                    .findings
                    .into_iter()
                    .filter(|f| f.document != "coaching_request" && f.document != "request")
                    .collect();
                push(&mut findings, "coaching_response", answer_findings);
                "coaching_exchange"
            } else {
                "coaching_request"
            }
        }
        Route::CoachingClose | Route::Other => "none",
    };
    if ok && kind != "none" && !json_content_type(content_type) {
        checks.push("content_type");
        findings.push(Checked {
            check: "content_type",
            finding: Finding::warning(
                "http",
                crate::Lint::ContentType.code(),
                "",
                format!(
                    "a 200 JSON answer with Content-Type {}",
                    content_type.map_or_else(|| "(none)".to_owned(), |c| format!("{c:?}"))
                ),
            )
            .with_impact(crate::Lint::ContentType.impact())
            .with_fix(crate::Lint::ContentType.fix()),
        });
    }
    Inspection {
        kind,
        checks,
        findings,
    }
}

/// `GET /health` answered something else than 200. BENCH checks it once at
/// start-up and aborts on anything but 2xx, without waiting: a `503` (not
/// ready, what reference agents answer while models load) is a warning,
/// since an orchestrator that waits for readiness polls through it; any
/// other status is an error.
fn health_status_finding(status: u16, answer: &[u8]) -> Finding {
    let what = format!("GET {}", Endpoint::Health);
    if status == 503 {
        Finding::warning(
            "http",
            "not_ready",
            "",
            format!("{what} answered 503 (not ready): {}", body_excerpt(answer)),
        )
        .with_impact(
            "BENCH aborts its start-up on anything but 2xx (it does not wait or retry); GEN \
             does not ask /health",
        )
        .with_fix(
            "start BENCH once /health answers 200; if it never does, look at the agent's \
             log for why its models do not load",
        )
    } else {
        Finding::error(
            "http",
            "http_status",
            "",
            format!("{what} answered {status}: {}", body_excerpt(answer)),
        )
        .with_impact("BENCH aborts its start-up on anything but 2xx")
        .with_fix("answer 200 {\"status\":\"ready\"} once inference is possible, 503 before")
    }
}

fn status_finding(status: u16, what: &str, impact: &str) -> Finding {
    Finding::error(
        "http",
        "http_status",
        "",
        format!("{what} answered {status} to a valid request"),
    )
    .with_impact(impact)
    .with_fix("answer 200 with a valid body; look at the agent's log for this exchange id")
}

/// `extra_keys.coaching` of each input: a payload GEN re-injects from a
/// coaching proposal, which must read as one (`kind` and its fields).
fn reinjected(request: &AgentRequest) -> Vec<Finding> {
    let mut out = Vec::new();
    for (i, input) in request.inputs().iter().enumerate() {
        let Some(value) = input.extra_keys.get("coaching") else {
            continue;
        };
        let location = format!("inputs[{i}].extra_keys.coaching");
        let sent = shorten(&value.to_json_string(), 80);
        let message = match value.as_object() {
            None => "the re-injected coaching payload is not an object".to_owned(),
            Some(obj) => match CoachingProposal::raw("", obj.clone()).payload() {
                Ok(_) => continue,
                Err(e) => {
                    let first = e.first();
                    format!(
                        "the re-injected coaching payload does not read: {} at {} ({})",
                        first.message(),
                        first.location(),
                        first.kind().as_str()
                    )
                }
            },
        };
        out.push(
            Finding::warning("request", "reinjected_payload", location, message)
                .with_input(sent)
                .with_impact(
                    "the agent finds no payload it can apply: the coached step repeats the \
                     fault GEN coached",
                )
                .with_fix(
                    "make the coach's proposals carry the payload itself in extra_keys \
                     (see the proposal_payload lint)",
                ),
        );
    }
    out
}
