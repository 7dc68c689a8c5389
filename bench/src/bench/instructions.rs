//! `--only instructions`: instructions and allocations per request of
//! `magma-server` and of the floor, on the same stream of requests, broken
//! down by stage (issue 38).
//!
//! Each server runs under `valgrind --tool=callgrind` (deterministic counts
//! of user-space instructions; the kernel's share of a request is not in
//! them) and is sent `n` requests, one after the other, over one keep-alive
//! connection; then it is stopped (`SIGTERM`) and its profile read. The same
//! again with `2n` requests: the difference over `n` is what a request
//! costs, without start-up, the first request's one-time work and shutdown.
//! Repetitions interleave the servers; each figure is the median of the
//! repetitions with their range.
//!
//! A stage is the set of functions that implement it ([`STAGES`]): its cost
//! is their own instructions plus those of everything they call that is in
//! no stage. Callgrind knows only the functions the compiler kept, so a
//! stage's list names what survives inlining; everything in no stage
//! (hyper, tokio, the connection task) is the first row. A call out of a
//! stage that leads back into one (where the stage would count another
//! stage's instructions) is reported in the notes.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::callgrind::{Profile, Set};
use super::{Bench, Proc, Spread, bench_like, post};

/// Instructions per request in a call that may be counted twice from which
/// it is reported.
const LEAK_NOTED: f64 = 20.0;

/// Requests of the shorter run (`2n` in the longer one).
const REQUESTS: usize = 400;
const QUICK_REQUESTS: usize = 100;

/// One stage of a request, and the functions (name fragments; `$` anchors
/// the end) that implement it in each server. A function belongs to the
/// first stage that names it.
struct Stage {
    name: &'static str,
    magma: &'static [&'static str],
    floor: &'static [&'static str],
}

/// The stages, in the order a request meets them. The first row of the
/// breakdown, connection and HTTP, is everything no stage names.
const STAGES: &[Stage] = &[
    Stage {
        name: "the write path (socket writes, the write timeout)",
        magma: &[
            "as tokio::io::async_write::AsyncWrite>::",
            "WriteTimeout<I>::check",
        ],
        floor: &["as tokio::io::async_write::AsyncWrite>::"],
    },
    Stage {
        name: "the request: span, ids, routing, checks, context, access log",
        magma: &[
            "magma_server::handler::",
            "magma_server::access::",
            "magma_server::reply::",
            "magma_server::routes::",
            "magma_server::inference::",
            "magma_server::body::content_type_is_json",
            "magma_server::body::json_body",
            "magma_server::limits::expected_answer_bytes",
            "magma_server::context::",
            "magma_server::unwind::",
            // The inference's and the route's pinned futures, polled
            // through `Pin<&mut F>`: the poll is the request's, what it
            // calls (the agent) is counted by its own stage.
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
            "tracing::instrument::",
            "drop_in_place<magma_server::handler::",
            "drop_in_place<magma_server::access::",
            "drop_in_place<magma_server::inference::",
            "drop_in_place<magma_server::body::json_body",
            "drop_in_place<magma_server::unwind::",
        ],
        floor: &[],
    },
    Stage {
        name: "the memory budget",
        magma: &[
            "magma_server::limits::BudgetShare",
            "magma_server::limits::BodyBudget",
        ],
        floor: &[],
    },
    Stage {
        name: "reading the body",
        magma: &[
            "magma_server::body::read_body",
            "magma_server::body::read_json",
            "drop_in_place<magma_server::body::read_body",
            "drop_in_place<magma_server::body::read_json",
            "<core::future::poll_fn::PollFn<F> as core::future::future::Future>::poll'2",
        ],
        floor: &[
            "http_body_util::combinators::collect::",
            "http_body_util::collected::",
        ],
    },
    Stage {
        name: "parse and validate (syntax only for the floor), and the drop",
        magma: &[
            "magma_protocol::model::request::AgentRequest::from_slice",
            "drop_in_place<magma_protocol::model::request::AgentRequest>",
            "magma_server::limits::parse_body",
        ],
        floor: &["serde_json::de::from_slice"],
    },
    Stage {
        name: "the agent (demo agent, in its context's task-local scope)",
        magma: &[
            "tokio::task::task_local::TaskLocalFuture",
            "as magma_server::agent::Agent>::respond_batch::{{closure}}$",
        ],
        floor: &[],
    },
    Stage {
        name: "writing the answer (assembly, JSON text)",
        magma: &[
            "AgentResponse>::assemble",
            "magma_server::limits::answer_body",
            "magma_server::limits::answer_capacity",
            "magma_server::limits::write_candidates",
        ],
        floor: &[],
    },
];

