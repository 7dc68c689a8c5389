//! The agent under load: `/health` and `/v1/info` while inferences run,
//! requests at once against one after another, and memories kept apart.
//!
//! The three checks judge one shared measurement ([`BusyRun`], made by the
//! first of them to run and kept in the session):
//!
//! 1. `GET /health` and `GET /v1/info` once while idle;
//! 2. one slow request alone, timed. Slow means: the user's `--slow-input`;
//!    else a BENCH-like input with `extra_keys.delay_ms` (the demo agent's
//!    way of imitating a model's latency); when the agent answers that much
//!    faster than the delay (it does not take `delay_ms` as a delay), a
//!    request with a large memory (`--large-request-bytes`) instead;
//! 3. [`AT_ONCE`] such requests at once, each from its own thread and
//!    connection, each with its own memory marker; while they are in flight,
//!    `GET /health` then `GET /v1/info`, timed, with the number of requests
//!    still in flight when each was sent and answered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use magma_client::RawResponse;
use magma_protocol::routes::Endpoint;
use magma_protocol::{AgentInstruction, AgentRequest, Json};

use super::CheckDef;
use crate::probe::requests;
use crate::probe::session::Session;
use crate::probe::{Check, CheckSeverity};
use crate::report::{Finding, shorten};

pub(super) const CHECKS: &[CheckDef] = &[
    CheckDef::new(
        "concurrency/health-while-busy",
        "GET /health and /v1/info answer within 1 s while inferences run",
        CheckSeverity::Warn,
        "BENCH and GEN runs started while others infer (their start-up calls), and monitors",
        health_while_busy,
    ),
    CheckDef::new(
        "concurrency/parallel",
        "requests at once finish in clearly less than one after another",
        CheckSeverity::Warn,
        "GEN (parallel branches) and BENCH (parallel episodes) wait in line, up to their 360 s \
         timeout",
        parallel,
    ),
    CheckDef::new(
        "concurrency/memory-isolation",
        "requests at once each get back only their own memory",
        CheckSeverity::Fail,
        "BENCH and GEN (parallel episodes and branches continue from another's memory)",
        memory_isolation,
    ),
];

/// Requests sent at once.
pub(crate) const AT_ONCE: usize = 4;
/// The `extra_keys.delay_ms` asked for when no `--slow-input` is given.
pub(crate) const SLOW_MS: u64 = 1500;
/// Longest answer of `/health` or `/v1/info` while busy before a warning.
pub(crate) const HEALTH_BOUND: Duration = Duration::from_secs(1);
/// A request faster than this cannot tell parallel from serial.
const MEASURABLE: Duration = Duration::from_millis(250);
/// The memory key of the markers.
const MARKER_KEY: &str = "probe_isolation_marker";

/// A timed `GET`.
#[derive(Debug, Clone)]
struct Poll {
    path: &'static str,
    took: Duration,
    /// `200`, `503`, or the transport error.
    answer: String,
    ok: bool,
    /// Requests in flight when it was sent and when it was answered.
    in_flight_sent: usize,
    in_flight_answered: usize,
}

/// What one candidate's memory held of the markers.
#[derive(Debug, Clone)]
struct MemoryEvidence {
    request: usize,
    candidate: usize,
    own: bool,
    /// Markers of the other requests found in it, by request number.
    others: Vec<usize>,
}

/// The shared measurement of the concurrency checks.
#[derive(Debug, Clone)]
pub(crate) struct BusyRun {
    /// How the requests were made slow.
    how: String,
    /// Problems with the answers; each check reports them.
    failures: Vec<Finding>,
    idle: Vec<Poll>,
    /// One request alone.
    one: Duration,
    /// [`AT_ONCE`] requests: first sent to last answered, and each.
    all: Duration,
    each: Vec<Duration>,
    /// The most requests in flight at once, from their send and answer times.
    overlap: usize,
    busy: Vec<Poll>,
    memories: Vec<MemoryEvidence>,
}

fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

fn marker(i: usize) -> String {
    format!("probe-marker-{i:02}-7f3a")
}

