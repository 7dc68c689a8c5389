//! The behaviour checks (`state/hidden`, `branches/identical`,
//! `concurrency/...`) against agents with one behavioural fault each, real
//! servers on 127.0.0.1 (`magma-server` with the `Agent` trait, or the test
//! kit's stub server): each fault fails or warns the check that names it,
//! and an honest agent that samples its branches at random is never blamed.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use magma_server::demo::DemoAgent;
use magma_server::{Agent, Config, Rejection, Server};
use magma_testkit::stub::{Options, StubServer};
use magma_validator::magma_protocol::{AgentDecision, AgentInfo, AgentInput, Candidate, Object};
use magma_validator::probe::{self, ProbeConfig, Status};
use serde_json::Value;

use crate::probe_live::RealServer;
use crate::support::{Fault, check, delay_ms, findings, handle, inference_mode, probe};

/// A `magma-server` serving `agent` on 127.0.0.1, on its own thread.
struct Served {
    url: String,
    _background: magma_testkit::stub::Background,
}

fn serve<A: Agent>(agent: A, config: Config) -> Served {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let background = magma_testkit::stub::Background::spawn(move |stop| async move {
        let server = Server::from_listener(listener, config).expect("magma-server");
        server.serve(agent, stop).await;
    });
    Served {
        url: format!("http://{addr}"),
        _background: background,
    }
}

/// What an honest agent answers: candidate 0 (and every candidate with
/// `inference_mode: true`) echoes; candidate k of a sampling answer is
/// branch k.
fn honest(input: &AgentInput, k: u64) -> AgentDecision {
    let content = &input.instruction.content;
    if k > 0 && !inference_mode(input) {
        AgentDecision::say(format!("echo: {content} (branch {k})"))
    } else {
        AgentDecision::say(format!("echo: {content}"))
    }
}

fn candidates(
    input: &AgentInput,
    memory: &Object,
    decide: impl Fn(u64) -> AgentDecision,
) -> Vec<Candidate> {
    (0..input.num_outputs.get())
        .map(|k| Candidate::new(memory.clone(), decide(k)))
        .collect()
}

