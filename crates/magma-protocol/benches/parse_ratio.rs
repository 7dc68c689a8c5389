//! The parse of the 50-step coaching request against the parse of the 0.6 MB
//! inference request, each as a speed relative to serde_json's `IgnoredAny`
//! on the same bytes, in thread CPU time and wall time, in one process.
//!
//! `cargo bench -p magma-rs-protocol --bench parse_ratio [-- --reps 7 --rounds 40 --batch 5]`
//!
//! Why not criterion: criterion times one function for seconds, then the
//! next, so on a shared machine a change of load between the two halves of
//! a ratio moves it by more than the gap this bench is for (in criterion's
//! runs a single figure moved by 2x between repetitions). Here a repetition runs `rounds` rounds; a round times one batch of
//! `batch` parses of each variant, in an order shuffled each round (a
//! variant's place in a fixed order moved its figure by up to 5%, and in an
//! order only rotated each variant always follows the same one, which moved
//! the control below by 1-2%); each variant's figure is its median batch.
//! The shuffle is seeded, so every run uses the same orders. Thread CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) leaves out the time the thread waits for a
//! core; wall time is printed beside it.
//!
//! The variant `inference (control)` runs the same parse as `inference`:
//! the spread of its quotient to `inference` is the method's resolution,
//! and a coaching/inference quotient within it is no gap.
//!
//! `--coaching without-decisions` parses, as the coaching request, the same
//! 50 steps with every step's `output` `null`
//! (`gen_like_coaching_request_without_decisions`): the difference between
//! the two runs' coaching/inference figures is what the steps' decisions
//! cost, measured in one binary, so that where code lies is the same for
//! both.
//!
//! Comparing two builds: where code lies moves the coaching/inference figure
//! by up to 2% between builds of the same parse, which the control (the same
//! code as `inference`) cannot show. `cargo xtask layouts` builds this bench
//! with its functions in several random orders and reports each figure over
//! all of them; compare two versions of the code that way. Aligning every
//! function and block
//! (`RUSTFLAGS="-C llvm-args=-align-all-functions=6 -C llvm-args=-align-all-nofallthru-blocks=5"`)
//! steadies one build's figure but keeps one layout's luck.
//!
//! `--steps N` gives the coaching bodies `N` steps and the inference request
//! `N + 2` inputs (50 and 52 by default; `--decisions` keeps its own): a
//! cost paid once per document weighs five times more at 10 steps than at
//! 50, one paid per step alike.
//!
//! `--heap-shift BYTES` allocates that many bytes before the bodies are
//! made and keeps them: what is allocated after it (the bodies, what a
//! parse allocates) then lies elsewhere relative to the pages and cache
//! sets.
//! Where data lies moves the figures too, by up to 5% at 10 steps, where the
//! bodies are about the size at which the allocator maps them apart, and
//! shuffling code leaves data where it was; `cargo xtask layouts` gives
//! each layout a shift of its own.
//!
//! `--decisions` measures what one GEN decision costs instead, in
//! nanoseconds of thread CPU time, for magma-protocol and for `IgnoredAny`:
//! `decision_dense_coaching_request` with and without decisions (1,000
//! steps around the smallest input), each parsed both ways in the same
//! shuffled rounds; a decision's cost is the difference of the two bodies'
//! medians over 1,000 (in the 50-step body a decision's whole cost moves
//! the figure by 1%, here by half a body); run it with `--rounds 200`, at
//! 40 a repetition's figure moves by 10%. Its variants, for
//! `--profile`: `dense`, `dense-null`, `dense-ignored`, `dense-null-ignored`.
//!
//! `--parts` takes the 50-step body apart: the inference request (and its
//! control) beside five coaching bodies that differ only in what their
//! steps hold besides `id` and `input` (`gen_like_coaching_body`: GEN's
//! steps, without decisions, decisions only, bare, minimal), all in the
//! same shuffled rounds; per body, its speed vs `IgnoredAny` over the
//! inference request's, so that a part's cost shows as the difference of
//! two bodies in one binary. Its variants, for
//! `--profile`: `inference`, `inference-control`, `inference-ignored`,
//! and `coaching-NAME`, `coaching-NAME-ignored` for each body's name.
//!
//! `--profile NAME --count N` parses only variant `NAME` (`inference`,
//! `inference-ignored`, `coaching`, `coaching-ignored`) `N` times and exits:
//! for `valgrind` and `perf record` on the bench binary (instructions per
//! parse: the difference of two counts over the difference of `N`).

