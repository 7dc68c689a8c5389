//! `cargo xtask layouts [--seeds N] [--runs R] [-- BENCH ARGS]`: magma-protocol's
//! `parse_ratio` bench over N random code layouts.
//!
//! Where the linker puts each function moves `parse_ratio`'s coaching/inference figure by up to
//! 2% between builds of the same code: more than the gaps
//! the bench is for, and invisible to its control, which runs the same code as the figure it
//! controls. This command builds the bench N times, each with its functions in another random
//! order (LLD's `--shuffle-sections` on the `.text` sections, seeded 1 to N), runs every build R
//! times (each round visits the builds in turn, from a different one each time), and reports
//! each figure of the bench's medians: per layout, the median of its runs; over the layouts,
//! the median and range of those. When the figures include a control (`control/inf` in the
//! default mode, `control` with `--parts`), it also reports each figure minus the control, run
//! by run, so that a gap shows as a sign that holds in every layout, and a layout's luck as a
//! sign that changes between them.
//!
//! Where data lies moves the figures too (by up to 5% with 10-step bodies), and a build's data
//! lies the same in every run: each layout's runs therefore also get a heap shift of their own
//! (the bench's `--heap-shift`, 16 to 4080 bytes, from the seed), unless the bench arguments
//! set one.
//!
//! The arguments after `--` go to the bench (default `--reps 5 --rounds 40`). The builds go to
//! `target/layouts/`. Linking with `--shuffle-sections` needs LLD, the default linker of
//! `x86_64-unknown-linux-gnu` since Rust 1.90.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::bench::Spread;
use crate::process::{cargo, target_dir};

/// What `cargo xtask layouts` was asked to do.
#[derive(Debug, PartialEq, clap::Args)]
pub struct Options {
    /// Layouts: builds linked with section-shuffle seeds 1 to N.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(2..=64))]
    pub(crate) seeds: u64,
    /// Runs of each build.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub(crate) runs: u64,
    /// Arguments for `parse_ratio` (after `--`; default `--reps 5 --rounds 40`).
    #[arg(last = true)]
    pub(crate) bench_args: Vec<String>,
}

/// The bench's arguments when none are given.
const DEFAULT_BENCH_ARGS: &[&str] = &["--reps", "5", "--rounds", "40"];

pub fn run(o: &Options) -> Result<()> {
    let root = crate::project_root()?;
    let args: Vec<String> = if o.bench_args.is_empty() {
        DEFAULT_BENCH_ARGS.iter().map(|a| (*a).to_owned()).collect()
    } else {
        o.bench_args.clone()
    };
    let dir = target_dir(&root).join("layouts");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut builds = Vec::new();
    for seed in 1..=o.seeds {
        eprintln!("layouts: building parse_ratio, link order seed {seed}");
        let exe = build(&root, seed)?;
        let kept = dir.join(format!("parse_ratio-s{seed}"));
        fs::copy(&exe, &kept)
            .with_context(|| format!("copying {} to {}", exe.display(), kept.display()))?;
        builds.push((seed, kept));
    }
    let shifted = !args.iter().any(|a| a == "--heap-shift");
    let mut runs = Vec::new();
    for round in 0..o.runs {
        for i in 0..builds.len() {
            // Each round starts one build further on, so that no build always runs first.
            let (seed, exe) = &builds[(i + usize::try_from(round)?) % builds.len()];
            eprintln!("layouts: round {} of {}, seed {seed}", round + 1, o.runs);
            let mut cmd = Command::new(exe);
            cmd.args(&args);
            if shifted {
                cmd.args(["--heap-shift", &heap_shift(*seed).to_string()]);
            }
            let out = cmd
                .stderr(Stdio::inherit())
                .output()
                .with_context(|| format!("running {}", exe.display()))?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                bail!(
                    "{} {} failed ({}):\n{stdout}",
                    exe.display(),
                    args.join(" "),
                    out.status
                );
            }
            let figures = medians(&stdout)
                .with_context(|| format!("reading the medians of seed {seed}:\n{stdout}"))?;
            runs.push(Run {
                seed: *seed,
                figures,
            });
        }
    }
    let what = format!(
        "parse_ratio {}{}",
        args.join(" "),
        if shifted {
            " (and each layout's --heap-shift)"
        } else {
            ""
        }
    );
    print!("{}", report(&runs, &what)?);
    Ok(())
}

