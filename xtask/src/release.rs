//! `cargo xtask release X.Y.Z [--commit] [--tag] [--dry-run]`: prepares a lockstep release of
//! every crate in the workspace. RELEASING.md has the checklist around it.
//!
//! 1. Bumps `[workspace.package] version` in the root `Cargo.toml` and every internal
//!    `version = "=A.B.C"` requirement in `[workspace.dependencies]` (members inherit both),
//!    runs `cargo update --workspace` so that `Cargo.lock` follows, and turns
//!    `## Unreleased` in `CHANGELOG.md` into `## X.Y.Z (YYYY-MM-DD)` under a fresh, empty
//!    `## Unreleased`. Refused unless X.Y.Z is greater than the current version, the
//!    Unreleased section lists something, and the git tree is clean.
//! 2. Runs `cargo xtask msrv` and `cargo xtask publish-check` (names, READMEs, contents, sizes),
//!    then `cargo publish --workspace --dry-run`: every published crate is packaged and built
//!    from its package. Like a real publish, and deliberately without `--allow-dirty`, it
//!    refuses uncommitted changes, so it needs the release edits committed: with `--commit`
//!    they are committed here (`Release X.Y.Z`, those three files only); without it, the
//!    command stops after step 1 and says how to commit and go on, and running
//!    `cargo xtask release X.Y.Z` again on the committed tree does step 2.
//! 3. With `--tag` only: an annotated tag `vX.Y.Z` on that commit, carrying the release's
//!    CHANGELOG section. Nothing is ever pushed or published; the last lines print those
//!    commands.
//!
//! `--dry-run` checks everything it can and shows the edits without writing or running
//! anything.

use std::fmt;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use crate::process::{cargo, fmt_duration, run_inherited};

/// Flags of `cargo xtask release`.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// The new version, MAJOR.MINOR.PATCH.
    #[arg(value_name = "X.Y.Z", value_parser = |v: &str| Version::parse(v).map_err(|e| e.to_string()))]
    version: Version,
    /// Tag the release commit.
    #[arg(long)]
    tag: bool,
    /// Commit the bump.
    #[arg(long)]
    commit: bool,
    /// Change nothing; show what would happen.
    #[arg(long)]
    dry_run: bool,
}

/// A release version: `MAJOR.MINOR.PATCH`, plain numbers (no pre-release or build suffix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Version {
    major: u64,
    minor: u64,
    patch: u64,
}

impl Version {
    fn parse(text: &str) -> Result<Version> {
        let parts: Vec<&str> = text.split('.').collect();
        let number = |part: &str| -> Option<u64> {
            let ok = !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_digit())
                && (part == "0" || !part.starts_with('0'));
            ok.then(|| part.parse().ok()).flatten()
        };
        match parts[..] {
            [a, b, c] => match (number(a), number(b), number(c)) {
                (Some(major), Some(minor), Some(patch)) => Ok(Version {
                    major,
                    minor,
                    patch,
                }),
                _ => bail!("`{text}` is not a version MAJOR.MINOR.PATCH (plain numbers)"),
            },
            _ => bail!("`{text}` is not a version MAJOR.MINOR.PATCH (plain numbers)"),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// One changed region of a file: 1-based line number, the lines it had and the lines it gets.
#[derive(Debug, PartialEq, Eq)]
struct Edit {
    line: usize,
    old: Vec<String>,
    new: Vec<String>,
}

/// The root manifest after a version bump.
#[derive(Debug)]
struct ManifestBump {
    old_version: Version,
    text: String,
    edits: Vec<Edit>,
}

/// The workspace version: `version` in `[workspace.package]`.
fn workspace_version(manifest: &str) -> Result<Version> {
    let mut section = "";
    let mut found = None;
    for line in manifest.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            section = trimmed;
        } else if section == "[workspace.package]" && key(trimmed) == Some("version") {
            if found.is_some() {
                bail!("Cargo.toml: `version` appears twice in [workspace.package]");
            }
            let value = quoted_value(trimmed)
                .context("Cargo.toml: [workspace.package] version is not a plain string")?;
            found = Some(Version::parse(value)?);
        }
    }
    found.context("Cargo.toml: no `version` in [workspace.package]")
}