/// Waits the input's `extra_keys.delay_ms`, as a model would think.
async fn think(input: &AgentInput) {
    let ms = input
        .extra_keys
        .get("delay_ms")
        .and_then(|d| d.as_number()?.as_u64());
    if let Some(ms) = ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

fn info(id: &str) -> AgentInfo {
    AgentInfo::new(id, "0.0.1")
}

/// A random bit.
fn coin() -> bool {
    static N: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one(N.fetch_add(1, Ordering::Relaxed)) & 1 == 1
}

/// Keeps each conversation on the server, keyed by input id, and lets it
/// into the answer (a prompt built from a server-side history).
#[derive(Default)]
struct HistoryStore(Mutex<HashMap<i64, Vec<String>>>);

impl Agent for HistoryStore {
    fn info(&self) -> AgentInfo {
        info("history-store")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        let before = {
            let mut all = self.0.lock().unwrap();
            let history = all.entry(input.id).or_default();
            let before = history.last().cloned();
            history.push(input.instruction.content.clone());
            before
        };
        Ok(candidates(input, &input.memory, |k| {
            let mut d = honest(input, k);
            if let Some(b) = &before {
                d.say = format!("{} (after: {b})", d.say);
            }
            d
        }))
    }
}

/// Counts every call it ever answered, and says so (state keyed by nothing).
#[derive(Default)]
struct TurnCounter(AtomicU64);

impl Agent for TurnCounter {
    fn info(&self) -> AgentInfo {
        info("turn-counter")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        let turn = self.0.fetch_add(1, Ordering::SeqCst);
        Ok(candidates(input, &input.memory, |k| {
            let mut d = honest(input, k);
            d.say = format!("{} (turn {turn})", d.say);
            d
        }))
    }
}

/// Ignores `inference_mode` and samples nothing: every branch the same.
struct IdenticalBranches;

impl Agent for IdenticalBranches {
    fn info(&self) -> AgentInfo {
        info("identical-branches")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        Ok(candidates(input, &input.memory, |_| honest(input, 0)))
    }
}

/// Samples even with `inference_mode: true`.
struct AlwaysSamples;

impl Agent for AlwaysSamples {
    fn info(&self) -> AgentInfo {
        info("always-samples")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        Ok(candidates(input, &input.memory, |_| {
            let noise = RandomState::new().hash_one(input.id) % 1_000_000;
            AgentDecision::say(format!(
                "echo: {} (sample {noise})",
                input.instruction.content
            ))
        }))
    }
}

/// One memory buffer for the "current episode", set as a request arrives
/// and read when its answer is built.
#[derive(Default)]
struct SharedBuffer(Mutex<Object>);

impl Agent for SharedBuffer {
    fn info(&self) -> AgentInfo {
        info("shared-buffer")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        *self.0.lock().unwrap() = input.memory.clone();
        think(input).await;
        let memory = self.0.lock().unwrap().clone();
        Ok(candidates(input, &memory, |k| honest(input, k)))
    }
}

/// The honest sampler: with `inference_mode: true` always the same answer;
/// otherwise each candidate is one of two valid answers, at random.
struct RandomSampler;

impl Agent for RandomSampler {
    fn info(&self) -> AgentInfo {
        info("random-sampler")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        let content = &input.instruction.content;
        Ok(candidates(input, &input.memory, |_| {
            if !inference_mode(input) && coin() {
                AgentDecision::say(format!("Sure: {content}"))
            } else {
                AgentDecision::say(format!("echo: {content}"))
            }
        }))
    }
}

/// A model that takes 2 s for every input, whatever it is asked.
struct TwoSeconds;

impl Agent for TwoSeconds {
    fn info(&self) -> AgentInfo {
        info("two-seconds")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(candidates(input, &input.memory, |k| honest(input, k)))
    }
}

/// Exit 0, `name` warns with `code`; the report.
fn assert_warns(url: &str, name: &str, code: &str) -> Value {
    let (exit, report, stderr) = probe(url, &[]);
    assert_eq!(exit, 0, "{name} should only warn: {report:#} {stderr}");
    let c = check(&report, name);
    assert_eq!(c["status"], "warn", "{name}: {c:#}");
    assert!(
        findings(c).iter().any(|(k, _, _)| k == code),
        "{name} should warn {code}: {c:#}"
    );
    report
}

#[test]
fn a_history_store_keyed_by_input_id_fails_state_hidden() {
    let agent = serve(HistoryStore::default(), Config::default());
    let (exit, report, stderr) = probe(&agent.url, &[]);
    assert_eq!(exit, 1, "{report:#} {stderr}");
    let c = check(&report, "state/hidden");
    assert_eq!(c["status"], "fail", "{c:#}");
    let leak = findings(c)
        .into_iter()
        .find(|(k, _, _)| k == "state_leak")
        .unwrap_or_else(|| panic!("{c:#}"));
    // The evidence: which marker came back, and the decisions compared.
    assert!(leak.2.contains("quartz-bay-5c1e"), "{leak:?}");
    assert!(leak.2.contains("1st: say"), "{leak:?}");
    // Only that check fails.
    let failed: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["state/hidden"], "{report:#}");
}

#[test]
fn a_global_turn_counter_warns_state_hidden() {
    let agent = serve(TurnCounter::default(), Config::default());
    let report = assert_warns(&agent.url, "state/hidden", "state_changed");
    let c = check(&report, "state/hidden");
    let (_, _, message) = &findings(c)[0];
    assert!(
        message.contains("changed with nothing in between"),
        "{message}"
    );
    assert!(message.contains("(turn "), "{message}");
}

#[test]
fn identical_branches_warn_naming_gen() {
    let agent = serve(IdenticalBranches, Config::default());
    let report = assert_warns(&agent.url, "branches/identical", "identical_branches");
    let c = check(&report, "branches/identical");
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("8 inputs x 3 branches")
    );
    assert!(
        c["findings"][0]["impact"].as_str().unwrap().contains("GEN"),
        "{c:#}"
    );
    assert_eq!(check(&report, "state/hidden")["status"], "pass");
}

