//! The endpoints around inference: readiness, `/health`, `/v1/info`,
//! unknown paths and methods, content types.

use std::time::{Duration, Instant};

use magma_client::ErrorKind;
use magma_client::RawRequest;
use magma_client::http::header::ALLOW;
use magma_client::http::{Method, StatusCode};
use magma_protocol::routes::Endpoint;
use magma_protocol::{AgentHealth, AgentInfo};

use super::CheckDef;
use crate::probe::session::{
    Ready, Session, as_error, body_excerpt, content_type_finding, push_capped, tls_error,
    transport_finding,
};
use crate::probe::{AgentIdentity, Check, CheckSeverity, ProbeError, Progress};
use crate::report::Finding;
use crate::{DocumentKind, lint};

/// Run first.
pub(super) const FIRST: &[CheckDef] = &[
    CheckDef::new(
        "health",
        "GET /health answers 200 {\"status\":\"ready\"}",
        CheckSeverity::Fail,
        "BENCH (start-up)",
        health,
    ),
    CheckDef::new(
        "info",
        "GET /v1/info: strict fields, protocol_version 2.0, inference capability",
        CheckSeverity::Fail,
        "BENCH and GEN (start-up)",
        info,
    ),
];

/// Run after the inference and invalid-request checks.
pub(super) const LAST: &[CheckDef] = &[
    CheckDef::new(
        "unknown-path",
        "an unknown path is answered 404",
        CheckSeverity::Warn,
        "none: BENCH and GEN call three known paths only",
        unknown_path,
    ),
    CheckDef::new(
        "wrong-method",
        "a wrong method is answered 405 with Allow",
        CheckSeverity::Warn,
        "none: BENCH and GEN use the right methods",
        wrong_method,
    ),
    CheckDef::new(
        "health-after",
        "still healthy after the suite",
        CheckSeverity::Fail,
        "BENCH and GEN (the run stops with the agent)",
        health_after,
    ),
    CheckDef::new(
        "content-type",
        "2xx JSON answers carry Content-Type: application/json",
        CheckSeverity::Warn,
        "none: BENCH and GEN decode the body whatever its type; other clients may not",
        content_types,
    ),
];

const HEALTH_IMPACT: &str = "BENCH calls GET /health once at start-up and aborts on anything \
     but 2xx with a valid AgentHealth (it does not wait); GEN does not call /health";
const INFO_STATUS_IMPACT: &str = "BENCH and GEN call GET /v1/info at start-up: a non-2xx \
     answer stops both (GEN: RuntimeError with the body)";
const UNKNOWN_PATH_IMPACT: &str = "a client with a wrong base URL or path prefix must get an \
     error; an agent that answers 2xx on any path hides the misconfiguration";
const METHOD_IMPACT: &str = "405 with an Allow header tells a client it used the wrong \
     method; anything else hides the mistake or reports it as an agent crash";