/// Bumps the lockstep version in the text of the root `Cargo.toml`: the `version` of
/// `[workspace.package]` and the `=A.B.C` requirement of every internal (path) dependency in
/// `[workspace.dependencies]` that has a version (the published crates), which must all equal
/// the workspace version.
fn bump_manifest(manifest: &str, new: Version) -> Result<ManifestBump> {
    let old_version = workspace_version(manifest)?;
    let old_requirement = format!("version = \"={old_version}\"");
    let new_requirement = format!("version = \"={new}\"");
    let mut section = String::new();
    let mut text = String::with_capacity(manifest.len() + 16);
    let mut edits = Vec::new();
    let mut internal = 0;
    for (index, line) in manifest.split_inclusive('\n').enumerate() {
        let trimmed = line.trim();
        let mut replaced = None;
        if trimmed.starts_with('[') {
            trimmed.clone_into(&mut section);
        } else if section == "[workspace.package]" && key(trimmed) == Some("version") {
            replaced = Some(line.replacen(&format!("\"{old_version}\""), &format!("\"{new}\""), 1));
        } else if section == "[workspace.dependencies]"
            && !trimmed.starts_with('#')
            && trimmed.contains("path = \"")
            // Path-only entries (test kit, bench, harness) are never published.
            && trimmed.contains("version = ")
        {
            let name = key(trimmed).unwrap_or(trimmed);
            if !trimmed.contains(&old_requirement) {
                bail!(
                    "Cargo.toml: internal dependency `{name}` in [workspace.dependencies] must \
                     require exactly the workspace version (`{old_requirement}`), found: \
                     {trimmed}"
                );
            }
            internal += 1;
            replaced = Some(line.replacen(&old_requirement, &new_requirement, 1));
        }
        match replaced {
            Some(new_line) => {
                edits.push(Edit {
                    line: index + 1,
                    old: vec![line.trim_end_matches(['\n', '\r']).to_owned()],
                    new: vec![new_line.trim_end_matches(['\n', '\r']).to_owned()],
                });
                text.push_str(&new_line);
            }
            None => text.push_str(line),
        }
    }
    if internal == 0 {
        bail!("Cargo.toml: no internal (path) dependency in [workspace.dependencies]");
    }
    Ok(ManifestBump {
        old_version,
        text,
        edits,
    })
}

/// Turns `## Unreleased` into `## {version} ({date})` under a new, empty `## Unreleased`.
fn promote_changelog(changelog: &str, version: Version, date: &str) -> Result<(String, Edit)> {
    let lines: Vec<&str> = changelog.split_inclusive('\n').collect();
    let headings: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].trim_end() == "## Unreleased")
        .collect();
    let unreleased = match headings[..] {
        [i] => i,
        [] => bail!("CHANGELOG.md has no `## Unreleased` section"),
        _ => bail!("CHANGELOG.md has more than one `## Unreleased` section"),
    };
    if let Some(line) = lines.iter().find(|l| is_release_heading(l, version)) {
        bail!(
            "CHANGELOG.md already has a section for {version}: {}",
            line.trim_end()
        );
    }
    let body_end = (unreleased + 1..lines.len())
        .find(|&i| lines[i].starts_with("## "))
        .unwrap_or(lines.len());
    let has_entries = lines[unreleased + 1..body_end].iter().any(|l| {
        let l = l.trim();
        !l.is_empty() && !l.starts_with('#')
    });
    if !has_entries {
        bail!(
            "the `## Unreleased` section of CHANGELOG.md lists nothing: there is nothing to \
             release (add the user-visible changes there first)"
        );
    }
    let heading = format!("## {version} ({date})");
    let mut text = String::with_capacity(changelog.len() + heading.len() + 16);
    text.extend(lines[..unreleased].iter().copied());
    text.push_str("## Unreleased\n\n");
    text.push_str(&heading);
    text.push('\n');
    text.extend(lines[unreleased + 1..].iter().copied());
    let edit = Edit {
        line: unreleased + 1,
        old: vec!["## Unreleased".to_owned()],
        new: vec!["## Unreleased".to_owned(), String::new(), heading],
    };
    Ok((text, edit))
}

fn is_release_heading(line: &str, version: Version) -> bool {
    let line = line.trim_end();
    let heading = format!("## {version}");
    line == heading || line.starts_with(&format!("{heading} "))
}