/// The slow request number `i` (0 alone, 1.. at once), large or delayed.
fn slow_request(s: &mut Session, i: usize, large: bool) -> Option<AgentRequest> {
    let id = s.request_id("busy");
    let mut input = if let Some(input) = &s.config.slow_input {
        let mut input = input.clone();
        input.id = 0;
        input
    } else {
        let mut input = requests::bench_input(
            0,
            AgentInstruction::user(format!("Press sw0, then report to operator {i}.")),
            requests::initial_memory(),
        );
        if large {
            let bulk = requests::bulk(s.config.large_request_bytes);
            input.memory.insert("probe_bulk", bulk);
        } else {
            input.extra_keys.insert("delay_ms", Json::from(SLOW_MS));
        }
        input
    };
    input.memory.insert(MARKER_KEY, Json::from(marker(i)));
    AgentRequest::new(id, vec![input]).ok()
}

fn timed_get(s: &Session, path: &'static str, in_flight: &AtomicUsize) -> Poll {
    let in_flight_sent = in_flight.load(Ordering::SeqCst);
    let started = Instant::now();
    let (answer, ok) = match s.get(path) {
        Ok(r) => (r.status().as_u16().to_string(), r.status().is_success()),
        Err(e) => (e.to_string(), false),
    };
    Poll {
        path,
        took: started.elapsed(),
        answer,
        ok,
        in_flight_sent,
        in_flight_answered: in_flight.load(Ordering::SeqCst),
    }
}

/// Sends `request` alone and checks the answer; how long it took.
fn alone(s: &mut Session, check: &mut Check, request: &AgentRequest) -> Duration {
    let started = Instant::now();
    let answer = s.post_json(Endpoint::Responses.path(), request.to_json_string());
    let took = started.elapsed();
    s.judge_answer(check, request, answer);
    took
}

/// Moves the findings of `from` to `to`, each prefixed with `what`.
fn collect(from: Check, what: &str, to: &mut Vec<Finding>) {
    for mut f in from.findings {
        f.message = format!("{what}: {}", f.message);
        to.push(f);
    }
}

type Sent = (Result<RawResponse, magma_client::Error>, Duration, Duration);

fn measure(s: &mut Session) -> BusyRun {
    let none = AtomicUsize::new(0);
    let idle = vec![
        timed_get(s, Endpoint::Health.path(), &none),
        timed_get(s, Endpoint::Info.path(), &none),
    ];
    let mut failures = Vec::new();
    let mut large = false;
    let mut how = match &s.config.slow_input {
        Some(_) => "the --slow-input input".to_owned(),
        None => format!("a BENCH-like input with extra_keys.delay_ms {SLOW_MS}"),
    };
    let mut scratch = Check::new("concurrency", "");
    let mut one = Duration::ZERO;
    if let Some(request) = slow_request(s, 0, false) {
        one = alone(s, &mut scratch, &request);
    }
    let ignores_delay = one < Duration::from_millis(SLOW_MS * 4 / 5);
    if s.config.slow_input.is_none() && ignores_delay && !scratch.failed() {
        // The agent does not take delay_ms as a delay: large requests.
        large = true;
        how = format!(
            "a BENCH-like input with a memory of about {} bytes (extra_keys.delay_ms {SLOW_MS} \
             was answered in {}: the agent does not take it as a delay)",
            s.config.large_request_bytes,
            secs(one)
        );
        if let Some(request) = slow_request(s, 0, true) {
            one = alone(s, &mut scratch, &request);
        }
    }
    collect(scratch, "the request alone", &mut failures);

    let batch: Vec<AgentRequest> = (1..=AT_ONCE)
        .filter_map(|i| slow_request(s, i, large))
        .collect();
    let bodies: Vec<String> = batch.iter().map(AgentRequest::to_json_string).collect();
    let in_flight = AtomicUsize::new(bodies.len());
    let poll_after = (one / 8).clamp(Duration::from_millis(20), Duration::from_millis(250));
    let started = Instant::now();
    let shared: &Session = s;
    let (sent, busy): (Vec<Sent>, Vec<Poll>) = std::thread::scope(|scope| {
        let handles: Vec<_> = bodies
            .into_iter()
            .map(|body| {
                let in_flight = &in_flight;
                scope.spawn(move || {
                    let from = started.elapsed();
                    let answer = shared.post_json_at_once(Endpoint::Responses.path(), body);
                    let to = started.elapsed();
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    (answer, from, to)
                })
            })
            .collect();
        std::thread::sleep(poll_after);
        let polls = vec![
            timed_get(shared, Endpoint::Health.path(), &in_flight),
            timed_get(shared, Endpoint::Info.path(), &in_flight),
        ];
        let sent = handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect::<Vec<Sent>>();
        (sent, polls)
    });
    let all = sent.iter().map(|x| x.2).max().unwrap_or_default();
    let each = sent.iter().map(|x| x.2.saturating_sub(x.1)).collect();
    let overlap = sent
        .iter()
        .map(|(_, from, _)| {
            sent.iter()
                .filter(|(_, f, t)| f <= from && from < t)
                .count()
        })
        .max()
        .unwrap_or(0);

    let mut memories = Vec::new();
    for (n, (request, (answer, _, _))) in batch.iter().zip(sent).enumerate() {
        let i = n + 1;
        let mut scratch = Check::new("concurrency", "");
        let response = s.judge_answer(&mut scratch, request, answer);
        collect(
            scratch,
            &format!("request {i} of {AT_ONCE} at once"),
            &mut failures,
        );
        let Some(response) = response else {
            continue;
        };
        for (k, c) in response.candidates().iter().enumerate() {
            let text = Json::Object(c.memory.clone()).to_json_string();
            memories.push(MemoryEvidence {
                request: i,
                candidate: k,
                own: text.contains(&marker(i)),
                others: (0..=AT_ONCE)
                    .filter(|j| *j != i && text.contains(&marker(*j)))
                    .collect(),
            });
        }
    }
    BusyRun {
        how,
        failures,
        idle,
        one,
        all,
        each,
        overlap,
        busy,
        memories,
    }
}