const READY_PAUSE_MAX: Duration = Duration::from_millis(500);
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Waits for `GET /health` to answer something else than 503 while the
/// agent refuses connections or answers 503, up to the ready timeout;
/// keeps the answer for the `health` check.
pub(in crate::probe) fn wait_ready(
    s: &mut Session,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<(), ProbeError> {
    let health = Endpoint::Health;
    let started = Instant::now();
    let limit = s.config.ready_timeout;
    let deadline = started + limit;
    let mut pause = Duration::from_millis(50);
    let mut attempts = 0u32;
    let mut reported: Option<Instant> = None;
    loop {
        attempts += 1;
        let now = Instant::now();
        let last = match s.get(health.path()) {
            Err(e) => match e.kind() {
                ErrorKind::Tls(why) => return Err(tls_error(why, &s.config)),
                _ if e.is_connect() => e.kind().to_string(),
                ErrorKind::Timeout(d) => format!("no answer within --timeout {}s", d.as_secs_f64()),
                ErrorKind::Transport(_) => {
                    let hint = if s.base_url().starts_with("http://") {
                        " (if the agent serves HTTPS, use an https:// URL)"
                    } else {
                        ""
                    };
                    return Err(ProbeError::Unreachable(format!(
                        "GET {}{health}: no HTTP answer: {e}{hint}",
                        s.base_url()
                    )));
                }
                _ => {
                    return Err(ProbeError::Unreachable(format!(
                        "GET {}{health}: {e}",
                        s.base_url()
                    )));
                }
            },
            Ok(r) if r.status() == StatusCode::SERVICE_UNAVAILABLE => {
                format!("503 {}", body_excerpt(&r))
            }
            Ok(answer) => {
                s.ready = Some(Ready {
                    answer,
                    attempts,
                    waited: started.elapsed(),
                });
                return Ok(());
            }
        };
        if now >= deadline {
            return Err(ProbeError::NotReady(format!(
                "GET {}{health}: {last}, still after {:.1} s and {attempts} attempts \
                 (--ready-timeout {}s). BENCH calls {health} once at start-up and stops on \
                 anything but 200; start the probe once the agent is up, or raise \
                 --ready-timeout if its models load slowly",
                s.base_url(),
                started.elapsed().as_secs_f64(),
                limit.as_secs_f64()
            )));
        }
        if reported.is_none_or(|t| now.duration_since(t) >= PROGRESS_EVERY) {
            reported = Some(now);
            progress(Progress::Waiting {
                elapsed: started.elapsed(),
                limit,
                last: &last,
            });
        }
        std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(READY_PAUSE_MAX);
    }
}

/// Stops the run when `/health` and `/v1/info` both answer 404: the URL is
/// not the agent's base URL, and every check would say the same.
pub(in crate::probe) fn stop_on_wrong_base_url(s: &mut Session) -> Result<(), ProbeError> {
    let health_404 = s
        .ready
        .as_ref()
        .is_some_and(|r| r.answer.status() == StatusCode::NOT_FOUND);
    if !health_404 {
        return Ok(());
    }
    let (health, info, responses) = (Endpoint::Health, Endpoint::Info, Endpoint::Responses);
    match s.get(info.path()) {
        Ok(a) if a.status() == StatusCode::NOT_FOUND => Err(ProbeError::WrongBaseUrl(format!(
            "GET {base}{health} and GET {base}{info} both answered 404: {base} is not \
                 the agent's base URL (a missing or extra path prefix?). BENCH and GEN \
                 append {health}, {info} and {responses} to the base URL they are given; \
                 probe the same URL",
            base = s.base_url()
        ))),
        _ => Ok(()),
    }
}

fn health(s: &mut Session, check: &mut Check) {
    let Some(ready) = s.ready.take() else {
        check.skip(format!("skipped: no answer from GET {}", Endpoint::Health));
        return;
    };
    let answer = &ready.answer;
    if !answer.status().is_success() {
        check.push(
            Finding::error(
                "health",
                "http_status",
                format!("GET {}", Endpoint::Health),
                format!("answered {}: {}", answer.status(), body_excerpt(answer)),
            )
            .with_impact(HEALTH_IMPACT)
            .with_fix("serve GET /health: 200 {\"status\":\"ready\"}, 503 while loading"),
        );
        return;
    }
    s.observe_content_type(&Method::GET, Endpoint::Health.path(), answer);
    check.extend(lint::duplicate_keys("health", answer.body()));
    match AgentHealth::from_slice(answer.body()) {
        Ok(_) => check.verified(format!(
            "{} {}{}",
            answer.status(),
            String::from_utf8_lossy(answer.body()).trim(),
            if ready.attempts > 1 {
                format!(
                    " after {:.1} s and {} attempts",
                    ready.waited.as_secs_f64(),
                    ready.attempts
                )
            } else {
                String::new()
            }
        )),
        Err(e) => push_capped(check, DocumentKind::Health, &e),
    }
}

fn health_after(s: &mut Session, check: &mut Check) {
    let answer = match s.get(Endpoint::Health.path()) {
        Ok(a) => a,
        Err(e) => {
            check.push(transport_finding(&e));
            return;
        }
    };
    if answer.status() == StatusCode::SERVICE_UNAVAILABLE {
        check.push(
            Finding::error(
                "health",
                "not_ready",
                format!("GET {}", Endpoint::Health),
                format!("503 at the end of the suite: {}", body_excerpt(&answer)),
            )
            .with_impact(HEALTH_IMPACT)
            .with_fix("stay ready once the models are loaded"),
        );
    } else if !answer.status().is_success() {
        check.push(
            Finding::error(
                "health",
                "http_status",
                format!("GET {}", Endpoint::Health),
                format!("answered {}: {}", answer.status(), body_excerpt(&answer)),
            )
            .with_impact(HEALTH_IMPACT)
            .with_fix("keep serving GET /health: 200 {\"status\":\"ready\"}"),
        );
    } else {
        match AgentHealth::from_slice(answer.body()) {
            Ok(_) => check.verified(format!(
                "{} {}",
                answer.status(),
                String::from_utf8_lossy(answer.body()).trim()
            )),
            Err(e) => push_capped(check, DocumentKind::Health, &e),
        }
    }
}

/// What a non-2xx `/v1/info` says, and what to do.
fn info_status_fix(status: StatusCode) -> &'static str {
    if status == StatusCode::SERVICE_UNAVAILABLE {
        "serve GET /v1/info with 200 at all times, even while models load (GEN calls it \
         without waiting for /health)"
    } else if status.is_server_error() {
        "a 5xx from /v1/info is the agent's own handler failing; the known cause is building \
         magma-core's AgentInfo with a field 2.0.1 removed (coaching_session_version, which \
         older docs advise and full-history-agent sets: pydantic raises extra_forbidden, \
         FastAPI answers 500) or with a value of the wrong type; build it with the 2.0.1 \
         fields only and look at the agent's log for the exception"
    } else if status == StatusCode::NOT_FOUND {
        "serve GET /v1/info beside /health under the same base URL"
    } else {
        "serve GET /v1/info: 200 with an AgentInfo"
    }
}