// A bench prints its figures.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::time::Instant;

use magma_protocol::AgentRequest;
use magma_protocol::coaching::SpecializedCoachingRequest;
use magma_testkit::fixtures::{
    StepParts, bench_like_request, decision_dense_coaching_request, gen_like_coaching_body,
    gen_like_coaching_request, gen_like_coaching_request_without_decisions,
};
use rustix::time::{ClockId, clock_gettime};

/// What one variant parses, and how.
struct Variant {
    /// The name printed and accepted by `--profile`.
    name: &'static str,
    /// The body.
    body: Vec<u8>,
    /// One parse; `false` when the body was refused (never, checked first).
    parse: fn(&[u8]) -> bool,
}

fn parse_inference(b: &[u8]) -> bool {
    AgentRequest::from_slice(black_box(b)).is_ok()
}

fn parse_coaching(b: &[u8]) -> bool {
    SpecializedCoachingRequest::from_slice(black_box(b)).is_ok()
}

fn parse_ignored(b: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(black_box(b)).is_ok()
}

/// Indices into the variants of [`variants`]. Those of [`parts_variants`]
/// start alike, their coaching bodies at [`COACH`].
const INF: usize = 0;
const INF_CONTROL: usize = 1;
const INF_IGNORED: usize = 2;
const COACH: usize = 3;
const COACH_IGNORED: usize = 4;

/// The inference request's variants, [`INF`], [`INF_CONTROL`] and
/// [`INF_IGNORED`]: the first three of [`variants`] and of
/// [`parts_variants`].
fn inference_variants(o: &Options) -> Vec<Variant> {
    let inference = bench_like_request(o.steps + 2).into_bytes();
    vec![
        Variant {
            name: "inference",
            body: inference.clone(),
            parse: parse_inference,
        },
        // The same source and the same bytes (its own copy, as each body
        // has): what differs from `inference` is only the method's noise.
        Variant {
            name: "inference-control",
            body: inference.clone(),
            parse: parse_inference,
        },
        Variant {
            name: "inference-ignored",
            body: inference,
            parse: parse_ignored,
        },
    ]
}

fn variants(o: &Options) -> Vec<Variant> {
    let coaching = if o.without_decisions {
        gen_like_coaching_request_without_decisions(o.steps)
    } else {
        gen_like_coaching_request(o.steps)
    }
    .into_bytes();
    let mut v = inference_variants(o);
    v.extend([
        Variant {
            name: "coaching",
            body: coaching.clone(),
            parse: parse_coaching,
        },
        Variant {
            name: "coaching-ignored",
            body: coaching,
            parse: parse_ignored,
        },
    ]);
    v
}

/// Steps of the `--decisions` bodies.
const DENSE_STEPS: usize = 1000;

/// The variants of `--decisions`: the dense body with and without
/// decisions, each with magma-protocol and with `IgnoredAny`, in this order.
fn dense_variants() -> Vec<Variant> {
    let with = decision_dense_coaching_request(DENSE_STEPS, true).into_bytes();
    let without = decision_dense_coaching_request(DENSE_STEPS, false).into_bytes();
    vec![
        Variant {
            name: "dense",
            body: with.clone(),
            parse: parse_coaching,
        },
        Variant {
            name: "dense-null",
            body: without.clone(),
            parse: parse_coaching,
        },
        Variant {
            name: "dense-ignored",
            body: with,
            parse: parse_ignored,
        },
        Variant {
            name: "dense-null-ignored",
            body: without,
            parse: parse_ignored,
        },
    ]
}

