//! The probe in CI: severities, `--strict`, `--skip`/`--warn` waivers, a
//! report on every exit (also exit 2, also to `--output`), progress lines
//! while it runs, `--header`, and one clear stop for a wrong base URL.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quick_junit::{NonSuccessKind, TestCaseStatus};
use serde_json::Value;

use magma_testkit::TempDir;
use magma_testkit::stub::free_port;

use crate::support::{
    AUTHORIZATION, BIN, Fault, agent_server, check, code, probe, run, stderr, stdout,
};

/// A port that was just free: nothing listens there.
fn dead_url() -> String {
    format!("http://{}", free_port())
}

#[test]
fn a_nan_500_warns_fails_with_strict_and_can_be_skipped() {
    // What every stock FastAPI agent does with NaN.
    let server = agent_server(Fault::NanServerError);
    let url = server.url();

    let (exit, report, stderr) = probe(&url, &[]);
    assert_eq!(exit, 0, "{report:#} {stderr}");
    let nan = check(&report, "invalid-request/nan");
    assert_eq!(nan["status"], "warn", "{nan:#}");
    assert_eq!(nan["severity"], "warn");
    assert!(nan["reason"].as_str().unwrap().contains("500"), "{nan:#}");
    let impact = nan["findings"][0]["impact"].as_str().unwrap();
    assert!(impact.contains("never send NaN"), "{impact}");
    assert_eq!(report["summary"]["warnings"], 1, "{report:#}");
    assert_eq!(report["waived"], Value::Array(Vec::new()));

    let (exit, report, _) = probe(&url, &["--strict"]);
    assert_eq!(exit, 1, "{report:#}");
    assert_eq!(report["strict"], true);
    let nan = check(&report, "invalid-request/nan");
    assert_eq!(nan["status"], "fail");
    assert!(
        nan["reason"].as_str().unwrap().contains("--strict"),
        "{nan:#}"
    );
    assert_eq!(report["summary"]["failed"], 1, "{report:#}");

    let (exit, report, _) = probe(&url, &["--strict", "--skip", "invalid-request/nan"]);
    assert_eq!(exit, 0, "{report:#}");
    assert_eq!(check(&report, "invalid-request/nan")["status"], "skip");
    assert_eq!(check(&report, "invalid-request/nan")["waived"], "skip");
    assert_eq!(
        report["waived"],
        serde_json::json!([{"check": "invalid-request/nan", "waiver": "skip"}])
    );

    // The human report says what was waived too.
    let out = run(&["probe", &url, "--skip", "invalid-request/nan"], b"");
    assert_eq!(code(&out), 0);
    assert!(
        stdout(&out).contains("waived: invalid-request/nan (--skip)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn warn_softens_one_failing_check_and_names_are_checked() {
    let server = agent_server(Fault::ServerErrorOnEmptyInputs);
    let url = server.url();
    let (exit, report, _) = probe(&url, &["--warn", "empty-inputs"]);
    assert_eq!(exit, 0, "{report:#}");
    let c = check(&report, "empty-inputs");
    assert_eq!(c["status"], "warn");
    assert_eq!(c["severity"], "warn");
    assert_eq!(c["waived"], "warn");
    assert_eq!(c["findings"][0]["severity"], "warning");
    // An explicit --warn wins over --strict.
    let (exit, _, _) = probe(&url, &["--warn", "empty-inputs", "--strict"]);
    assert_eq!(exit, 0);

    let out = run(&["probe", &url, "--skip", "no-such-check"], b"");
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(err.contains("--skip no-such-check: no such check"), "{err}");
    assert!(err.contains("invalid-request/nan"), "{err}");
}

#[test]
fn nothing_listening_still_writes_a_junit_and_a_json_report() {
    let url = dead_url();
    let dir = TempDir::new("output");
    let xml_path = dir.file("r.xml", b"");
    let out = run(
        &[
            "probe",
            &url,
            "--ready-timeout",
            "0.3",
            "--format",
            "junit",
            "--output",
            &xml_path,
        ],
        b"",
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("refused"), "{}", stderr(&out));
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    let doc = quick_junit::Report::deserialize_from_str(&xml).expect("valid JUnit XML");
    assert_eq!(doc.tests, 1, "{xml}");
    assert_eq!(doc.errors, 1, "{xml}");
    let case = &doc.test_suites[0].test_cases[0];
    match &case.status {
        TestCaseStatus::NonSuccess {
            kind, message, ty, ..
        } => {
            assert_eq!(*kind, NonSuccessKind::Error);
            assert_eq!(ty.as_ref().unwrap().as_str(), "not_ready");
            assert!(message.as_ref().unwrap().as_str().contains("refused"));
        }
        other => panic!("one error case expected: {other:?}"),
    }
    // The human summary went to the terminal.
    assert!(
        stdout(&out).contains("STOPPED (not_ready)"),
        "{}",
        stdout(&out)
    );

    let json_path = dir.file("r.json", b"");
    let out = run(
        &[
            "probe",
            &url,
            "--ready-timeout",
            "0.3",
            "--format",
            "json",
            "-o",
            &json_path,
        ],
        b"",
    );
    assert_eq!(code(&out), 2);
    let report: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    assert_eq!(report["stopped"]["kind"], "not_ready", "{report:#}");
    assert_eq!(report["checks"], Value::Array(Vec::new()));
    assert_eq!(report["target"], url);
}

#[test]
fn output_writes_the_document_and_prints_the_human_report() {
    let server = agent_server(Fault::None);
    let dir = TempDir::new("output-ok");
    let path = dir.file("r.xml", b"");
    let out = run(
        &[
            "probe",
            &server.url(),
            "--format",
            "junit",
            "--output",
            &path,
        ],
        b"",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc = quick_junit::Report::deserialize_from_str(&std::fs::read_to_string(&path).unwrap())
        .expect("valid JUnit XML");
    assert!(doc.tests >= 20);
    assert_eq!(doc.failures, 0);
    let text = stdout(&out);
    assert!(text.contains("PASS  ordering"), "{text}");
    assert!(!text.contains("<?xml"), "{text}");
}

#[test]
fn a_wrong_base_url_stops_with_one_message() {
    let server = agent_server(Fault::None);
    let url = format!("{}/agent", server.url());
    let (exit, report, stderr) = probe(&url, &[]);
    assert_eq!(exit, 2, "{report:#}");
    assert_eq!(report["stopped"]["kind"], "wrong_base_url", "{report:#}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("base URL"), "{stderr}");
    assert!(stderr.contains("prefix"), "{stderr}");
}

#[test]
fn headers_reach_an_agent_behind_an_authorization_check() {
    let server = agent_server(Fault::RequiresAuthorization);
    let url = server.url();
    let header = format!("Authorization: {AUTHORIZATION}");
    let (exit, report, err) = probe(&url, &["--header", &header]);
    assert_eq!(exit, 0, "{report:#} {err}");
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["summary"]["warnings"], 0, "{report:#}");

    // Without it: the agent answers 401 everywhere.
    let (exit, report, _) = probe(&url, &[]);
    assert_eq!(exit, 1, "{report:#}");
    let health = check(&report, "health");
    assert!(
        health["reason"].as_str().unwrap().contains("401"),
        "{health:#}"
    );

    // A malformed header is a usage error.
    let out = run(&["probe", &url, "--header", "no colon here"], b"");
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("NAME: VALUE"), "{}", stderr(&out));
}

#[test]
fn progress_lines_arrive_while_a_slow_agent_is_probed() {
    let server = agent_server(Fault::Slow);
    let url = server.url();
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .args(["probe", &url, "--progress", "always", "--format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start magma-validate");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().expect("a progress line").unwrap();
    let first_at = started.elapsed();
    // The last check has not finished: the probe is still running.
    assert!(
        child.try_wait().unwrap().is_none(),
        "the probe ended before its first progress line was read"
    );
    assert!(
        first.contains("PASS") && first.contains("health"),
        "{first}"
    );
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let out = child.wait_with_output().unwrap();
    let total = started.elapsed();
    assert_eq!(out.status.code(), Some(0));
    assert!(rest.iter().any(|l| l.contains("decisions")), "{rest:?}");
    eprintln!("first progress line after {first_at:?}, run {total:?}");
    assert!(first_at < total / 2, "{first_at:?} of {total:?}");
    assert!(total > Duration::from_secs(2));
}

#[test]
fn a_waiting_line_while_health_answers_503() {
    let server = agent_server(Fault::HealthUnavailable);
    let out = run(
        &[
            "probe",
            &server.url(),
            "--ready-timeout",
            "1.5",
            "--progress",
            "always",
        ],
        b"",
    );
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    let waiting: Vec<&str> = err.lines().filter(|l| l.contains("waiting for")).collect();
    assert!(!waiting.is_empty(), "{err}");
    assert!(waiting[0].contains("/health: 503"), "{err}");
    assert!(waiting[0].contains("s of 1.5 s"), "{err}");
}

#[test]
fn plain_http_on_an_https_url_says_so_without_a_ca_hint() {
    let server = agent_server(Fault::None);
    let url = format!("https://{}", server.addr());
    let (exit, report, stderr) = probe(&url, &[]);
    assert_eq!(exit, 2, "{report:#}");
    assert_eq!(report["stopped"]["kind"], "tls");
    assert!(stderr.contains("plain HTTP"), "{stderr}");
    assert!(!stderr.contains("--cacert"), "{stderr}");
}
