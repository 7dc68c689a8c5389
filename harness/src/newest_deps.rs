//! `cargo xtask newest-deps`: the workspace against the newest semver-compatible
//! version of every dependency, as a user's build outside our lockfile gets them.
//!
//! A user's new crate, or `cargo install` without `--locked`, resolves the newest
//! compatible versions, not `Cargo.lock`'s. This command copies the workspace's files
//! (those git tracks or would track) into `<target>/xtask/newest-deps/ws`, runs
//! `cargo update` there, and then, warnings denied:
//!
//! 1. `cargo clippy --workspace --all-targets --all-features -- -D warnings` (a new
//!    deprecation in a dependency fails here before a user sees it);
//! 2. `cargo test --lib --all-features` of the four published libraries.
//!
//! The builds share the workspace's target directory: what did not move is reused
//! (clippy only writes metadata and `--lib` tests build no binaries, so nothing the
//! workspace's own steps use is overwritten). The versions that moved are printed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::process::{cargo, run_inherited, target_dir};

/// The published libraries, tested against the newest versions.
const LIBRARIES: [&str; 4] = [
    "magma-rs-protocol",
    "magma-rs-client",
    "magma-rs-server",
    "magma-rs-validator",
];

pub fn run() -> Result<()> {
    let root = crate::project_root()?;
    let ws = crate::xtask_dir()?.join("newest-deps").join("ws");
    copy_workspace(&root, &ws)?;

    let mut update = cargo();
    update.current_dir(&ws).arg("update");
    eprintln!("xtask newest-deps: cargo update in {}", ws.display());
    run_inherited("cargo update", &mut update)?;
    let before = std::fs::read_to_string(root.join("Cargo.lock")).context("reading Cargo.lock")?;
    let after =
        std::fs::read_to_string(ws.join("Cargo.lock")).context("reading the updated Cargo.lock")?;
    let moved = moved_versions(&before, &after);
    if moved.is_empty() {
        eprintln!("xtask newest-deps: Cargo.lock already has the newest compatible versions");
    } else {
        eprintln!("xtask newest-deps: {} packages moved:", moved.len());
        for line in &moved {
            eprintln!("    {line}");
        }
    }

    let target = target_dir(&root);
    let mut clippy = cargo();
    clippy
        .current_dir(&ws)
        .env("CARGO_TARGET_DIR", &target)
        .args(["clippy", "--workspace", "--all-targets", "--all-features"])
        .args(["--", "-D", "warnings"]);
    run_inherited(
        "clippy against the newest compatible dependencies (warnings denied)",
        &mut clippy,
    )?;

    let mut test = cargo();
    test.current_dir(&ws)
        .env("CARGO_TARGET_DIR", &target)
        .args(["test", "--lib", "--all-features"]);
    for lib in LIBRARIES {
        test.args(["-p", lib]);
    }
    run_inherited(
        "the libraries' tests against the newest compatible dependencies",
        &mut test,
    )?;
    println!(
        "newest-deps: clippy (warnings denied) and the libraries' tests passed with {} packages newer than Cargo.lock",
        moved.len()
    );
    Ok(())
}

/// Copies the files git lists for `root` (tracked, and untracked but not ignored) into
/// a fresh `dest`.
fn copy_workspace(root: &Path, dest: &Path) -> Result<()> {
    if dest.exists() {
        std::fs::remove_dir_all(dest).with_context(|| format!("removing {}", dest.display()))?;
    }
    let output = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .context("running git ls-files (the copy needs a git checkout)")?;
    if !output.status.success() {
        bail!(
            "git ls-files failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let list = String::from_utf8(output.stdout).context("git ls-files printed a non-UTF-8 path")?;
    let mut copied = 0usize;
    for rel in list.split('\0').filter(|p| !p.is_empty()) {
        let from = root.join(rel);
        if !from.is_file() {
            continue; // deleted in the work tree, not yet in the index
        }
        let to: PathBuf = dest.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::copy(&from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        copied += 1;
    }
    eprintln!(
        "xtask newest-deps: copied {copied} files to {}",
        dest.display()
    );
    Ok(())
}

/// `name old -> new` for every package whose locked versions differ between two
/// `Cargo.lock` texts (`name + new` for a package only in `after`).
pub(crate) fn moved_versions(before: &str, after: &str) -> Vec<String> {
    let old = locked(before);
    let new = locked(after);
    let mut moved = Vec::new();
    for (name, versions) in &new {
        match old.get(name) {
            Some(previous) if previous == versions => {}
            Some(previous) => moved.push(format!(
                "{name} {} -> {}",
                previous.join(", "),
                versions.join(", ")
            )),
            None => moved.push(format!("{name} + {}", versions.join(", "))),
        }
    }
    moved
}

/// Package name to its locked versions, from a `Cargo.lock` text.
fn locked(lock: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut map = std::collections::BTreeMap::<String, Vec<String>>::new();
    let mut name = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"').to_owned());
            continue;
        }
        let Some(v) = line.strip_prefix("version = ") else {
            continue;
        };
        if let Some(n) = name.take() {
            map.entry(n)
                .or_default()
                .push(v.trim_matches('"').to_owned());
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::moved_versions;

    #[test]
    fn moved_versions_names_each_change() {
        let before = "[[package]]\nname = \"rustls\"\nversion = \"0.23.46\"\n\n[[package]]\nname = \"serde\"\nversion = \"1.0.228\"\n";
        let after = "[[package]]\nname = \"rustls\"\nversion = \"0.23.48\"\n\n[[package]]\nname = \"serde\"\nversion = \"1.0.228\"\n\n[[package]]\nname = \"zmij\"\nversion = \"1.0.0\"\n";
        assert_eq!(
            moved_versions(before, after),
            ["rustls 0.23.46 -> 0.23.48", "zmij + 1.0.0"]
        );
        assert!(moved_versions(before, before).is_empty());
    }
}