#[test]
fn sampling_under_inference_mode_warns_naming_bench() {
    let agent = serve(AlwaysSamples, Config::default());
    let (_, report, stderr) = probe(&agent.url, &[]);
    let c = check(&report, "branches/identical");
    assert_eq!(c["status"], "warn", "{c:#} {stderr}");
    let f = c["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "inference_mode_not_deterministic")
        .unwrap_or_else(|| panic!("{c:#}"));
    assert!(f["impact"].as_str().unwrap().contains("BENCH"), "{f:#}");
    assert!(f["message"].as_str().unwrap().contains("(sample "), "{f:#}");
}

#[test]
fn health_blocked_by_a_running_inference_warns() {
    // Inferences hold the model's read lock while they think; /health and
    // /v1/info want it to themselves (a status that needs the model idle).
    let model = Arc::new(tokio::sync::RwLock::new(()));
    let agent = StubServer::start_async(Options::default(), move |req| {
        let model = Arc::clone(&model);
        Box::pin(async move {
            let reply = handle(Fault::None, &req.method, req.path_only(), &req.body);
            if req.method == "POST" {
                let _thinking = model.read().await;
                if let Some(delay) = delay_ms(&req.body) {
                    tokio::time::sleep(delay).await;
                }
                reply
            } else {
                let _idle = model.write().await;
                reply
            }
        })
    });
    let report = assert_warns(
        &agent.url(),
        "concurrency/health-while-busy",
        "blocked_while_busy",
    );
    let c = check(&report, "concurrency/health-while-busy");
    let messages: Vec<String> = findings(c).into_iter().map(|f| f.2).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("GET /health answered 200 in")),
        "{messages:?}"
    );
    assert!(messages[0].contains("in flight when sent"), "{messages:?}");
    // Requests themselves run side by side.
    assert_eq!(check(&report, "concurrency/parallel")["status"], "pass");
}

#[test]
fn one_worker_for_everything_warns_serialised() {
    let mut config = Config::default();
    config.max_concurrent_inferences = 1;
    let server = serve(DemoAgent::new(), config);
    let report = assert_warns(&server.url, "concurrency/parallel", "serialised");
    let c = check(&report, "concurrency/parallel");
    let message = &findings(c)[0].2;
    assert!(message.contains("times one request alone"), "{message}");
    assert_eq!(
        check(&report, "concurrency/health-while-busy")["status"],
        "pass"
    );
    assert_eq!(
        check(&report, "concurrency/memory-isolation")["status"],
        "pass"
    );
}

#[test]
fn a_shared_memory_buffer_fails_memory_isolation() {
    let agent = serve(SharedBuffer::default(), Config::default());
    let (exit, report, stderr) = probe(&agent.url, &[]);
    assert_eq!(exit, 1, "{report:#} {stderr}");
    let c = check(&report, "concurrency/memory-isolation");
    assert_eq!(c["status"], "fail", "{c:#}");
    let mixed = findings(c);
    assert!(mixed.iter().all(|(k, _, _)| k == "memory_mixed"), "{c:#}");
    assert!(mixed[0].2.contains("probe-marker-"), "{mixed:?}");
    // Sequential requests are fine: only the concurrent check sees it.
    for name in ["memory-round-trip", "state/hidden", "env-feedback"] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}");
    }
}

/// Each of 20 runs of `state/hidden` and `branches/identical` passes an
/// agent that samples its branches at random between two valid answers.
#[test]
fn an_honest_random_sampler_passes_20_runs_out_of_20() {
    let agent = serve(RandomSampler, Config::default());
    let mut config = ProbeConfig::new(&agent.url).timeout(Duration::from_secs(10));
    let keep = ["state/hidden", "branches/identical"];
    for c in probe::checks() {
        if !keep.contains(&c.name) {
            config = config.skip(c.name);
        }
    }
    let mut passed = 0;
    for run in 0..20 {
        let report = probe::run(&config).expect("the probe runs");
        for name in keep {
            let c = report.check(name).unwrap();
            assert_eq!(c.status, Status::Pass, "run {run}: {c:#?}");
        }
        passed += 1;
    }
    assert_eq!(passed, 20);
}