const REST: &str = "connection and HTTP: hyper, tokio, the connection task (all the rest)";

/// Which server a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Magma,
    Floor,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Magma => "magma-server",
            Server::Floor => "floor",
        }
    }
}

/// What one request cost, from one pair of runs.
#[derive(Debug, Clone, Default)]
struct PerRequest {
    total: f64,
    /// Calls into the Rust allocator.
    allocations: f64,
    /// [`REST`] first, then one per [`STAGES`] entry.
    stages: Vec<f64>,
}

/// What one run's profile says, before the difference.
struct Counts {
    total: u64,
    allocations: u64,
    /// [`REST`] first, then one per [`STAGES`] entry.
    stages: Vec<u64>,
    /// Calls that may be counted twice, with their instructions.
    leaks: Vec<(String, u64)>,
    functions: Vec<Vec<(String, u64)>>,
}

impl Bench {
    pub(super) fn instructions(&mut self) -> Result<()> {
        let n = if self.opts.quick {
            QUICK_REQUESTS
        } else {
            REQUESTS
        };
        let reps = self.opts.reps;
        let bodies = [
            (
                "8-input (BENCH-like)",
                "body8.json",
                bench_like::http_body(8),
                1.25,
            ),
            (
                "1-input (tiny)",
                "body1.json",
                bench_like::TINY_BODY.to_owned(),
                1.15,
            ),
        ];
        let dir = self.dir.join("callgrind");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut functions = String::new();
        for (body_name, file, body, goal) in &bodies {
            let body_path = self.dir.join(file);
            std::fs::write(&body_path, body)?;
            // The floor answers the bytes magma-server answers.
            let response = {
                let magma = self.start_magma(None)?;
                let (code, bytes) = post(magma.port, body.as_bytes())?;
                if code != 200 {
                    bail!("magma-server answered {code} to the {body_name} body");
                }
                let path = self.dir.join(format!("response-{file}"));
                std::fs::write(&path, bytes)?;
                path
            };
            let mut results: Vec<[PerRequest; 2]> = Vec::new();
            let mut leaks: Vec<String> = Vec::new();
            for rep in 0..reps {
                let mut pair: [PerRequest; 2] = Default::default();
                for (i, server) in [Server::Magma, Server::Floor].into_iter().enumerate() {
                    let started = Instant::now();
                    let tag = format!("{}-{}-{rep}", server.name(), file.trim_end_matches(".json"));
                    let short = self.callgrind(
                        server,
                        &response,
                        body.as_bytes(),
                        n,
                        &dir.join(format!("{tag}-{n}.out")),
                    )?;
                    let long = self.callgrind(
                        server,
                        &response,
                        body.as_bytes(),
                        2 * n,
                        &dir.join(format!("{tag}-{}.out", 2 * n)),
                    )?;
                    pair[i] = per_request(&short, &long, n);
                    eprintln!(
                        "bench: {} {body_name}: {:.0} instructions, {:.1} allocations per request ({:.0} s)",
                        server.name(),
                        pair[i].total,
                        pair[i].allocations,
                        started.elapsed().as_secs_f64()
                    );
                    // Only what grows with the requests: a call made at
                    // start-up that leads back is no error per request.
                    for (what, cost) in &long.leaks {
                        let before = short
                            .leaks
                            .iter()
                            .find(|(w, _)| w == what)
                            .map_or(0, |(_, c)| *c);
                        let per_request = cost.saturating_sub(before) as f64 / n as f64;
                        if per_request >= LEAK_NOTED && !leaks.contains(what) {
                            leaks.push(what.clone());
                        }
                    }
                    if rep == 0 {
                        write_functions(&mut functions, server, body_name, &long);
                    }
                }
                results.push(pair);
            }
            self.instruction_rows(body_name, body.len(), *goal, &results);
            for l in leaks {
                self.notes.push(format!(
                    "instructions, {body_name}: a stage's call leads back into a stage, its \
                     instructions may be counted twice: {l}"
                ));
            }
        }
        let path = self.dir.join("instructions-functions.md");
        std::fs::write(&path, functions)?;
        self.notes.push(format!(
            "instructions: {n} and {} requests over one keep-alive connection per run, each \
             server under `valgrind --tool=callgrind`; per request = (count of the longer run \
             - count of the shorter) / {n}; allocations are calls into the allocator (Rust's \
             `__rust_alloc` and `__rust_realloc` shims, the system allocator's `__rdl_*`, \
             `malloc`, `calloc`, `realloc`, mimalloc's aligned entry points) from outside it; \
             the functions each stage counted, with their instructions in the first longer \
             run: {}",
            2 * n,
            path.display()
        ));
        Ok(())
    }