/// The CHANGELOG section of `version` (without its heading), for the tag message.
fn release_notes(changelog: &str, version: Version) -> Option<String> {
    let lines: Vec<&str> = changelog.lines().collect();
    let start = lines.iter().position(|l| is_release_heading(l, version))?;
    let end = (start + 1..lines.len())
        .find(|&i| lines[i].starts_with("## "))
        .unwrap_or(lines.len());
    Some(lines[start + 1..end].join("\n").trim().to_owned())
}

/// `key = ...` → `key` (also `key.workspace = true` → `key.workspace`).
fn key(line: &str) -> Option<&str> {
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    (!key.is_empty() && !key.starts_with('#')).then_some(key)
}

/// `key = "value"  # comment` → `value`.
fn quoted_value(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once('=')?;
    let rest = rest.trim().strip_prefix('"')?;
    Some(&rest[..rest.find('"')?])
}

/// The UTC date of `unix_secs` as `YYYY-MM-DD` (proleptic Gregorian calendar).
fn utc_date(unix_secs: u64) -> String {
    let days = i64::try_from(unix_secs / 86_400).unwrap_or(i64::MAX / 2);
    // Shift the epoch to 0000-03-01 so that leap days end each 4/100/400-year cycle.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

fn today() -> Result<String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("the system clock is before 1970")?;
    Ok(utc_date(now.as_secs()))
}

/// Every member of the workspace must take its version from `[workspace.package]`.
fn check_members_inherit_version(root: &Path) -> Result<()> {
    let mut manifests = vec![root.join("xtask/Cargo.toml")];
    for entry in fs::read_dir(root.join("crates")).context("reading crates/")? {
        let path = entry?.path().join("Cargo.toml");
        if path.is_file() {
            manifests.push(path);
        }
    }
    manifests.sort();
    for manifest in manifests {
        let text = fs::read_to_string(&manifest)
            .with_context(|| format!("reading {}", manifest.display()))?;
        if !text.lines().any(|l| l.trim() == "version.workspace = true") {
            bail!(
                "{} does not inherit the workspace version (`version.workspace = true`); \
                 the crates are released in lockstep",
                manifest.display()
            );
        }
    }
    Ok(())
}

fn git(root: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(root).stdin(Stdio::null());
    cmd
}

