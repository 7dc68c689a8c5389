//! The probe catches each fault of a deliberately broken agent: exit 1 with
//! the failing check naming the fault, or exit 0 with a warning for things
//! the contract allows but a consumer mishandles. The same server without
//! a fault passes with no warning, so every failure below comes from its
//! fault.

use serde_json::Value;

use crate::support::{Fault, agent_server, check, findings, probe};

/// Probes an agent with `fault`; returns the exit code and the report.
fn probe_fault(fault: Fault) -> (i32, Value) {
    let server = agent_server(fault);
    let (code, report, stderr) = probe(&server.url(), &[]);
    assert!(
        report.is_object(),
        "{fault:?}: no JSON report (exit {code}): {stderr}"
    );
    (code, report)
}

/// Asserts that exit code is 1, check `name` failed, and one of its
/// errors has `code` and a location or message containing `needle`.
fn assert_fails(fault: Fault, name: &str, code: &str, needle: &str) -> Value {
    let (exit, report) = probe_fault(fault);
    assert_eq!(exit, 1, "{fault:?} should fail the probe: {report:#}");
    let c = check(&report, name);
    assert_eq!(c["status"], "fail", "{fault:?}: {name} should fail: {c:#}");
    let found = findings(c)
        .into_iter()
        .any(|(k, loc, msg)| k == code && (loc.contains(needle) || msg.contains(needle)));
    assert!(
        found,
        "{fault:?}: {name} should report {code} mentioning {needle:?}: {c:#}"
    );
    assert!(
        c["reason"].as_str().unwrap().starts_with(code),
        "{fault:?}: the reason names the fault first: {}",
        c["reason"]
    );
    report
}

/// Asserts exit 0 and a warning `code` in check `name`.
fn assert_warns(fault: Fault, name: &str, code: &str) -> Value {
    let (exit, report) = probe_fault(fault);
    assert_eq!(exit, 0, "{fault:?} should only warn: {report:#}");
    assert_eq!(report["summary"]["failed"], 0);
    let c = check(&report, name);
    assert_eq!(c["status"], "warn", "{fault:?}: {name} should warn: {c:#}");
    assert!(
        findings(c).iter().any(|(k, _, _)| k == code),
        "{fault:?}: {name} should warn {code}: {c:#}"
    );
    report
}

#[test]
fn a_correct_agent_passes_every_check_without_warnings() {
    let (exit, report) = probe_fault(Fault::None);
    assert_eq!(exit, 0, "{report:#}");
    let summary = &report["summary"];
    assert_eq!(summary["failed"], 0, "{report:#}");
    assert_eq!(summary["warnings"], 0, "{report:#}");
    // The coaching checks are skipped: the fake advertises no coaching
    // (probe_coaching.rs has fakes that do).
    let skipped = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "skip")
        .map(|c| c["name"].as_str().unwrap())
        .collect::<Vec<_>>();
    assert!(
        skipped.iter().all(|n| n.starts_with("coaching/")),
        "{skipped:?}"
    );
    let coaching = magma_validator::probe::checks()
        .iter()
        .filter(|c| c.name.starts_with("coaching/"))
        .count() as u64;
    assert_eq!(summary["skipped"], coaching, "{report:#}");
    assert_eq!(
        summary["passed"].as_u64().unwrap() + coaching,
        summary["total"].as_u64().unwrap()
    );
    assert!(summary["total"].as_u64().unwrap() >= 20);
    assert_eq!(report["agent"]["agent_id"], "fake-agent");
    for name in [
        "health",
        "info",
        "empty-inputs",
        "ordering",
        "bench-batch",
        "gen-batch",
        "env-feedback",
        "memory-round-trip",
        "unicode",
        "large-request",
        "invalid-request/nan",
        "invalid-request/not-json",
        "unknown-path",
        "wrong-method",
        "health-after",
        "content-type",
    ] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}");
    }
}

#[test]
fn reversed_candidates() {
    let report = assert_fails(
        Fault::ReversedCandidates,
        "ordering",
        "candidates_mismatch",
        "source_id 3",
    );
    // A mismatch names the consumers and how they break.
    let f = &check(&report, "ordering")["findings"][0];
    assert!(f["impact"].as_str().unwrap().contains("validate_request"));
}

#[test]
fn a_missing_candidate() {
    assert_fails(
        Fault::MissingCandidate,
        "ordering",
        "candidates_mismatch",
        "is missing",
    );
}

#[test]
fn candidate_index_from_one() {
    assert_fails(
        Fault::IndexFromOne,
        "ordering",
        "candidates_mismatch",
        "candidate_index 1",
    );
}

#[test]
fn request_id_not_echoed() {
    assert_fails(
        Fault::RequestIdNotEchoed,
        "ordering",
        "candidates_mismatch",
        "agent-made-this-up",
    );
}

#[test]
fn memory_missing() {
    assert_fails(Fault::MemoryMissing, "bench-batch", "missing", "[0].memory");
}

#[test]
fn memory_null() {
    assert_fails(Fault::MemoryNull, "bench-batch", "dict_type", "[0].memory");
}

#[test]
fn a_nan_token_in_the_body() {
    let report = assert_fails(
        Fault::NanInBody,
        "ordering",
        "finite_number",
        "[0].memory.score",
    );
    let f = &check(&report, "ordering")["findings"][0];
    assert!(f["input"].as_str().unwrap().contains("NaN"), "{f}");
}

#[test]
fn an_object_instead_of_an_array() {
    assert_fails(
        Fault::ObjectInsteadOfArray,
        "bench-batch",
        "list_type",
        "(root)",
    );
}

#[test]
fn an_extra_field_in_health() {
    let report = assert_fails(
        Fault::HealthExtraField,
        "health",
        "extra_forbidden",
        "uptime_s",
    );
    // The agent is up: the rest of the suite still runs.
    assert_eq!(check(&report, "ordering")["status"], "pass");
}