    /// One run under callgrind: `n` requests of `body` over one connection.
    fn callgrind(
        &mut self,
        server: Server,
        response: &Path,
        body: &[u8],
        n: usize,
        out: &Path,
    ) -> Result<Counts> {
        let port = crate::process::free_port()?;
        let mut cmd = Command::new("valgrind");
        cmd.arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(format!(
                "--log-file={}",
                out.with_extension("log").display()
            ));
        match server {
            Server::Magma => {
                cmd.arg(self.bin.join("magma-server"))
                    .args([
                        "--listen",
                        &format!("127.0.0.1:{port}"),
                        "--max-connections",
                        "1100",
                    ])
                    .env("RUST_LOG", "warn");
            }
            Server::Floor => {
                cmd.arg(self.bin.join("magma-bench"))
                    .args(["floor", "--port", &port.to_string(), "--response"])
                    .arg(response);
            }
        }
        let prefix = if server == Server::Magma {
            "RUST_LOG=warn "
        } else {
            ""
        };
        self.note_command(&cmd, prefix);
        let mut proc = Proc::spawn(server.name(), &mut cmd, port)?;
        proc.wait(Duration::from_secs(120))?;
        keep_alive_requests(port, body, n)
            .with_context(|| format!("{} under callgrind", server.name()))?;
        stop(&mut proc)?;
        let text = std::fs::read_to_string(out)
            .with_context(|| format!("reading the profile {}", out.display()))?;
        let profile =
            Profile::parse(&text).with_context(|| format!("reading {}", out.display()))?;
        Ok(counts(&profile, server))
    }