/// `--decisions`: per repetition, what a decision costs magma-protocol and
/// `IgnoredAny` (ns of thread CPU time) and their quotient.
fn decision_costs(variants: &[Variant], o: &Options) {
    println!(
        "bodies: {DENSE_STEPS} steps around the smallest input, {} bytes with decisions, {} \
         without; {} repetitions of {} rounds of batches of {} parses, order shuffled each \
         round; load (1 min) {} at start",
        variants[0].body.len(),
        variants[1].body.len(),
        o.reps,
        o.rounds,
        o.batch,
        load()
    );
    warm_up(variants, o);
    println!("\nns per decision (CPU): magma-protocol, IgnoredAny, quotient");
    let mut costs = Vec::with_capacity(o.reps);
    let mut shuffle = Shuffle(SEED);
    for rep in 1..=o.reps {
        let t = repetition(variants, o, &mut shuffle).cpu;
        let ours = (t[0] - t[1]) / DENSE_STEPS as f64;
        let ignored = (t[2] - t[3]) / DENSE_STEPS as f64;
        println!(
            "{rep:>3}  {ours:7.1} {ignored:7.1} {:6.3}  {}",
            ours / ignored,
            load()
        );
        costs.push([ours, ignored, ours / ignored]);
    }
    medians_heading(o);
    for (j, name) in ["magma-protocol", "IgnoredAny", "quotient"]
        .iter()
        .enumerate()
    {
        let v: Vec<f64> = costs.iter().map(|c| c[j]).collect();
        println!("{name:>14}: {}", summary(&v));
    }
}

/// The name of a `--parts` body, and its two variants' names.
fn parts_names(parts: StepParts) -> [&'static str; 3] {
    match parts {
        StepParts::Gen => ["gen", "coaching-gen", "coaching-gen-ignored"],
        StepParts::WithoutDecisions => [
            "without-decisions",
            "coaching-without-decisions",
            "coaching-without-decisions-ignored",
        ],
        StepParts::DecisionsOnly => [
            "decisions-only",
            "coaching-decisions-only",
            "coaching-decisions-only-ignored",
        ],
        StepParts::Bare => ["bare", "coaching-bare", "coaching-bare-ignored"],
        StepParts::Minimal => ["minimal", "coaching-minimal", "coaching-minimal-ignored"],
    }
}

/// The variants of `--parts`: [`inference_variants`], then each coaching
/// body of [`StepParts::ALL`] with magma-protocol and with `IgnoredAny`.
fn parts_variants(o: &Options) -> Vec<Variant> {
    let mut v = inference_variants(o);
    for parts in StepParts::ALL {
        let body = gen_like_coaching_body(o.steps, parts).into_bytes();
        let [_, ours, ignored] = parts_names(parts);
        v.push(Variant {
            name: ours,
            body: body.clone(),
            parse: parse_coaching,
        });
        v.push(Variant {
            name: ignored,
            body,
            parse: parse_ignored,
        });
    }
    v
}

/// `--parts`: per repetition, each body's speed vs `IgnoredAny` over the
/// inference request's (thread CPU time), the control's first.
fn parts_quotients(variants: &[Variant], o: &Options) {
    println!(
        "bodies: inference {} bytes; coaching {}; {} repetitions of {} rounds of batches of \
         {} parses, order shuffled each round; load (1 min) {} at start",
        variants[INF].body.len(),
        StepParts::ALL
            .iter()
            .zip(variants[COACH..].chunks(2))
            .map(|(p, v)| format!("{} {}", parts_names(*p)[0], v[0].body.len()))
            .collect::<Vec<_>>()
            .join(", "),
        o.reps,
        o.rounds,
        o.batch,
        load()
    );
    warm_up(variants, o);
    let mut names = vec!["control"];
    names.extend(StepParts::ALL.map(|p| parts_names(p)[0]));
    println!(
        "\nspeed vs IgnoredAny over the inference request's (CPU): {}",
        names.join(", ")
    );
    let mut rows = Vec::with_capacity(o.reps);
    let mut shuffle = Shuffle(SEED);
    for rep in 1..=o.reps {
        let t = repetition(variants, o, &mut shuffle).cpu;
        let inf = t[INF_IGNORED] / t[INF];
        let mut row = vec![t[INF_IGNORED] / t[INF_CONTROL] / inf];
        row.extend(t[COACH..].chunks(2).map(|c| c[1] / c[0] / inf));
        let shown: Vec<_> = row.iter().map(|x| format!("{x:.3}")).collect();
        println!("{rep:>3}  {}  {}", shown.join(" "), load());
        rows.push(row);
    }
    medians_heading(o);
    for (j, name) in names.iter().enumerate() {
        let v: Vec<f64> = rows.iter().map(|r| r[j]).collect();
        println!("{name:>17}: {}", summary(&v));
    }
}