#[test]
fn coaching_session_version_in_info() {
    assert_fails(
        Fault::InfoCoachingSessionVersion,
        "info",
        "extra_forbidden",
        "coaching_session_version",
    );
}

#[test]
fn protocol_version_1_0() {
    let report = assert_fails(Fault::InfoProtocol10, "info", "protocol_version", "\"1.0\"");
    let f = &check(&report, "info")["findings"][0];
    assert!(
        f["impact"]
            .as_str()
            .unwrap()
            .contains("Unsupported agent protocol")
    );
}

#[test]
fn inference_false() {
    assert_fails(
        Fault::InfoInferenceFalse,
        "info",
        "inference_capability",
        "capabilities.inference",
    );
}

#[test]
fn status_200_for_invalid_requests() {
    let report = assert_fails(
        Fault::OkForInvalidRequests,
        "invalid-request/string-id",
        "accepted_invalid_request",
        "200",
    );
    let invalid: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"].as_str().unwrap().starts_with("invalid-request/"))
        .collect();
    assert!(invalid.len() >= 10);
    // Every one fails but NaN, a warn check: consumers cannot send NaN.
    for c in invalid {
        let expected = if c["name"] == "invalid-request/nan" {
            "warn"
        } else {
            "fail"
        };
        assert_eq!(c["status"], expected, "{c:#}");
    }
}

#[test]
fn status_500_for_empty_inputs() {
    assert_fails(
        Fault::ServerErrorOnEmptyInputs,
        "empty-inputs",
        "http_status",
        "500",
    );
}

#[test]
fn health_503_forever_is_one_not_ready_outcome() {
    let server = agent_server(Fault::HealthUnavailable);
    let started = std::time::Instant::now();
    let (exit, report, stderr) = probe(&server.url(), &[]);
    // --ready-timeout 0.5: the wait is bounded.
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(exit, 2, "{report:#}");
    // Reported once: one stop, no check counted (health and health-after
    // would say the same thing).
    assert_eq!(report["stopped"]["kind"], "not_ready", "{report:#}");
    assert_eq!(report["checks"].as_array().unwrap().len(), 0);
    let message = report["stopped"]["message"].as_str().unwrap();
    assert!(
        message.contains("503") && message.contains("Models are not ready"),
        "{message}"
    );
    assert!(message.contains("--ready-timeout"), "{message}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn an_agent_whose_every_candidate_is_an_error_fails() {
    let report = assert_fails(
        Fault::AllErrorCandidates,
        "decisions",
        "no_completed_candidate",
        "upstream_401",
    );
    let c = check(&report, "decisions");
    let reason = c["reason"].as_str().unwrap();
    assert!(reason.contains("invalid_output"), "{reason}");
    assert!(
        c["findings"][0]["impact"]
            .as_str()
            .unwrap()
            .contains("first step"),
        "{c:#}"
    );
    // Each exchange on its own is valid: the inference checks only warn.
    assert_eq!(check(&report, "ordering")["status"], "warn");
    assert_eq!(report["summary"]["failed"], 1, "{report:#}");
}

#[test]
fn info_500_names_the_known_causes() {
    let report = assert_fails(Fault::InfoServerError, "info", "http_status", "500");
    let fix = check(&report, "info")["findings"][0]["fix"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(fix.contains("coaching_session_version"), "{fix}");
    assert!(!fix.contains("while models load"), "{fix}");
}

#[test]
fn say_with_tool_calls_only_warns() {
    let report = assert_warns(
        Fault::SayWithToolCalls,
        "bench-batch",
        "say_with_tool_calls",
    );
    let f = &check(&report, "bench-batch")["findings"][0];
    let impact = f["impact"].as_str().unwrap();
    assert!(
        impact.contains("GEN") && impact.contains("BENCH"),
        "{impact}"
    );
}

#[test]
fn empty_decisions_only_warn() {
    let report = assert_warns(Fault::EmptyDecision, "ordering", "empty_decision");
    let f = &check(&report, "ordering")["findings"][0];
    assert!(f["impact"].as_str().unwrap().contains("invalid_format"));
}

#[test]
fn memory_list_dropped_only_warns() {
    assert_warns(
        Fault::MemoryListDropped,
        "memory-round-trip",
        "memory_list_dropped",
    );
}

#[test]
fn a_non_json_content_type_only_warns() {
    let report = assert_warns(Fault::TextPlainContentType, "content-type", "content_type");
    let msg = &check(&report, "content-type")["findings"][0]["message"];
    assert!(
        msg.as_str().unwrap().contains("GET /health: text/plain"),
        "{msg}"
    );
}

/// An agent that answers GET and hangs on every POST: the run ends within
/// `--deadline` (plus one call's timeout at most), the checks it had no time
/// for failed with code `deadline`.
#[test]
fn a_hung_agent_is_probed_within_the_deadline() {
    let server = agent_server(Fault::HangsOnPost);
    let started = std::time::Instant::now();
    let (exit, report, stderr) = probe(&server.url(), &["--deadline", "2"]);
    // Generous: a probe that ignored the deadline would take one timeout
    // per call, dozens of seconds; this only catches a hang.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(exit, 1, "{report:#} {stderr}");
    let checks = report["checks"].as_array().unwrap();
    let deadline = checks
        .iter()
        .filter(|c| findings(c).iter().any(|(k, _, _)| k == "deadline"))
        .count();
    assert!(deadline > 0, "{report:#}");
    let timed_out = checks
        .iter()
        .filter(|c| findings(c).iter().any(|(k, _, _)| k == "timeout"))
        .count();
    assert!(timed_out > 0, "{report:#}");
}