/// Against an agent that takes 2 s for every inference, the whole probe
/// still ends within its deadline, every check run; prints the new
/// checks' wall time (docs/validator.md quotes it).
#[test]
fn the_probe_ends_within_its_deadline_against_a_two_second_agent() {
    let agent = serve(TwoSeconds, Config::default());
    let started = Instant::now();
    let (exit, report, stderr) = probe(&agent.url, &["--deadline", "120"]);
    let wall = started.elapsed();
    assert_eq!(exit, 0, "{report:#} {stderr}");
    assert!(wall < Duration::from_secs(120), "{wall:?}");
    let checks = report["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .all(|c| findings(c).iter().all(|(k, _, _)| k != "deadline")),
        "{report:#}"
    );
    let new: u64 = checks
        .iter()
        .filter(|c| {
            let n = c["name"].as_str().unwrap();
            n.starts_with("state/") || n.starts_with("branches/") || n.starts_with("concurrency/")
        })
        .map(|c| c["duration_ms"].as_u64().unwrap())
        .sum();
    for name in [
        "concurrency/parallel",
        "concurrency/health-while-busy",
        "concurrency/memory-isolation",
        "state/hidden",
        "branches/identical",
    ] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}");
    }
    eprintln!(
        "2 s agent: whole probe {:.1} s, the new checks {:.1} s of it",
        wall.as_secs_f64(),
        new as f64 / 1000.0
    );
}

/// The demo agent passes every new check, each with its evidence.
#[test]
fn the_demo_agent_passes_the_behaviour_checks_with_evidence() {
    let server = RealServer::start_with(Config::default());
    let started = Instant::now();
    let (exit, report, stderr) = probe(&server.url(), &[]);
    let wall = started.elapsed();
    assert_eq!(exit, 0, "{report:#} {stderr}");
    let mut new = 0;
    for name in [
        "state/hidden",
        "branches/identical",
        "concurrency/health-while-busy",
        "concurrency/parallel",
        "concurrency/memory-isolation",
    ] {
        let c = check(&report, name);
        assert_eq!(c["status"], "pass", "{c:#}");
        new += c["duration_ms"].as_u64().unwrap();
    }
    let reason = |n| check(&report, n)["reason"].as_str().unwrap().to_owned();
    assert!(reason("concurrency/parallel").contains("times one request alone"));
    assert!(reason("concurrency/health-while-busy").contains("GET /health answered 200 in"));
    assert!(reason("branches/identical").contains("8 of 8 inputs got distinct branches"));
    assert!(reason("state/hidden").contains("3 answers to the same request"));
    eprintln!(
        "demo agent: whole probe {:.1} s, the new checks {:.1} s of it",
        wall.as_secs_f64(),
        new as f64 / 1000.0
    );
}

/// `--slow-input`: the user's input makes the agent think; a bad one is a
/// usage error naming the problem.
#[test]
fn slow_input_is_used_and_checked() {
    let server = RealServer::start_with(Config::default());
    let input = r#"{"id": 9, "instruction": {"type": "user", "content": "think"}, "extra_keys": {"delay_ms": 1300}}"#;
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("slow-input.json");
    std::fs::write(&file, input).unwrap();
    let arg = format!("@{}", file.display());
    let (exit, report, stderr) = probe(
        &server.url(),
        &["--slow-input", &arg, "--skip", "state/hidden"],
    );
    assert_eq!(exit, 0, "{report:#} {stderr}");
    let c = check(&report, "concurrency/parallel");
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("the --slow-input input"),
        "{c:#}"
    );
    let (exit, _, stderr) = probe(
        &server.url(),
        &[
            "--slow-input",
            r#"{"id": "x", "instruction": {"type": "user", "content": "x"}}"#,
        ],
    );
    assert_eq!(exit, 2, "{stderr}");
    assert!(stderr.contains("--slow-input"), "{stderr}");
    assert!(
        stderr.contains("not a valid AgentInput: id: Input should be a valid integer"),
        "{stderr}"
    );
}

/// An agent that answers in no time gives nothing to measure: the timing
/// checks say so and are skipped rather than passed.
#[test]
fn a_fast_agent_skips_the_timing_checks_with_the_reason() {
    let agent =
        StubServer::start(|req| handle(Fault::None, &req.method, req.path_only(), &req.body));
    let (exit, report, stderr) = probe(&agent.url(), &["--large-request-bytes", "2000"]);
    assert_eq!(exit, 0, "{report:#} {stderr}");
    let c = check(&report, "concurrency/parallel");
    assert_eq!(c["status"], "skip", "{c:#}");
    let reason = c["reason"].as_str().unwrap();
    assert!(reason.contains("--slow-input"), "{reason}");
    assert!(reason.contains("does not take it as a delay"), "{reason}");
}
