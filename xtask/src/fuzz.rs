//! `cargo xtask fuzz [--seconds N] [--target NAME]...`: builds every cargo-fuzz target under
//! `fuzz/` and runs each for N seconds (default 20), seeded from the reference fixtures.
//!
//! cargo-fuzz is installed from crates.io (`cargo install --locked`, pinned) when `cargo fuzz`
//! is missing. It needs nightly compiler flags (`-Zsanitizer=address`); on the stable toolchain
//! of these machines they are enabled with `RUSTC_BOOTSTRAP=1`, set for the fuzz commands only.
//!
//! Seeds: every document of `crates/magma-protocol/tests/fixtures/reference.jsonl`, by the
//! kinds of magma-protocol's registry: a kind seeds its own target (request, response, info,
//! health) or its family's (coaching, export), the exchange its own as `request \0 response`,
//! and the `env` contents and `tools` lists of the requests theirs; at most [`MAX_SEEDS`] per
//! target, taken from each kind in turn, written to `fuzz/seeds/<target>/` (git-ignored,
//! rewritten on each run). libFuzzer grows its working
//! corpus in `fuzz/corpus/<target>/` and writes a crashing input to `fuzz/artifacts/<target>/`;
//! a crash fails the command and should become a test in
//! `crates/magma-protocol/tests/it/regression.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use magma_protocol::documents::{CaseKind, DocumentKind};
use serde_json::Value;

use crate::process::{cargo, fmt_duration, run_inherited};

/// The cargo-fuzz release used (installed when `cargo fuzz` is missing).
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// The fuzz targets, in the order they run.
pub(crate) const TARGETS: &[&str] = &[
    "request",
    "response",
    "info",
    "health",
    "exchange",
    "coaching",
    "export",
    "env_feedback",
    "tool_schema",
];

/// Seeds per target, at most.
const MAX_SEEDS: usize = 300;

/// What `cargo xtask fuzz` was asked to do.
#[derive(Debug, PartialEq, clap::Args)]
pub(crate) struct Options {
    /// Seconds per target.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) seconds: u64,
    /// Targets to run (all when none is given); repeatable.
    #[arg(long = "target", value_parser = clap::builder::PossibleValuesParser::new(TARGETS))]
    pub(crate) targets: Vec<String>,
}

/// One target's run, from libFuzzer's final statistics.
#[derive(Debug, Default, PartialEq)]
struct Stats {
    executions: u64,
    per_second: u64,
    peak_rss_mb: u64,
}

pub(crate) fn run(options: &Options) -> Result<()> {
    let root = crate::project_root()?;
    let fuzz_dir = root.join("fuzz");
    ensure_cargo_fuzz()?;
    let counts = write_seeds(
        &root.join("crates/magma-protocol/tests/fixtures/reference.jsonl"),
        &fuzz_dir.join("seeds"),
    )?;
    for (target, n) in &counts {
        eprintln!("xtask fuzz: {n} seeds for {target}");
    }

    eprintln!("xtask fuzz: cargo fuzz build (RUSTC_BOOTSTRAP=1)");
    run_inherited(
        "cargo fuzz build",
        fuzz_command(&fuzz_dir).args(["fuzz", "build"]),
    )?;

    let targets: Vec<&str> = if options.targets.is_empty() {
        TARGETS.to_vec()
    } else {
        options.targets.iter().map(String::as_str).collect()
    };
    let mut rows = Vec::new();
    for target in targets {
        let corpus = fuzz_dir.join("corpus").join(target);
        fs::create_dir_all(&corpus)?;
        let started = Instant::now();
        eprintln!("xtask fuzz: running {target} for {} s", options.seconds);
        let output = fuzz_command(&fuzz_dir)
            .args(["fuzz", "run", target])
            .arg(&corpus)
            .arg(fuzz_dir.join("seeds").join(target))
            .args([
                "--",
                &format!("-max_total_time={}", options.seconds),
                "-max_len=65536",
                "-rss_limit_mb=2048",
                "-timeout=10",
                "-print_final_stats=1",
            ])
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped())
            .output()
            .with_context(|| format!("running cargo fuzz run {target}"))?;
        let log = String::from_utf8_lossy(&output.stderr);
        let log_file = crate::xtask_dir()?.join(format!("fuzz-{target}.log"));
        fs::create_dir_all(log_file.parent().expect("a parent"))?;
        fs::write(&log_file, log.as_bytes())?;
        if !output.status.success() {
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            bail!(
                "fuzz target {target} failed ({}); the crashing input is in {}, the log in {}",
                output.status,
                fuzz_dir.join("artifacts").join(target).display(),
                log_file.display()
            );
        }
        let stats = parse_stats(&log);
        rows.push((target, stats, started.elapsed()));
    }
    println!(
        "fuzz: {:<14} {:>12} {:>10} {:>10} {:>9}",
        "target", "executions", "exec/s", "rss (MB)", "time"
    );
    for (target, stats, elapsed) in &rows {
        println!(
            "fuzz: {target:<14} {:>12} {:>10} {:>10} {:>9}",
            stats.executions,
            stats.per_second,
            stats.peak_rss_mb,
            fmt_duration(*elapsed)
        );
    }
    println!("fuzz: {} targets, no crash", rows.len());
    Ok(())
}