/// The options, from the command line (`cargo bench` adds `--bench`).
struct Options {
    reps: usize,
    rounds: usize,
    batch: usize,
    profile: Option<String>,
    count: usize,
    /// `--coaching without-decisions`: every step's `output` `null`.
    without_decisions: bool,
    /// `--decisions`: what one decision costs (see the module's doc).
    decisions: bool,
    /// `--parts`: the 50-step body taken apart (see the module's doc).
    parts: bool,
    /// `--steps N`: the coaching bodies' steps (50), the inference
    /// request's inputs two more (52), as in the module's doc.
    steps: usize,
    /// `--heap-shift BYTES`: an allocation kept before the bodies are
    /// made, which moves them and what the parses allocate (see the
    /// module's doc).
    heap_shift: usize,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        reps: 7,
        rounds: 40,
        batch: 5,
        profile: None,
        count: 100,
        without_decisions: false,
        decisions: false,
        parts: false,
        steps: 50,
        heap_shift: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |what: &str| -> Result<usize, String> {
            let v = args.next().ok_or_else(|| format!("{what} needs a value"))?;
            v.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{what}: expected a positive integer, got {v:?}"))
        };
        match arg.as_str() {
            "--bench" => {}
            "--decisions" => o.decisions = true,
            "--parts" => o.parts = true,
            "--reps" => o.reps = number("--reps")?,
            "--rounds" => o.rounds = number("--rounds")?,
            "--batch" => o.batch = number("--batch")?,
            "--count" => o.count = number("--count")?,
            "--steps" => o.steps = number("--steps")?,
            "--heap-shift" => {
                let v = args.next().ok_or("--heap-shift needs a value")?;
                o.heap_shift = v
                    .parse::<usize>()
                    .map_err(|_| format!("--heap-shift: expected a number of bytes, got {v:?}"))?;
            }
            "--coaching" => match args.next().as_deref() {
                Some("gen") => o.without_decisions = false,
                Some("without-decisions") => o.without_decisions = true,
                other => {
                    return Err(format!(
                        "--coaching: expected gen or without-decisions, got {other:?}"
                    ));
                }
            },
            "--profile" => {
                o.profile = Some(args.next().ok_or("--profile needs a variant name")?);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// The thread's CPU time, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    // Both fields are non-negative for this clock.
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The 1-minute load average, as `/proc/loadavg` gives it (`-` elsewhere).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "-".to_owned())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `median (min-max)` of `v`.
fn summary(v: &[f64]) -> String {
    let mut s = v.to_vec();
    let m = median(&mut s);
    format!("{m:.3} ({:.3}-{:.3})", s[0], s[s.len() - 1])
}

/// The figures of one repetition, per variant: median batch time per
/// parse, in CPU and in wall nanoseconds.
struct Repetition {
    cpu: Vec<f64>,
    wall: Vec<f64>,
}

/// The line before a run's medians.
fn medians_heading(o: &Options) {
    println!(
        "\nmedian (range) over {} repetitions; load (1 min) {} at end",
        o.reps,
        load()
    );
}

/// Four batches of each variant before timing: caches, the allocator's
/// free lists, the CPU's frequency.
fn warm_up(variants: &[Variant], o: &Options) {
    for v in variants {
        for _ in 0..o.batch * 4 {
            black_box((v.parse)(&v.body));
        }
    }
}

/// The seed of [`Shuffle`]: every run uses the same orders.
const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// The orders of the rounds: xorshift64 and Fisher-Yates, from a fixed seed.
struct Shuffle(u64);

impl Shuffle {
    fn order(&mut self, n: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..n).collect();
        for k in (1..n).rev() {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            order.swap(k, (self.0 % (k as u64 + 1)) as usize);
        }
        order
    }
}

fn repetition(variants: &[Variant], o: &Options, shuffle: &mut Shuffle) -> Repetition {
    let n = variants.len();
    let mut cpu = vec![Vec::with_capacity(o.rounds); n];
    let mut wall = vec![Vec::with_capacity(o.rounds); n];
    for _ in 0..o.rounds {
        for i in shuffle.order(n) {
            let v = &variants[i];
            let (c0, w0) = (thread_cpu_ns(), Instant::now());
            for _ in 0..o.batch {
                black_box((v.parse)(&v.body));
            }
            let (c1, w1) = (thread_cpu_ns(), w0.elapsed());
            cpu[i].push((c1 - c0) as f64 / o.batch as f64);
            wall[i].push(w1.as_nanos() as f64 / o.batch as f64);
        }
    }
    Repetition {
        cpu: cpu.iter_mut().map(|v| median(v)).collect(),
        wall: wall.iter_mut().map(|v| median(v)).collect(),
    }
}

/// Speeds vs `IgnoredAny` of one repetition's figures (`t`: per variant):
/// inference, control, coaching, coaching/inference, control/inference.
fn speeds(t: &[f64]) -> [f64; 5] {
    let inf = t[INF_IGNORED] / t[INF];
    let ctl = t[INF_IGNORED] / t[INF_CONTROL];
    let coach = t[COACH_IGNORED] / t[COACH];
    [inf, ctl, coach, coach / inf, ctl / inf]
}

const COLUMNS: [&str; 5] = [
    "inference",
    "control",
    "coaching",
    "coach/inf",
    "control/inf",
];

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!(
                "parse_ratio: {e}\nusage: parse_ratio [--reps N] [--rounds N] [--batch N] \
                 [--coaching gen|without-decisions] [--decisions] [--parts] [--steps N] \
                 [--heap-shift BYTES] [--profile VARIANT --count N]"
            );
            std::process::exit(2);
        }
    };
    // Kept to the end, so that what is allocated after it lies beyond it.
    let _shift = black_box(vec![0u8; o.heap_shift]);
    let variants = if o.decisions {
        dense_variants()
    } else if o.parts {
        parts_variants(&o)
    } else {
        variants(&o)
    };
    for v in &variants {
        assert!((v.parse)(&v.body), "{} refuses its body", v.name);
    }
    if let Some(name) = &o.profile {
        let Some(v) = variants.iter().find(|v| v.name == name) else {
            let names: Vec<_> = variants.iter().map(|v| v.name).collect();
            eprintln!("parse_ratio: no variant {name:?} (one of {names:?})");
            std::process::exit(2);
        };
        for _ in 0..o.count {
            black_box((v.parse)(&v.body));
        }
        return;
    }
    if o.decisions {
        decision_costs(&variants, &o);
        return;
    }
    if o.parts {
        parts_quotients(&variants, &o);
        return;
    }
    println!(
        "bodies: inference {} bytes, coaching {} bytes{}; {} repetitions of {} rounds of \
         batches of {} parses, order shuffled each round; load (1 min) {} at start",
        variants[INF].body.len(),
        variants[COACH].body.len(),
        if o.without_decisions {
            " (without decisions)"
        } else {
            ""
        },
        o.reps,
        o.rounds,
        o.batch,
        load()
    );
    warm_up(&variants, &o);
    let mut cpu = Vec::with_capacity(o.reps);
    let mut wall = Vec::with_capacity(o.reps);
    println!(
        "\nspeed vs IgnoredAny, thread CPU time | wall time; then µs per parse (CPU) of {}",
        variants
            .iter()
            .map(|v| v.name)
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "rep  {:>11}  | {:>11}  | µs per parse   load",
        COLUMNS.join(" "),
        COLUMNS.join(" ")
    );
    let mut shuffle = Shuffle(SEED);
    for rep in 1..=o.reps {
        let r = repetition(&variants, &o, &mut shuffle);
        let (c, w) = (speeds(&r.cpu), speeds(&r.wall));
        let fmt = |s: [f64; 5]| s.map(|x| format!("{x:.3}")).join(" ");
        let us: Vec<_> = r.cpu.iter().map(|t| format!("{:.0}", t / 1000.0)).collect();
        println!(
            "{rep:>3}  {}  | {}  | {}  {}",
            fmt(c),
            fmt(w),
            us.join("/"),
            load()
        );
        cpu.push(c);
        wall.push(w);
    }
    medians_heading(&o);
    for (j, name) in COLUMNS.iter().enumerate() {
        let c: Vec<f64> = cpu.iter().map(|s| s[j]).collect();
        let w: Vec<f64> = wall.iter().map(|s| s[j]).collect();
        println!("{name:>12}: CPU {}  wall {}", summary(&c), summary(&w));
    }
}