/// The shared measurement, made on first use.
fn busy_run(s: &mut Session) -> BusyRun {
    if let Some(b) = &s.busy {
        return b.clone();
    }
    let b = measure(s);
    s.busy = Some(b.clone());
    b
}

/// Reports the failed answers; `true` when there were any.
fn report_failures(b: &BusyRun, check: &mut Check) -> bool {
    check.extend(b.failures.iter().filter(|f| f.is_error()).cloned());
    check.failed()
}

fn describe_poll(p: &Poll) -> String {
    format!(
        "GET {} answered {} in {} ({} of {AT_ONCE} requests in flight when sent, {} when \
         answered)",
        p.path,
        shorten(&p.answer, 120),
        secs(p.took),
        p.in_flight_sent,
        p.in_flight_answered
    )
}

fn health_while_busy(s: &mut Session, check: &mut Check) {
    let b = busy_run(s);
    if report_failures(&b, check) {
        return;
    }
    let idle: Vec<String> = b
        .idle
        .iter()
        .map(|p| format!("{} {}", p.path, secs(p.took)))
        .collect();
    let mut observed = false;
    for p in &b.busy {
        let slow = p.took > HEALTH_BOUND;
        if p.in_flight_sent == 0 && !slow {
            continue;
        }
        observed = true;
        if slow || !p.ok {
            let what = if p.ok { "late" } else { "not 2xx" };
            check.push(
                Finding::warning(
                    "http",
                    "blocked_while_busy",
                    format!("GET {}", p.path),
                    format!(
                        "{} ({what}; bound {}; idle: {}; one request alone took {}, \
                         made slow with {})",
                        describe_poll(p),
                        secs(HEALTH_BOUND),
                        idle.join(", "),
                        secs(b.one),
                        b.how
                    ),
                )
                .with_impact(
                    "a BENCH or GEN run starting while inferences are in flight waits at \
                     start-up (BENCH stops on anything but 200 from /health); monitors and \
                     load balancers take the agent for dead",
                )
                .with_fix(
                    "answer /health and /v1/info without waiting for inference: run the model \
                     off the event loop (a thread pool, spawn_blocking, run_in_executor) and \
                     do not take the model's lock in these handlers",
                ),
            );
        } else {
            check.verified(describe_poll(p));
        }
    }
    if !observed {
        check.skip(format!(
            "skipped: the {AT_ONCE} requests (made slow with {}) finished in {} before \
             /health could be asked while they ran; give --slow-input an input that makes \
             the agent think",
            b.how,
            secs(b.all)
        ));
    } else if !check.warned() {
        check.verified(format!("idle: {}", idle.join(", ")));
    }
}