/// `cargo` in `fuzz/`, with nightly flags allowed and the fuzz project's own target dir.
fn fuzz_command(fuzz_dir: &Path) -> Command {
    let mut cmd = cargo();
    cmd.current_dir(fuzz_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .env_remove("CARGO_TARGET_DIR")
        .stdin(Stdio::null());
    cmd
}

/// Makes sure `cargo fuzz` runs, installing the pinned release from crates.io if it does not.
fn ensure_cargo_fuzz() -> Result<()> {
    let present = cargo()
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if present {
        return Ok(());
    }
    eprintln!(
        "xtask fuzz: cargo-fuzz is not installed; installing cargo-fuzz {CARGO_FUZZ_VERSION} from \
         crates.io with `cargo install --locked cargo-fuzz@{CARGO_FUZZ_VERSION}` (once, a few \
         minutes)"
    );
    run_inherited(
        "cargo install cargo-fuzz",
        cargo().args([
            "install",
            "--locked",
            &format!("cargo-fuzz@{CARGO_FUZZ_VERSION}"),
        ]),
    )
}

/// libFuzzer's `-print_final_stats=1` lines: `stat::number_of_executed_units: 123`.
fn parse_stats(log: &str) -> Stats {
    let mut stats = Stats::default();
    for line in log.lines() {
        let Some((key, value)) = line
            .strip_prefix("stat::")
            .and_then(|rest| rest.split_once(':'))
        else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let value = value.parse().unwrap_or(0);
        match key {
            "number_of_executed_units" => stats.executions = value,
            "average_exec_per_sec" => stats.per_second = value,
            "peak_rss_mb" => stats.peak_rss_mb = value,
            _ => {}
        }
    }
    stats
}

/// Writes the seed corpora under `out/<target>/`; returns the count per target.
fn write_seeds(fixtures: &Path, out: &Path) -> Result<Vec<(&'static str, usize)>> {
    let text =
        fs::read_to_string(fixtures).with_context(|| format!("reading {}", fixtures.display()))?;
    let seeds = seeds_from_fixtures(&text)?;
    let mut counts = Vec::new();
    for (target, docs) in seeds {
        let dir = out.join(target);
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        fs::create_dir_all(&dir)?;
        for (i, (_, doc)) in docs.iter().enumerate() {
            fs::write(dir.join(format!("seed-{i:04}")), doc)?;
        }
        counts.push((target, docs.len()));
    }
    Ok(counts)
}

/// One seed file's bytes.
type Seed = Vec<u8>;

/// A target's seeds, each with what it came from (a document or exchange kind, `env`,
/// `tools`, `written`).
type Seeds = Vec<(&'static str, Seed)>;

/// The target a document kind's fixtures seed: its own (`request`, ...) where it has one,
/// else its family's (`coaching`, `export`); `None` when neither exists.
fn target_of(kind: DocumentKind) -> Option<&'static str> {
    let own = TARGETS.iter().find(|t| **t == kind.name());
    own.or_else(|| TARGETS.iter().find(|t| **t == kind.family().name()))
        .copied()
}

/// Each target's candidate seeds by source (a kind, `env`, `tools`, `written`), in file order.
type Sources = BTreeMap<(&'static str, &'static str), Vec<Seed>>;

/// A document of `kind`; for a request, also the env contents and tool lists inside it (valid
/// JSON or not).
fn add_document(sources: &mut Sources, kind: DocumentKind, doc: &str) -> Result<()> {
    let target = target_of(kind).with_context(|| format!("no fuzz target for {kind}"))?;
    let mut push = |key, seed: &[u8]| sources.entry(key).or_default().push(seed.to_vec());
    push((target, kind.name()), doc.as_bytes());
    let request = serde_json::from_str::<Value>(doc).ok();
    let request = request.filter(|_| kind == DocumentKind::Request);
    let inputs = request
        .as_ref()
        .and_then(|r| r.get("inputs")?.as_array().cloned());
    for input in inputs.into_iter().flatten() {
        let instruction = |key: &str| input.get("instruction")?.get(key)?.as_str();
        if let (Some("env"), Some(content)) = (instruction("type"), instruction("content")) {
            push(("env_feedback", "env"), content.as_bytes());
        }
        if let Some(tools) = input.get("tools") {
            push(("tool_schema", "tools"), tools.to_string().as_bytes());
        }
    }
    Ok(())
}

/// The seeds of each target, from the fixture file's text: deduplicated, at most
/// [`MAX_SEEDS`] each, taken in turn from each source so that a kind with few fixtures is
/// seeded as well as one with many.
fn seeds_from_fixtures(text: &str) -> Result<Vec<(&'static str, Seeds)>> {
    let mut sources = Sources::new();
    // A few hand-written env contents and tools beside the fixtures'.
    for (target, seed) in [
        ("env_feedback", &br#"{"infos": "panda: press_button succeed with message: sw0 is now pressed\nur5: pick failed with message: out of reach", "previous_tool_call": {"panda": {"name": "press_button", "arguments": {"id": "sw0"}}}, "step": 4}"#[..]),
        ("env_feedback", br#"{"error": "simulator timeout", "failure_reason": "robot fell"}"#),
        ("tool_schema", br#"[{"type": "function", "function": {"name": "go", "description": "Go.", "parameters": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}}}, {"name": "pick", "parameters": {"x": "float", "obj": {"type": "str", "description": "what"}}, "optional": ["x"]}]"#),
    ] {
        sources.entry((target, "written")).or_default().push(seed.to_vec());
    }
    for (n, line) in text.lines().enumerate().skip(1) {
        let at = || format!("fixture line {}", n + 1);
        let case: Value = serde_json::from_str(line).with_context(at)?;
        let text = |key: &str| case.get(key).and_then(Value::as_str);
        let (Some(kind), Some(doc)) = (text("kind"), text("doc")) else {
            bail!("{}: no kind or doc", at());
        };
        match kind.parse().with_context(at)? {
            CaseKind::Document(kind) => add_document(&mut sources, kind, doc)?,
            // An exchange seeds its own target as `request \0 response` where it has one,
            // else each side seeds its document's target.
            CaseKind::Exchange(x) => {
                let request = text("request").unwrap_or_default();
                if TARGETS.contains(&x.name()) {
                    let both = [request.as_bytes(), doc.as_bytes()].join(&0);
                    sources.entry((x.name(), x.name())).or_default().push(both);
                } else {
                    add_document(&mut sources, x.request(), request)?;
                    add_document(&mut sources, x.response(), doc)?;
                }
            }
            other => bail!("{}: no fuzz target for {other}", at()),
        }
    }
    Ok(TARGETS
        .iter()
        .map(|&target| {
            let mut mine: Vec<_> = sources.iter().filter(|((t, _), _)| *t == target).collect();
            let (mut seeds, mut seen) = (Seeds::new(), BTreeSet::new());
            for i in 0.. {
                mine.retain(|(_, docs)| i < docs.len());
                if mine.is_empty() || seeds.len() >= MAX_SEEDS {
                    break;
                }
                for ((_, source), docs) in &mine {
                    if seeds.len() < MAX_SEEDS && seen.insert(&docs[i]) {
                        seeds.push((*source, docs[i].clone()));
                    }
                }
            }
            (target, seeds)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let args = |s: &[&str]| s.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            magma_harness::parse_args::<Options>("fuzz", &[]).unwrap(),
            Options {
                seconds: 20,
                targets: vec![]
            }
        );
        let o = magma_harness::parse_args::<Options>(
            "fuzz",
            &args(&["--seconds", "5", "--target", "health"]),
        )
        .unwrap();
        assert_eq!(
            o,
            Options {
                seconds: 5,
                targets: vec!["health".into()]
            }
        );
        assert!(magma_harness::parse_args::<Options>("fuzz", &args(&["--seconds", "0"])).is_err());
        assert!(
            magma_harness::parse_args::<Options>("fuzz", &args(&["--target", "nope"])).is_err()
        );
        assert!(magma_harness::parse_args::<Options>("fuzz", &args(&["--bogus"])).is_err());
    }

    #[test]
    fn final_stats_are_read() {
        let log = "#1234 DONE cov: 1\nstat::number_of_executed_units: 98765\nstat::average_exec_per_sec:     4321\nstat::new_units_added:          12\nstat::slowest_unit_time_sec:    0\nstat::peak_rss_mb:              77\n";
        assert_eq!(
            parse_stats(log),
            Stats {
                executions: 98765,
                per_second: 4321,
                peak_rss_mb: 77
            }
        );
    }

    #[test]
    fn every_target_and_every_registered_kind_gets_seeds_from_the_fixtures() {
        let root = crate::project_root().unwrap();
        let text =
            fs::read_to_string(root.join("crates/magma-protocol/tests/fixtures/reference.jsonl"))
                .unwrap();
        let seeds = seeds_from_fixtures(&text).unwrap();
        assert_eq!(seeds.len(), TARGETS.len());
        for (target, docs) in &seeds {
            assert!(!docs.is_empty(), "no seed for {target}");
            assert!(docs.len() <= MAX_SEEDS);
        }
        let of = |target: &str| &seeds.iter().find(|(t, _)| *t == target).unwrap().1;
        for kind in DocumentKind::ALL {
            let target = target_of(kind).unwrap_or_else(|| panic!("no fuzz target for {kind}"));
            let n = of(target).iter().filter(|(s, _)| *s == kind.name()).count();
            // Taken in turn: a kind with enough fixtures has its share of the target.
            assert!(n >= 2, "{kind}: {n} seeds in {target}");
        }
        assert!(of("exchange").iter().all(|(_, d)| d.contains(&0)));
        assert!(!of("exchange").is_empty());
    }
}