/// Builds `parse_ratio` in the bench profile, linked with the `.text` sections shuffled by
/// `seed`; returns the executable cargo reports.
fn build(root: &Path, seed: u64) -> Result<PathBuf> {
    let out = cargo()
        .current_dir(root)
        .args([
            "rustc",
            "--locked",
            "--profile",
            "bench",
            "-p",
            "magma-rs-protocol",
            "--bench",
            "parse_ratio",
            "--message-format=json-render-diagnostics",
            "--",
            "-C",
        ])
        .arg(link_arg(seed))
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo rustc")?;
    if !out.status.success() {
        bail!(
            "building parse_ratio with `{}` failed ({}): the shuffle needs LLD as the linker, \
             the default of x86_64-unknown-linux-gnu since Rust 1.90",
            link_arg(seed),
            out.status
        );
    }
    executable(&String::from_utf8_lossy(&out.stdout))
        .context("cargo reported no parse_ratio executable")
}

/// The linker argument that shuffles the functions (each in a `.text.*` section of its own)
/// with `seed`.
fn link_arg(seed: u64) -> String {
    format!("link-arg=-Wl,--shuffle-sections=.text*={seed}")
}

/// The heap shift of layout `seed`: a multiple of 16 bytes below 4 KiB, spread over that range
/// by the seed (seeds 1 to 8 give 1552, 3104, 560, 2112, 3664, 1120, 2672, 128), never 0.
fn heap_shift(seed: u64) -> u64 {
    (((seed * 1553) % 4096) & !15).max(16)
}

/// The `parse_ratio` executable among cargo's JSON messages.
fn executable(messages: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "parse_ratio")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
}

/// The figures of one run of the bench: its medians, in the order printed.
#[derive(Debug, PartialEq)]
struct Run {
    seed: u64,
    figures: Vec<(String, f64)>,
}

/// The figures of the bench's medians section: the lines after the one that starts with
/// `median`, each `name: value (min-max)`, or `name: CPU value (min-max)  wall ...`. An error
/// when there is no such section or it holds no figure.
fn medians(stdout: &str) -> Result<Vec<(String, f64)>> {
    let Some(start) = stdout.lines().position(|l| l.starts_with("median")) else {
        bail!("no line starting with `median`");
    };
    let mut figures = Vec::new();
    for line in stdout.lines().skip(start + 1) {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let value = rest
            .split_whitespace()
            .find_map(|w| w.parse::<f64>().ok())
            .with_context(|| format!("no number in {line:?}"))?;
        figures.push((name.trim().to_owned(), value));
    }
    if figures.is_empty() {
        bail!("no figure after the `median` line");
    }
    Ok(figures)
}

/// The name of the control among `names`, if any.
fn control(names: &[String]) -> Option<&str> {
    ["control/inf", "control"]
        .into_iter()
        .find(|c| names.iter().any(|n| n == c))
}

/// Whether figure `name` is measured like `control`, so that their difference means
/// something: with `control/inf` (the default mode), the other quotient, `coach/inf`, and not
/// the speeds beside it; with `control` (`--parts`), every body.
fn compared(name: &str, control: &str) -> bool {
    name != control && (control != "control/inf" || name.ends_with("/inf"))
}

/// One layout's runs, per figure: its values and, with a control, its differences from the
/// control, one per run.
type Layout = (Vec<Vec<f64>>, Vec<Vec<f64>>);

/// The median of `v`.
fn median(v: &[f64]) -> f64 {
    Spread::of(v.to_vec()).median
}