fn parallel(s: &mut Session, check: &mut Check) {
    let b = busy_run(s);
    if report_failures(&b, check) {
        return;
    }
    if b.one < MEASURABLE {
        check.skip(format!(
            "skipped: one request (made slow with {}) took {}, too little to tell requests \
             at once from one after another; give --slow-input an input that makes the \
             agent think",
            b.how,
            secs(b.one)
        ));
        return;
    }
    let ratio = b.all.as_secs_f64() / b.one.as_secs_f64();
    let each: Vec<String> = b.each.iter().map(|d| secs(*d)).collect();
    let figures = format!(
        "{AT_ONCE} requests at once took {} in all ({}; at most {} in flight together), \
         {ratio:.2} times one request alone ({}); made slow with {}",
        secs(b.all),
        each.join(", "),
        b.overlap,
        secs(b.one),
        b.how
    );
    // Halfway between all at once (1x) and one after another (Nx).
    #[allow(clippy::cast_precision_loss)] // AT_ONCE is small
    let limit = (AT_ONCE as f64 + 1.0) / 2.0;
    if ratio > limit {
        check.push(
            Finding::warning(
                "http",
                "serialised",
                format!("POST {}", Endpoint::Responses),
                figures,
            )
            .with_impact(
                "GEN sends a node's branches and BENCH its episodes in parallel: an agent \
                     that answers one request at a time makes them wait in line, and a long \
                     line passes their 360 s timeout (fatal for the run)",
            )
            .with_fix(
                "serve requests concurrently: an async server with the model call off the \
                     event loop, several workers, or a model server that batches",
            ),
        );
    } else {
        check.verified(figures);
    }
}

fn memory_isolation(s: &mut Session, check: &mut Check) {
    let b = busy_run(s);
    if report_failures(&b, check) {
        return;
    }
    let mixed: Vec<&MemoryEvidence> = b.memories.iter().filter(|m| !m.others.is_empty()).collect();
    for m in &mixed {
        let others: Vec<String> = m.others.iter().map(|j| marker(*j)).collect();
        check.push(
            Finding::error(
                "response",
                "memory_mixed",
                format!("request {} [{}].memory", m.request, m.candidate),
                format!(
                    "the memory of request {}'s candidate {} holds {} of another request \
                     sent at the same time (own marker {}: {}); {} requests were at most \
                     {} in flight together",
                    m.request,
                    m.candidate,
                    others.join(", "),
                    marker(m.request),
                    if m.own { "present" } else { "missing" },
                    AT_ONCE,
                    b.overlap
                ),
            )
            .with_impact(
                "BENCH and GEN send back exactly the memory a candidate returned: an episode \
                 or branch continues from another one's memory, and its results are wrong \
                 without any error",
            )
            .with_fix(
                "build each candidate's memory from its own request's input only: no shared \
                 buffer, no global \"current episode\", no state keyed by input id (ids are \
                 batch positions every request reuses)",
            ),
        );
    }
    if !mixed.is_empty() {
        return;
    }
    let own = b.memories.iter().filter(|m| m.own).count();
    if own == 0 {
        check.skip(format!(
            "skipped: no candidate returned its {MARKER_KEY} memory key, so the memories \
             cannot be told apart"
        ));
        return;
    }
    check.verified(format!(
        "{} candidates of {AT_ONCE} requests at once (at most {} in flight together), each \
         with its own memory marker and none of another's",
        b.memories.len(),
        b.overlap
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_not_substrings_of_each_other() {
        for i in 0..=AT_ONCE {
            for j in 0..=AT_ONCE {
                assert_eq!(i == j, marker(i).contains(&marker(j)));
            }
        }
    }

    #[test]
    fn the_bound_leaves_room_to_see_a_blocked_health() {
        assert!(HEALTH_BOUND < Duration::from_millis(SLOW_MS) - Duration::from_millis(250));
    }
}