fn info(s: &mut Session, check: &mut Check) {
    let answer = match s.get(Endpoint::Info.path()) {
        Ok(a) => a,
        Err(e) => {
            check.push(transport_finding(&e));
            return;
        }
    };
    if !answer.status().is_success() {
        check.push(
            Finding::error(
                "info",
                "http_status",
                format!("GET {}", Endpoint::Info),
                format!("answered {}: {}", answer.status(), body_excerpt(&answer)),
            )
            .with_impact(INFO_STATUS_IMPACT)
            .with_fix(info_status_fix(answer.status())),
        );
        return;
    }
    s.observe_content_type(&Method::GET, Endpoint::Info.path(), &answer);
    check.extend(lint::duplicate_keys("info", answer.body()));
    let info = match AgentInfo::from_slice(answer.body()) {
        Ok(info) => info,
        Err(e) => {
            push_capped(check, DocumentKind::Info, &e);
            return;
        }
    };
    // What BENCH requires of a valid info is a failure here.
    check.extend(lint::info(&info).into_iter().map(as_error));
    check.verified(format!(
        "{} {}, protocol {}, inference true",
        info.agent_id, info.agent_version, info.protocol_version
    ));
    s.coaching.known = true;
    s.coaching.kinds = info.specialized_coaching.clone();
    s.coaching.resume = info.coaching_resume;
    s.agent = Some(AgentIdentity {
        agent_id: info.agent_id,
        agent_version: info.agent_version,
        protocol_version: info.protocol_version,
    });
}

fn unknown_path(s: &mut Session, check: &mut Check) {
    let path = "/v1/magma-validate-no-such-path";
    match s.get(path) {
        Err(e) => check.push(transport_finding(&e)),
        Ok(a) if a.status() == StatusCode::NOT_FOUND => {
            check.verified(format!("GET {path}: 404"));
        }
        Ok(a) if a.status().is_client_error() => check.push(
            Finding::warning(
                "http",
                "not_404",
                format!("GET {path}"),
                format!("answered {}, 4xx but not 404", a.status()),
            )
            .with_impact(UNKNOWN_PATH_IMPACT)
            .with_fix("answer unknown paths with 404"),
        ),
        Ok(a) => check.push(
            Finding::error(
                "http",
                "http_status",
                format!("GET {path}"),
                format!(
                    "answered {} to an unknown path: {}",
                    a.status(),
                    body_excerpt(&a)
                ),
            )
            .with_impact(UNKNOWN_PATH_IMPACT)
            .with_fix("answer unknown paths with 404"),
        ),
    }
}

fn wrong_method(s: &mut Session, check: &mut Check) {
    let wrong = [
        (Method::GET, Endpoint::Responses),
        (Method::POST, Endpoint::Health),
    ];
    for (method, endpoint) in wrong {
        let path = endpoint.path();
        let where_ = format!("{method} {path}");
        match s.call(RawRequest::new(method.clone(), path)) {
            Err(e) => check.push(transport_finding(&e)),
            Ok(a) if a.status() == StatusCode::METHOD_NOT_ALLOWED => {
                if a.headers().contains_key(ALLOW) {
                    check.verified(format!("{where_}: 405"));
                } else {
                    check.push(
                        Finding::warning(
                            "http",
                            "allow_header",
                            where_.clone(),
                            "405 without an Allow header",
                        )
                        .with_impact(METHOD_IMPACT)
                        .with_fix("send Allow with the methods the path supports"),
                    );
                }
            }
            Ok(a) if a.status().is_client_error() => check.push(
                Finding::warning(
                    "http",
                    "not_405",
                    where_.clone(),
                    format!("answered {}, 4xx but not 405", a.status()),
                )
                .with_impact(METHOD_IMPACT)
                .with_fix("answer a known path with the wrong method with 405 and Allow"),
            ),
            Ok(a) => check.push(
                Finding::error(
                    "http",
                    "http_status",
                    where_.clone(),
                    format!(
                        "answered {} to a wrong method: {}",
                        a.status(),
                        body_excerpt(&a)
                    ),
                )
                .with_impact(METHOD_IMPACT)
                .with_fix("answer a known path with the wrong method with 405 and Allow"),
            ),
        }
    }
}

fn content_types(s: &mut Session, check: &mut Check) {
    if s.json_answers == 0 {
        check.skip("skipped: no 2xx JSON answer to look at");
        return;
    }
    if s.content_types.is_empty() {
        check.verified(format!(
            "{} JSON answers, all application/json",
            s.json_answers
        ));
    } else {
        check.push(content_type_finding(&s.content_types));
    }
}