/// `git status --porcelain` lines: modified, staged and untracked files (ignored ones aside).
fn dirty_files(root: &Path) -> Result<Vec<String>> {
    let output = git(root)
        .args(["status", "--porcelain"])
        .output()
        .context("running `git status` (is git installed, and is this a git checkout?)")?;
    if !output.status.success() {
        bail!(
            "`git status` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

fn require_clean_tree(root: &Path, why: &str) -> Result<()> {
    let dirty = dirty_files(root)?;
    if dirty.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = dirty.iter().take(20).map(String::as_str).collect();
    let more = dirty.len().saturating_sub(shown.len());
    let more = if more > 0 {
        format!("\n  ... and {more} more")
    } else {
        String::new()
    };
    bail!(
        "the git tree has uncommitted changes:\n  {}{more}\n{why}\nCommit or stash them first \
         (untracked files count too: cargo would package them).",
        shown.join("\n  ")
    );
}

fn print_edits(file: &str, edits: &[Edit]) {
    println!("--- {file}");
    for edit in edits {
        println!("@@ line {}", edit.line);
        for line in &edit.old {
            println!("-{line}");
        }
        for line in &edit.new {
            println!("+{line}");
        }
    }
}

fn tag_exists(root: &Path, tag: &str) -> Result<bool> {
    let status = git(root)
        .args(["rev-parse", "--quiet", "--verify"])
        .arg(format!("refs/tags/{tag}"))
        .stdout(Stdio::null())
        .status()
        .context("running `git rev-parse`")?;
    Ok(status.success())
}

const RELEASE_FILES: [&str; 3] = ["Cargo.toml", "Cargo.lock", "CHANGELOG.md"];

pub(crate) fn run(options: &Options) -> Result<()> {
    let root = crate::project_root()?;
    let manifest_path = root.join("Cargo.toml");
    let changelog_path = root.join("CHANGELOG.md");
    let manifest = fs::read_to_string(&manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    let changelog = fs::read_to_string(&changelog_path)
        .with_context(|| format!("reading {}", changelog_path.display()))?;
    let new = options.version;
    let current = workspace_version(&manifest)?;
    check_members_inherit_version(&root)?;
    let prefix = if options.dry_run {
        "xtask release (dry run)"
    } else {
        "xtask release"
    };

    if new < current || (new == current && !changelog.lines().any(|l| is_release_heading(l, new))) {
        bail!(
            "{new} is not greater than the current version {current}; choose a version above \
             {current}"
        );
    }
    let prepare = new > current;
    let mut committed = false;

    if prepare {
        let bump = bump_manifest(&manifest, new)?;
        let date = today()?;
        let (new_changelog, changelog_edit) = promote_changelog(&changelog, new, &date)?;
        eprintln!(
            "{prefix}: {} -> {new} (lockstep, every crate)",
            bump.old_version
        );
        if options.dry_run {
            print_edits("Cargo.toml", &bump.edits);
            print_edits("CHANGELOG.md", &[changelog_edit]);
            println!("--- Cargo.lock: `cargo update --workspace` (the workspace crates' versions)");
            let dirty = dirty_files(&root)?;
            if !dirty.is_empty() {
                println!(
                    "note: the git tree has {} uncommitted or untracked entries; the real run \
                     refuses to start until it is clean",
                    dirty.len()
                );
            }
            if options.commit {
                println!(
                    "would commit: `Release {new}` ({})",
                    RELEASE_FILES.join(", ")
                );
                println!("would run: cargo publish --workspace --dry-run");
                if options.tag {
                    println!("would tag: v{new} (annotated, not pushed)");
                }
            } else {
                println!(
                    "then: commit the three files, run `cargo xtask release {new}{}` again to \
                     run `cargo publish --workspace --dry-run`{}",
                    if options.tag { " --tag" } else { "" },
                    if options.tag { " and tag" } else { "" }
                );
            }
            println!("release {new} (dry run): nothing written");
            return Ok(());
        }

        require_clean_tree(
            &root,
            "A release starts from a clean tree: the release commit holds only the release \
             edits, and `cargo publish --workspace --dry-run` (no --allow-dirty) refuses \
             uncommitted changes.",
        )?;
        fs::write(&manifest_path, &bump.text)
            .with_context(|| format!("writing {}", manifest_path.display()))?;
        fs::write(&changelog_path, &new_changelog)
            .with_context(|| format!("writing {}", changelog_path.display()))?;
        print_edits("Cargo.toml", &bump.edits);
        print_edits("CHANGELOG.md", &[changelog_edit]);
        eprintln!("{prefix}: cargo update --workspace");
        run_inherited(
            "cargo update --workspace",
            cargo().current_dir(&root).args(["update", "--workspace"]),
        )
        .with_context(|| {
            format!(
                "Cargo.toml and CHANGELOG.md are already edited; undo with `git checkout -- {}`",
                RELEASE_FILES.join(" ")
            )
        })?;

        if !options.commit {
            println!(
                "release {new}: prepared (Cargo.toml, Cargo.lock, CHANGELOG.md edited, not \
                 committed).\n\
                 `cargo publish --workspace --dry-run` has not run yet: like a real publish it \
                 refuses uncommitted changes, and releases never use --allow-dirty. Next:\n  \
                 1. review: git diff\n  \
                 2. commit: git commit -m 'Release {new}' -- {}\n  \
                 3. verify{}: cargo xtask release {new}{}",
                RELEASE_FILES.join(" "),
                if options.tag { " and tag" } else { "" },
                if options.tag { " --tag" } else { "" },
            );
            return Ok(());
        }
        eprintln!("{prefix}: git commit -m 'Release {new}'");
        run_inherited(
            "git commit",
            git(&root)
                .args(["commit", "--quiet", "-m", &format!("Release {new}"), "--"])
                .args(RELEASE_FILES),
        )?;
        committed = true;
    } else if options.commit {
        eprintln!(
            "{prefix}: the workspace is already at {new} with a dated CHANGELOG section; \
             nothing to commit, verifying"
        );
    }

    // Verify (and tag) the committed release.
    let tag = format!("v{new}");
    if options.tag && tag_exists(&root, &tag)? {
        bail!("the tag {tag} already exists");
    }
    if options.dry_run {
        require_clean_tree(&root, "The real run would refuse to verify this tree.")?;
        println!("would run: cargo xtask msrv, cargo xtask publish-check");
        println!("would run: cargo publish --workspace --dry-run");
        if options.tag {
            println!("would tag: {tag} (annotated, not pushed)");
        }
        println!("release {new} (dry run): nothing run");
        return Ok(());
    }
    require_clean_tree(
        &root,
        "`cargo publish --workspace --dry-run` verifies the committed release and, like a real \
         publish, refuses uncommitted changes (releases never use --allow-dirty).",
    )?;
    // Names still free (or ours), READMEs, contents, sizes, each crate verified alone; and
    // the minimum Rust still true after the lock file's refresh.
    magma_harness::msrv::run()?;
    magma_harness::publish_check::run()?;
    eprintln!("{prefix}: cargo publish --workspace --dry-run");
    let started = Instant::now();
    run_inherited(
        "cargo publish --workspace --dry-run",
        cargo()
            .current_dir(&root)
            .args(["publish", "--workspace", "--dry-run"]),
    )?;
    let verified_in = fmt_duration(started.elapsed());

    if options.tag {
        let changelog = fs::read_to_string(&changelog_path)
            .with_context(|| format!("reading {}", changelog_path.display()))?;
        let notes = release_notes(&changelog, new).unwrap_or_default();
        let message = format!("magma-rs {new}\n\n{notes}\n");
        run_inherited(
            "git tag",
            // `whitespace`: keep the notes' `### Added` headings, which `strip` drops.
            git(&root).args([
                "tag",
                "--annotate",
                "--cleanup=whitespace",
                &tag,
                "--message",
                &message,
            ]),
        )?;
    }
    println!(
        "release {new}: {}`cargo publish --workspace --dry-run` passed in {verified_in}{}.\n\
         Nothing was pushed or published. To publish:\n  \
         git push origin HEAD{}\n  \
         cargo publish --workspace",
        if committed {
            format!("committed `Release {new}`; ")
        } else {
            String::new()
        },
        if options.tag {
            format!("; tagged {tag}")
        } else {
            String::new()
        },
        if options.tag {
            format!(" {tag}")
        } else {
            format!(" (then tag: cargo xtask release {new} --tag)")
        },
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    /// The real root manifest, bumped in memory: exactly the workspace version and the internal
    /// requirements change, nothing else.
    #[test]
    fn bumps_the_real_manifest_in_lockstep() {
        let manifest = include_str!("../../Cargo.toml");
        let current = workspace_version(manifest).unwrap();
        let next = Version {
            patch: current.patch + 1,
            ..current
        };
        let bump = bump_manifest(manifest, next).unwrap();
        assert_eq!(bump.old_version, current);
        assert_eq!(workspace_version(&bump.text).unwrap(), next);

        let internal = [
            "magma-protocol",
            "magma-client",
            "magma-server",
            "magma-validator",
        ];
        for name in &internal {
            let line = bump
                .text
                .lines()
                .find(|l| l.starts_with(&format!("{name} = ")))
                .unwrap_or_else(|| panic!("{name} in [workspace.dependencies]"));
            assert!(line.contains(&format!("version = \"={next}\"")), "{line}");
        }
        // One edit for [workspace.package], one per internal dependency.
        assert_eq!(bump.edits.len(), 1 + internal.len());
        let before: Vec<&str> = manifest.lines().collect();
        let after: Vec<&str> = bump.text.lines().collect();
        assert_eq!(before.len(), after.len());
        let changed: Vec<usize> = (0..before.len())
            .filter(|&i| before[i] != after[i])
            .map(|i| i + 1)
            .collect();
        let edited: Vec<usize> = bump.edits.iter().map(|e| e.line).collect();
        assert_eq!(changed, edited);
        assert!(!bump.text.contains(&format!("\"={current}\"")));
    }

    #[test]
    fn bumps_a_small_manifest_exactly() {
        let manifest = "[workspace]\nmembers = [\"crates/*\"]\n\n[workspace.package]\n\
                        version = \"1.2.3\" # lockstep\nedition = \"2024\"\n\n\
                        [workspace.dependencies]\n\
                        a = { path = \"crates/a\", version = \"=1.2.3\" }\n\
                        # b = { path = \"crates/b\", version = \"=0.0.1\" }\n\
                        serde = { version = \"1.2.3\" }\n\n[profile.release]\nversion = \"1.2.3\"\n";
        let bump = bump_manifest(manifest, v("1.3.0")).unwrap();
        assert_eq!(
            bump.text,
            "[workspace]\nmembers = [\"crates/*\"]\n\n[workspace.package]\n\
             version = \"1.3.0\" # lockstep\nedition = \"2024\"\n\n\
             [workspace.dependencies]\n\
             a = { path = \"crates/a\", version = \"=1.3.0\" }\n\
             # b = { path = \"crates/b\", version = \"=0.0.1\" }\n\
             serde = { version = \"1.2.3\" }\n\n[profile.release]\nversion = \"1.2.3\"\n"
        );
        assert_eq!(
            bump.edits[1],
            Edit {
                line: 9,
                old: vec!["a = { path = \"crates/a\", version = \"=1.2.3\" }".to_owned()],
                new: vec!["a = { path = \"crates/a\", version = \"=1.3.0\" }".to_owned()],
            }
        );
    }

    #[test]
    fn refuses_a_manifest_out_of_lockstep() {
        let manifest = "[workspace.package]\nversion = \"0.1.0\"\n\n[workspace.dependencies]\n\
                        a = { path = \"crates/a\", version = \"=0.1.0\" }\n\
                        b = { path = \"crates/b\", version = \"0.1\" }\n";
        let err = bump_manifest(manifest, v("0.2.0")).unwrap_err().to_string();
        assert!(err.contains("internal dependency `b`"), "{err}");
        let err = bump_manifest("[workspace]\n", v("0.2.0"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no `version`"), "{err}");
    }

    #[test]
    fn dates_the_unreleased_section() {
        let changelog = "# Changelog\n\nIntro.\n\n## Unreleased\n\n### Added\n\n- New thing.\n\n\
                         ## 0.1.0 (2026-01-01)\n\n- First.\n";
        let (text, edit) = promote_changelog(changelog, v("0.2.0"), "2026-12-02").unwrap();
        assert_eq!(
            text,
            "# Changelog\n\nIntro.\n\n## Unreleased\n\n## 0.2.0 (2026-12-02)\n\n### Added\n\n\
             - New thing.\n\n## 0.1.0 (2026-01-01)\n\n- First.\n"
        );
        assert_eq!(edit.line, 5);
        assert_eq!(
            release_notes(&text, v("0.2.0")).as_deref(),
            Some("### Added\n\n- New thing.")
        );
        // Promoting again is refused: the fresh section is empty.
        let err = promote_changelog(&text, v("0.3.0"), "2026-12-03")
            .unwrap_err()
            .to_string();
        assert!(err.contains("lists nothing"), "{err}");
    }

    #[test]
    fn refuses_an_empty_or_duplicate_release() {
        let only_headings = "## Unreleased\n\n### Added\n\n### Fixed\n\n## 0.1.0 (2026-01-01)\n";
        let err = promote_changelog(only_headings, v("0.2.0"), "2026-12-02")
            .unwrap_err()
            .to_string();
        assert!(err.contains("lists nothing"), "{err}");
        let again = "## Unreleased\n\n- x\n\n## 0.2.0 (2026-01-01)\n";
        let err = promote_changelog(again, v("0.2.0"), "2026-12-02")
            .unwrap_err()
            .to_string();
        assert!(err.contains("already has a section"), "{err}");
        let err = promote_changelog("# Changelog\n", v("0.2.0"), "2026-12-02")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no `## Unreleased`"), "{err}");
    }

    #[test]
    fn the_real_changelog_has_one_unreleased_section() {
        let changelog = include_str!("../../CHANGELOG.md");
        let count = changelog
            .lines()
            .filter(|l| l.trim_end() == "## Unreleased")
            .count();
        assert_eq!(
            count, 1,
            "CHANGELOG.md needs exactly one `## Unreleased` heading"
        );
    }

    #[test]
    fn versions_parse_and_order() {
        assert!(v("0.1.10") > v("0.1.9"));
        assert!(v("1.0.0") > v("0.99.99"));
        assert_eq!(v("10.0.1").to_string(), "10.0.1");
        for bad in [
            "1.2",
            "1.2.3.4",
            "01.2.3",
            "1.2.x",
            "v1.2.3",
            "1.2.3-rc.1",
            "",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dates_are_gregorian_utc() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(11_016 * 86_400), "2000-02-29");
        assert_eq!(utc_date(20_789 * 86_400 + 86_399), "2026-12-02");
    }
}
