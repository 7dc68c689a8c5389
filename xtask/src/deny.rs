//! `cargo xtask deny [--advisories]`: the supply-chain policy of `deny.toml`, checked by
//! cargo-deny over the whole workspace with all features.
//!
//! cargo-deny is installed from crates.io (`cargo install --locked`, pinned) when `cargo deny`
//! is missing. The `advisories` check needs the RustSec advisory database, a git repository
//! that cargo-deny clones from GitHub; that is only reachable on some machines, so it runs
//! only with `--advisories`. `bans`, `licenses` and `sources` need nothing but crates.io.

use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::process::{cargo, fmt_duration, run_inherited};

/// The cargo-deny release the policy is checked with (installed when `cargo deny` is missing).
const CARGO_DENY_VERSION: &str = "0.20.2";

/// The checks that need no network beyond crates.io.
const OFFLINE_CHECKS: &[&str] = &["bans", "licenses", "sources"];

pub(crate) fn run(advisories: bool) -> Result<()> {
    let root = crate::project_root()?;
    ensure_cargo_deny()?;

    let mut checks: Vec<&str> = Vec::new();
    if advisories {
        checks.push("advisories");
    }
    checks.extend_from_slice(OFFLINE_CHECKS);
    if !advisories {
        eprintln!(
            "xtask deny: note: the `advisories` check is skipped. It needs the RustSec advisory \
             database, a git repository that cargo-deny fetches from GitHub, which this machine \
             cannot reach (only the package registries are reachable here). Where GitHub is \
             reachable, run `cargo xtask deny --advisories`."
        );
    }

    let started = Instant::now();
    eprintln!("xtask deny: cargo deny check {}", checks.join(" "));
    let mut cmd = cargo();
    cmd.current_dir(&root)
        .args(["deny", "--workspace", "--all-features", "check"])
        .args(&checks);
    run_inherited("cargo deny check", &mut cmd).with_context(|| {
        let policy = root.join("deny.toml");
        if advisories {
            format!(
                "cargo-deny found a problem (details above): a crate breaks the policy in {},                  has an advisory, or the advisory database could not be fetched",
                policy.display()
            )
        } else {
            format!(
                "the dependency graph breaks the policy in {} (details above)",
                policy.display()
            )
        }
    })?;
    let skipped = if advisories {
        String::new()
    } else {
        " (advisories skipped)".to_owned()
    };
    println!(
        "deny: {} ok in {}{skipped}",
        checks.join(", "),
        fmt_duration(started.elapsed())
    );
    Ok(())
}

/// Makes sure `cargo deny` runs, installing the pinned release from crates.io if it does not.
fn ensure_cargo_deny() -> Result<()> {
    if let Some(version) = installed_version() {
        if version != CARGO_DENY_VERSION {
            eprintln!(
                "xtask deny: note: using the installed cargo-deny {version}; the policy is \
                 checked in CI with {CARGO_DENY_VERSION} (`cargo install --locked \
                 cargo-deny@{CARGO_DENY_VERSION}` to match)"
            );
        }
        return Ok(());
    }
    eprintln!(
        "xtask deny: cargo-deny is not installed; installing cargo-deny {CARGO_DENY_VERSION} \
         from crates.io with `cargo install --locked cargo-deny@{CARGO_DENY_VERSION}`. It is \
         compiled from source: this takes several minutes (about 8 on 2 cores) and happens once \
         per machine."
    );
    let started = Instant::now();
    let mut cmd = cargo();
    // A temporary target directory, removed by cargo afterwards, rather than the
    // workspace's: the build of cargo-deny is large and never reused.
    cmd.env_remove("CARGO_TARGET_DIR")
        .args(["install", "--locked"])
        .arg(format!("cargo-deny@{CARGO_DENY_VERSION}"));
    run_inherited("installing cargo-deny", &mut cmd)?;
    eprintln!(
        "xtask deny: installed cargo-deny {CARGO_DENY_VERSION} in {}",
        fmt_duration(started.elapsed())
    );
    if installed_version().is_none() {
        bail!(
            "`cargo deny` still does not run after installing cargo-deny; is cargo's bin \
             directory (usually ~/.cargo/bin) on PATH?"
        );
    }
    Ok(())
}

/// The version `cargo deny --version` reports, or `None` if it does not run.
fn installed_version() -> Option<String> {
    let output = cargo()
        .args(["deny", "--version"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    parse_version(&String::from_utf8_lossy(&output.stdout))
}

/// `cargo-deny 0.20.2` → `0.20.2`.
fn parse_version(text: &str) -> Option<String> {
    let word = text.split_whitespace().nth(1)?;
    Some(word.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_version_line() {
        assert_eq!(
            parse_version("cargo-deny 0.20.2\n").as_deref(),
            Some("0.20.2")
        );
        assert_eq!(parse_version(""), None);
    }
}