    fn instruction_rows(
        &mut self,
        body_name: &str,
        body_len: usize,
        goal: f64,
        results: &[[PerRequest; 2]],
    ) {
        let col = |i: usize, f: &dyn Fn(&PerRequest) -> f64| {
            Spread::of(results.iter().map(|r| f(&r[i])).collect())
        };
        let total = |p: &PerRequest| p.total;
        let ratio = Spread::of(results.iter().map(|r| r[0].total / r[1].total).collect());
        let (m, f) = (col(0, &total), col(1, &total));
        self.row(
            format!(
                "instructions per request, {body_name} ({body_len} bytes), one keep-alive \
                 conn.: magma-server vs the hyper floor"
            ),
            format!(
                "magma-server {} vs floor {}: **{}**",
                kilo(&m),
                kilo(&f),
                ratio.x()
            ),
            &format!("<= {goal}x"),
            Some(ratio.median <= goal),
        );
        let allocs = |p: &PerRequest| p.allocations;
        let (ma, fa) = (col(0, &allocs), col(1, &allocs));
        self.row(
            format!("allocations per request, {body_name}: magma-server vs the hyper floor"),
            format!("magma-server {} vs floor {}", ma.plain(), fa.plain()),
            "(reported)",
            None,
        );
        let mut s = String::new();
        let _ = writeln!(
            s,
            "### Instructions per request by stage, {body_name} ({body_len} bytes)\n"
        );
        let _ = writeln!(
            s,
            "Thousands of instructions per request, median (range) of {} repetitions; the \
             functions counted are named under the table.\n",
            results.len()
        );
        let _ = writeln!(s, "| stage | magma-server | floor |");
        let _ = writeln!(s, "|---|---|---|");
        let names = std::iter::once(REST).chain(STAGES.iter().map(|st| st.name));
        for (k, name) in names.enumerate() {
            let ins = |i: usize| col(i, &|p: &PerRequest| p.stages[k]);
            let fi = if floor_has(k) {
                kilo(&ins(1))
            } else {
                "-".to_owned()
            };
            let _ = writeln!(s, "| {name} | {} | {fi} |", kilo(&ins(0)));
        }
        let _ = writeln!(s, "| **total** | **{}** | **{}** |", kilo(&m), kilo(&f));
        let _ = writeln!(
            s,
            "| allocations per request | {} | {} |",
            ma.plain(),
            fa.plain()
        );
        let _ = writeln!(
            s,
            "\nmagma-server / floor: **{}** (goal <= {goal}x).\n",
            ratio.x()
        );
        let medians: Vec<(f64, bool)> = (0..=STAGES.len())
            .map(|k| (col(0, &|p: &PerRequest| p.stages[k]).median, floor_has(k)))
            .collect();
        let room = Room::at_goal(goal, f.median, &medians);
        let _ = writeln!(s, "{}\n", room.sentence(goal));
        let _ = writeln!(s, "Functions of each stage (name fragments):\n");
        for st in STAGES {
            let list = |fns: &[&str]| {
                if fns.is_empty() {
                    "-".to_owned()
                } else {
                    fns.iter()
                        .map(|f| format!("`{f}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            };
            let _ = writeln!(
                s,
                "- {}: magma-server {}; floor {}",
                st.name,
                list(st.magma),
                list(st.floor)
            );
        }
        self.sections.push(s);
    }
}

/// Sends `n` requests of `body` one after the other over one keep-alive
/// connection, reading each answer (a `200` with a `Content-Length`) before
/// the next; the request is the one wrk sends.
fn keep_alive_requests(port: u16, body: &[u8], n: usize) -> Result<()> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut request = format!(
        "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: \
         application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    for i in 0..n {
        s.write_all(&request)?;
        read_answer(&mut s, &mut buf).with_context(|| format!("answer {}", i + 1))?;
    }
    Ok(())
}

/// Reads one answer from `s` (bytes past it stay in `buf`); fails unless
/// it is a `200`.
fn read_answer(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let got = s.read(&mut chunk)?;
        if got == 0 {
            bail!("the connection closed before an answer");
        }
        buf.extend_from_slice(&chunk[..got]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    if !head.starts_with("http/1.1 200") {
        bail!("not a 200: {}", head.lines().next().unwrap_or_default());
    }
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .context("an answer without Content-Length")?;
    while buf.len() < head_end + length {
        let got = s.read(&mut chunk)?;
        if got == 0 {
            bail!("the connection closed inside an answer");
        }
        buf.extend_from_slice(&chunk[..got]);
    }
    buf.drain(..head_end + length);
    Ok(())
}

/// `SIGTERM`, then waits for the process (and so for callgrind's profile).
fn stop(proc: &mut Proc) -> Result<()> {
    let status = Command::new("kill")
        .args(["-TERM", &proc.pid().to_string()])
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("kill -TERM {} failed", proc.pid());
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if proc.child.try_wait()?.is_some() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{} did not exit within 120 s of SIGTERM", proc.name);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The stages' sets for `server`, disjoint: a function is in the first
/// stage that names it.
fn stage_sets(profile: &Profile, server: Server) -> Vec<Set> {
    let mut taken: Option<Set> = None;
    STAGES
        .iter()
        .map(|st| {
            let patterns = match server {
                Server::Magma => st.magma,
                Server::Floor => st.floor,
            };
            let set = profile.matching(patterns);
            let set = match &taken {
                Some(t) => set.without(t),
                None => set,
            };
            taken = Some(match taken.take() {
                Some(t) => profile.union(&[t, set.clone()]),
                None => set.clone(),
            });
            set
        })
        .collect()
}

fn counts(profile: &Profile, server: Server) -> Counts {
    let sets = stage_sets(profile, server);
    let every = profile.union(&sets);
    let mut stages: Vec<u64> = sets.iter().map(|s| profile.cost(s, &every)).collect();
    let in_stages: u64 = stages.iter().sum();
    stages.insert(0, profile.total.saturating_sub(in_stages));
    let mut leaks = Vec::new();
    for (st, set) in STAGES.iter().zip(&sets) {
        for (from, via, cost) in profile.leaks(set, &every) {
            let what = format!("{} ({}): `{from}` calls `{via}`", server.name(), st.name);
            leaks.push((what, cost));
        }
    }
    let functions = sets
        .iter()
        .map(|s| {
            profile
                .members(s, &every)
                .into_iter()
                .map(|(name, cost)| (name.to_owned(), cost))
                .collect()
        })
        .collect();
    Counts {
        total: profile.total,
        allocations: profile.allocations(),
        stages,
        leaks,
        functions,
    }
}

fn per_request(short: &Counts, long: &Counts, n: usize) -> PerRequest {
    let d = |a: u64, b: u64| (b as f64 - a as f64) / n as f64;
    PerRequest {
        total: d(short.total, long.total),
        allocations: d(short.allocations, long.allocations),
        stages: short
            .stages
            .iter()
            .zip(&long.stages)
            .map(|(a, b)| d(*a, *b))
            .collect(),
    }
}

/// The functions each stage counted in one run, for checking the lists.
fn write_functions(out: &mut String, server: Server, body_name: &str, run: &Counts) {
    let _ = writeln!(out, "## {} , {body_name}\n", server.name());
    for (st, fns) in STAGES.iter().zip(&run.functions) {
        let _ = writeln!(out, "### {}\n", st.name);
        for (name, cost) in fns.iter().filter(|(_, c)| *c > 0) {
            let _ = writeln!(out, "- {cost} `{name}`");
        }
        let _ = writeln!(out);
    }
}

/// What a goal leaves for the stages only magma-server has (the request,
/// the budget, the agent, the answer): the goal's total, `goal` times the
/// floor's, less what magma-server spends in the stages the floor has too
/// (connection, write path, body, parse), which no server-side work can
/// make cheaper than the floor's own. Stage medians, per request.
#[derive(Debug, Clone, Copy)]
struct Room {
    /// The goal's total.
    total: f64,
    /// magma-server's instructions in the stages the floor has too.
    shared: f64,
    /// magma-server's instructions in the stages the floor does not have.
    own: f64,
}

impl Room {
    /// `stages`: magma-server's median per stage, with whether the floor
    /// has that stage too.
    fn at_goal(goal: f64, floor_total: f64, stages: &[(f64, bool)]) -> Room {
        let sum = |shared: bool| {
            stages
                .iter()
                .filter(|(_, floor_has)| *floor_has == shared)
                .map(|(v, _)| v)
                .sum::<f64>()
        };
        Room {
            total: goal * floor_total,
            shared: sum(true),
            own: sum(false),
        }
    }

    /// What the shared stages leave of the goal's total (negative: less
    /// than nothing).
    fn left(&self) -> f64 {
        self.total - self.shared
    }

    fn sentence(&self, goal: f64) -> String {
        let k = |v: f64| format!("{:.1} k", v / 1e3);
        let left = self.left();
        let verdict = if left <= 0.0 {
            "nothing is left for them".to_owned()
        } else if self.own <= left {
            format!("they fit, with {} to spare", k(left - self.own))
        } else {
            format!(
                "they would have to cost {:.0}% less",
                100.0 * (1.0 - left / self.own)
            )
        };
        format!(
            "At the goal ({goal}x the floor: {} a request), the stages the floor has too \
             (connection, write path, body, parse) take magma-server {}, which leaves {} for \
             the stages only magma-server has (the request, the budget, the agent, the \
             answer). They take {}: {verdict}.",
            k(self.total),
            k(self.shared),
            k(left.max(0.0)),
            k(self.own),
        )
    }
}

/// Whether the floor has row `k` of the stage table too: the first row
/// ([`REST`]) and every stage that names functions of the floor.
fn floor_has(k: usize) -> bool {
    k == 0 || !STAGES[k - 1].floor.is_empty()
}

/// Instructions in thousands.
fn kilo(s: &Spread) -> String {
    format!(
        "{:.1} k ({:.1}-{:.1})",
        s.median / 1e3,
        s.lo / 1e3,
        s.hi / 1e3
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_at_the_goal_is_what_the_shared_stages_leave() {
        // Stages of a tiny body: the floor at 17.2 k, the goal 1.15x.
        let stages = [
            (13_000.0, true),
            (300.0, true),
            (4_300.0, false),
            (500.0, false),
            (1_000.0, true),
            (2_500.0, true),
            (1_500.0, false),
            (1_900.0, false),
        ];
        let room = Room::at_goal(1.15, 17_200.0, &stages);
        assert!((room.total - 19_780.0).abs() < 1e-6);
        assert_eq!((room.shared, room.own), (16_800.0, 8_200.0));
        assert!((room.left() - 2_980.0).abs() < 1e-6);
        let said = room.sentence(1.15);
        assert!(said.contains("leaves 3.0 k"), "{said}");
        assert!(
            said.contains("They take 8.2 k: they would have to cost 64% less"),
            "{said}"
        );

        let roomy = Room::at_goal(2.0, 17_200.0, &stages);
        assert!(
            roomy
                .sentence(2.0)
                .contains("they fit, with 9.4 k to spare")
        );
        let none = Room::at_goal(0.5, 17_200.0, &stages);
        assert!(none.sentence(0.5).contains("leaves 0.0 k"));
        assert!(none.sentence(0.5).contains("nothing is left for them"));
    }
}
