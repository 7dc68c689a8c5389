//! The probe against the real `magma-server` (demo agent), its output
//! formats, and agents it cannot reach.

use std::net::SocketAddr;

use magma_server::demo::DemoAgent;
use magma_server::{Config, Server};
use magma_testkit::stub::Background;

use crate::support::{Fault, agent_server, check, code, probe, run, stderr, stdout};

/// `magma-server` serving the demo agent on 127.0.0.1, on its own thread.
pub(crate) struct RealServer {
    addr: SocketAddr,
    https: bool,
    _background: Background,
}

impl RealServer {
    fn start() -> RealServer {
        RealServer::start_with(Config::default())
    }

    pub(crate) fn start_with(config: Config) -> RealServer {
        RealServer::start_demo(DemoAgent::new(), config)
    }

    /// `magma-server` serving `agent` (the demo agent, with or without coaching).
    pub(crate) fn start_demo(agent: DemoAgent, config: Config) -> RealServer {
        let https = config.tls.is_some();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind magma-server");
        let addr = listener.local_addr().expect("magma-server address");
        let background = Background::spawn(move |stop| async move {
            let server = Server::from_listener(listener, config).expect("magma-server");
            server.serve(agent, stop).await;
        });
        RealServer {
            addr,
            https,
            _background: background,
        }
    }

    pub(crate) fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }
}

#[test]
fn magma_server_passes_every_check() {
    let server = RealServer::start();
    let (exit, report, stderr) = probe(&server.url(), &[]);
    assert_eq!(exit, 0, "{report:#} {stderr}");
    let s = &report["summary"];
    assert_eq!(s["failed"], 0, "{report:#}");
    assert_eq!(s["warnings"], 0, "{report:#}");
    assert_eq!(s["skipped"], 0, "{report:#}");
    assert_eq!(s["passed"], s["total"]);
    assert_eq!(report["agent"]["agent_id"], "magma-demo-agent");
    // The demo agent answers an env instruction with a call of the first
    // tool on the first known robot: a real tool call went through the
    // tool and robot lints without a warning.
    assert_eq!(check(&report, "env-feedback")["status"], "pass");
}

#[test]
fn human_and_junit_formats() {
    let server = RealServer::start();
    let url = server.url();
    let out = run(&["probe", &url, "--ready-timeout", "2"], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("PASS  ordering"), "{text}");
    assert!(text.lines().last().unwrap().contains("0 failed"), "{text}");

    let out = run(&["probe", &url, "--format", "junit"], b"");
    assert_eq!(code(&out), 0);
    let xml = stdout(&out);
    assert!(xml.starts_with("<?xml"));
    assert!(xml.contains("failures=\"0\""), "{xml}");
    assert!(xml.contains("<testcase name=\"ordering\" classname=\"magma-validate.probe\""));
    assert!(xml.matches("<testcase ").count() >= 20, "{xml}");
}

#[test]
fn failures_in_junit_and_human_output_name_the_fault() {
    let server = agent_server(Fault::ReversedCandidates);
    let url = server.url();
    let out = run(&["probe", &url, "--format", "junit"], b"");
    assert_eq!(code(&out), 1);
    let xml = stdout(&out);
    let doc = quick_junit::Report::deserialize_from_str(&xml).expect("valid JUnit XML");
    let ordering = doc.test_suites[0]
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == "ordering")
        .expect("an ordering test case");
    match &ordering.status {
        quick_junit::TestCaseStatus::NonSuccess { kind, ty, .. } => {
            assert_eq!(*kind, quick_junit::NonSuccessKind::Failure);
            assert_eq!(ty.as_ref().unwrap().as_str(), "candidates_mismatch");
        }
        other => panic!("ordering should fail: {other:?}"),
    }
    let out = run(&["probe", &url], b"");
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    assert!(text.contains("FAIL  ordering"), "{text}");
    assert!(
        text.contains("consumers: BENCH and GEN run validate_request"),
        "{text}"
    );
}

#[test]
fn an_agent_that_cannot_be_reached_is_an_io_error() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let (exit, report, stderr) = probe(&url, &[]);
    assert_eq!(exit, 2);
    // Refused connections past --ready-timeout: not ready, like 503.
    assert_eq!(report["stopped"]["kind"], "not_ready", "{report:#}");
    assert!(stderr.contains("not ready"), "{stderr}");
    assert!(stderr.contains("refused"), "{stderr}");
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        &["probe"][..],
        &["probe", "http://127.0.0.1:1", "--timeout", "0"],
        &["probe", "http://127.0.0.1:1", "--timeout", "NaN"],
        &["probe", "ftp://127.0.0.1:1"],
        &["probe", "http://127.0.0.1:1", "--memory-steps", "1"],
    ] {
        let out = run(args, b"");
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).is_empty());
    }
}

/// An agent that returns one candidate fewer than asked for: magma-server
/// answers 500, and the probe's fix says to return `num_outputs` candidates
/// (not to report failures as error candidates, which does not fit).
#[test]
fn a_500_for_a_candidate_miscount_gets_the_miscount_fix() {
    use magma_server::{Agent, AgentDecision, AgentInfo, AgentInput, Candidate, Rejection};
    struct Miscount;
    impl Agent for Miscount {
        fn info(&self) -> AgentInfo {
            AgentInfo::new("miscount", "0.1.0")
        }
        async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
            let n = input.num_outputs.get() as usize - 1;
            Ok(vec![
                Candidate::new(
                    input.memory.clone(),
                    AgentDecision::say("hi")
                );
                n
            ])
        }
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let _background = Background::spawn(move |stop| async move {
        let server = Server::from_listener(listener, Config::default()).expect("magma-server");
        server.serve(Miscount, stop).await;
    });
    let (exit, report, stderr) = probe(&format!("http://{addr}"), &[]);
    assert_eq!(exit, 1, "{stderr}");
    let fixes: Vec<String> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().cloned().unwrap_or_default())
        .filter(|f| {
            f["code"] == "http_status"
                && f["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("wrong number of candidates"))
        })
        .map(|f| f["fix"].as_str().unwrap().to_owned())
        .collect();
    assert!(!fixes.is_empty(), "{report:#}");
    for fix in fixes {
        assert!(
            fix.starts_with("the agent returned the wrong number of candidates"),
            "{fix}"
        );
        assert!(!fix.contains("error candidate"), "{fix}");
    }
}