/// The report of `runs` (every run prints the same figures, checked): per layout, each
/// figure's median over its runs; over the layouts, the median and range of those; and with a
/// control, each figure minus the control, run by run, the same way, with how many layouts
/// have it below zero.
fn report(runs: &[Run], what: &str) -> Result<String> {
    let Some(first) = runs.first() else {
        bail!("no runs");
    };
    let names: Vec<String> = first.figures.iter().map(|(n, _)| n.clone()).collect();
    for r in runs {
        if !r.figures.iter().map(|(n, _)| n).eq(&names) {
            let these: Vec<&String> = r.figures.iter().map(|(n, _)| n).collect();
            bail!(
                "seed {} printed the figures {these:?}, the first run {names:?}",
                r.seed
            );
        }
    }
    let control = control(&names);
    let mut by_seed: BTreeMap<u64, Layout> = BTreeMap::new();
    for r in runs {
        let entry = by_seed
            .entry(r.seed)
            .or_insert_with(|| (vec![Vec::new(); names.len()], vec![Vec::new(); names.len()]));
        let c = control.and_then(|c| r.figures.iter().find(|(n, _)| n == c).map(|f| f.1));
        for (j, (_, v)) in r.figures.iter().enumerate() {
            entry.0[j].push(*v);
            if let Some(c) = c {
                entry.1[j].push(v - c);
            }
        }
    }
    let per_seed = |j: usize, diff: bool| -> Vec<f64> {
        by_seed
            .values()
            .map(|(v, d)| median(if diff { &d[j] } else { &v[j] }))
            .collect()
    };
    let width = names.iter().map(String::len).max().unwrap_or(0).max(6);
    let mut out = String::new();
    let runs_per_seed = runs.len() / by_seed.len();
    writeln!(
        out,
        "\n{what}: {} layouts (link order seeds {}), {runs_per_seed} run(s) each",
        by_seed.len(),
        by_seed
            .keys()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    )?;
    writeln!(out, "\nper layout, the median of its runs:")?;
    writeln!(
        out,
        "{:>6}  {}",
        "seed",
        names
            .iter()
            .map(|n| format!("{n:>w$}", w = n.len().max(7)))
            .collect::<Vec<_>>()
            .join(" ")
    )?;
    for (seed, (v, _)) in &by_seed {
        let row: Vec<String> = names
            .iter()
            .zip(v)
            .map(|(n, x)| format!("{:>w$.4}", median(x), w = n.len().max(7)))
            .collect();
        writeln!(out, "{seed:>6}  {}", row.join(" "))?;
    }
    writeln!(
        out,
        "\nover the layouts: median (range) of the layouts' medians"
    )?;
    for (j, name) in names.iter().enumerate() {
        let m = Spread::of(per_seed(j, false));
        write!(
            out,
            "{name:>width$}: {:.4} ({:.4}-{:.4})",
            m.median, m.lo, m.hi
        )?;
        if let Some(c) = control.filter(|c| compared(name, c)) {
            let d = per_seed(j, true);
            let below = d.iter().filter(|x| **x < 0.0).count();
            let layouts = d.len();
            let d = Spread::of(d);
            write!(
                out,
                "   minus {c}: {:+.4} ({:+.4} to {:+.4}), below in {below} of {layouts} layouts",
                d.median, d.lo, d.hi
            )?;
        }
        writeln!(out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tail of a default-mode run, as the bench prints it.
    const DEFAULT_TAIL: &str = "  5  1.134 1.025 0.912 0.804 0.904  | 1.134 1.025 0.912 0.805 0.904  | 517/572/586/627/572  0.39

median (range) over 5 repetitions; load (1 min) 0.39 at end
   inference: CPU 0.985 (0.965-1.134)  wall 0.985 (0.965-1.134)
     control: CPU 0.982 (0.966-1.025)  wall 0.982 (0.966-1.025)
    coaching: CPU 0.973 (0.912-0.981)  wall 0.973 (0.912-0.981)
   coach/inf: CPU 0.990 (0.804-1.006)  wall 0.989 (0.805-1.006)
 control/inf: CPU 0.997 (0.904-1.007)  wall 0.997 (0.904-1.007)
";

    /// The tail of a `--parts` run.
    const PARTS_TAIL: &str = "  5  1.006 1.001 1.012 0.982 0.996 0.993  0.24

median (range) over 5 repetitions; load (1 min) 0.24 at end
          control: 1.004 (1.002-1.006)
              gen: 1.001 (0.992-1.006)
without-decisions: 1.005 (0.999-1.012)
";

    #[test]
    fn options_parse() {
        let args = |s: &[&str]| s.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        let o = magma_harness::parse_args::<Options>("layouts", &[]).unwrap();
        assert_eq!(
            o,
            Options {
                seeds: 8,
                runs: 2,
                bench_args: vec![]
            }
        );
        let o = magma_harness::parse_args::<Options>(
            "layouts",
            &args(&[
                "--seeds", "3", "--runs", "1", "--", "--parts", "--steps", "10",
            ]),
        )
        .unwrap();
        assert_eq!(o.seeds, 3);
        assert_eq!(o.bench_args, args(&["--parts", "--steps", "10"]));
        for bad in [&["--seeds", "1"][..], &["--runs", "0"], &["--bogus"]] {
            assert!(
                magma_harness::parse_args::<Options>("layouts", &args(bad)).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_medians_of_both_modes_are_read() {
        let f = medians(DEFAULT_TAIL).unwrap();
        let names: Vec<&str> = f.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "inference",
                "control",
                "coaching",
                "coach/inf",
                "control/inf"
            ]
        );
        assert_eq!(f[3].1, 0.990);
        let names: Vec<String> = f.iter().map(|x| x.0.clone()).collect();
        assert_eq!(control(&names), Some("control/inf"));
        let compared_names: Vec<&String> = names
            .iter()
            .filter(|n| compared(n, "control/inf"))
            .collect();
        assert_eq!(compared_names, ["coach/inf"]);
        let f = medians(PARTS_TAIL).unwrap();
        assert_eq!(
            f,
            [
                ("control".to_owned(), 1.004),
                ("gen".to_owned(), 1.001),
                ("without-decisions".to_owned(), 1.005)
            ]
        );
    }

    #[test]
    fn output_without_medians_is_an_error_that_says_so() {
        let e = medians("bodies: ...\n  1  1.0 1.0\n").unwrap_err();
        assert!(e.to_string().contains("median"), "{e}");
        let e = medians("median (range) over 5 repetitions\n").unwrap_err();
        assert!(e.to_string().contains("no figure"), "{e}");
        let e = medians("median (range)\n gen: CPU n/a\n").unwrap_err();
        assert!(e.to_string().contains("gen: CPU n/a"), "{e}");
    }

    fn run(seed: u64, figures: &[(&str, f64)]) -> Run {
        Run {
            seed,
            figures: figures.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect(),
        }
    }

    #[test]
    fn the_report_takes_medians_per_layout_then_over_layouts() {
        let runs = [
            run(1, &[("control", 1.000), ("gen", 0.990)]),
            run(2, &[("control", 1.004), ("gen", 1.006)]),
            run(1, &[("control", 1.002), ("gen", 0.996)]),
            run(2, &[("control", 0.998), ("gen", 1.004)]),
            run(3, &[("control", 1.000), ("gen", 0.995)]),
            run(3, &[("control", 1.000), ("gen", 0.997)]),
        ];
        let r = report(&runs, "parse_ratio --parts").unwrap();
        // Per layout: seed 1's gen 0.993, seed 2's 1.005, seed 3's 0.996; the differences
        // from the control -0.008, +0.004, -0.004.
        assert!(
            r.contains("3 layouts (link order seeds 1 2 3), 2 run(s) each"),
            "{r}"
        );
        assert!(
            r.contains(
                "gen: 0.9960 (0.9930-1.0050)   minus control: -0.0040 (-0.0080 to +0.0040), \
                 below in 2 of 3 layouts"
            ),
            "{r}"
        );
        assert!(r.contains("control: 1.0010 (1.0000-1.0010)\n"), "{r}");
        assert!(compared("gen", "control") && !compared("control", "control"));
    }

    #[test]
    fn runs_that_print_other_figures_are_refused() {
        let runs = [
            run(1, &[("control", 1.0), ("gen", 0.99)]),
            run(2, &[("control", 1.0)]),
        ];
        let e = report(&runs, "x").unwrap_err();
        assert!(e.to_string().contains("seed 2"), "{e}");
        assert!(report(&[], "x").is_err());
    }

    #[test]
    fn cargo_messages_name_the_executable() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"magma_protocol"},"executable":null}
{"reason":"compiler-artifact","target":{"name":"parse_ratio"},"executable":"/t/release/deps/parse_ratio-1"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            executable(messages),
            Some(PathBuf::from("/t/release/deps/parse_ratio-1"))
        );
        assert_eq!(executable("not json\n"), None);
        assert_eq!(link_arg(3), "link-arg=-Wl,--shuffle-sections=.text*=3");
        let shifts: Vec<u64> = (1..=8).map(heap_shift).collect();
        assert_eq!(shifts, [1552, 3104, 560, 2112, 3664, 1120, 2672, 128]);
        assert!(
            (1..=64)
                .map(heap_shift)
                .all(|s| s % 16 == 0 && (16..4096).contains(&s))
        );
    }
}
