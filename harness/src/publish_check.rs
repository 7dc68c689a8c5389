//! `cargo xtask publish-check`: everything a `cargo publish` of the workspace would need,
//! checked without publishing.
//!
//! 1. Names: each publishable crate's name is free on crates.io or already this project's
//!    (`cargo info`, run outside the workspace; the `repository` it reports must be ours). A
//!    registry that cannot be reached is reported and the names are left unchecked.
//! 2. READMEs (the crate registry's and docs.rs's front pages): every link absolute
//!    (`https://...`), no bracketed item (`` [`Agent`] ``) without a link definition (it would
//!    show as plain brackets on crates.io), GitHub links of this repository pointing at files
//!    that exist, and docs.rs links pointing at items that `cargo doc` generated (when
//!    `target/doc` is there; CI builds it first).
//! 3. Contents: `cargo package --list` of each crate holds its sources, README and licenses,
//!    and no tests, fixtures or benches.
//! 4. Package and verify, in dependency order: `cargo package` of every publishable crate;
//!    cargo builds each one alone from its `.crate`, with its workspace dependencies taken
//!    from the packages made just before (a local registry under `target/package`), as they
//!    would come from crates.io. Each `.crate` must stay under 300 KiB. Cargo treats a
//!    registry crate's version as its content, so what an earlier run left (`target/package`,
//!    and the local registry's sources unpacked under the cargo home) is removed first;
//!    otherwise a version packaged before would be verified with its old build.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::msrv::{Graph, metadata};
use crate::process::{cargo, run_inherited, target_dir};

/// The largest `.crate` accepted.
const MAX_CRATE_BYTES: u64 = 300 * 1024;

/// Where the repository's files are shown on GitHub.
const BLOB_PREFIX: &str = "/blob/main/";

/// One publishable crate.
#[derive(Debug)]
struct Crate {
    name: String,
    version: String,
    lib: Option<String>,
    dir: PathBuf,
    repository: Option<String>,
}

pub fn run() -> Result<()> {
    let root = crate::project_root()?;
    let meta = metadata(&root)?;
    let crates = publishable_in_order(&meta)?;
    let order: Vec<&str> = crates.iter().map(|c| c.name.as_str()).collect();
    println!(
        "xtask publish-check: {} crates, in dependency order: {}",
        crates.len(),
        order.join(" -> ")
    );
    let mut problems = Vec::new();

    // 1. Names.
    for c in &crates {
        match name_status(&c.name) {
            NameStatus::Free => println!("  name {}: free on crates.io", c.name),
            NameStatus::Published(repo) if c.repository.as_deref() == Some(repo.as_str()) => {
                println!("  name {}: published by this project ({repo})", c.name);
            }
            NameStatus::Published(repo) => problems.push(format!(
                "{}: the name is taken on crates.io by another project (repository: {repo}); \
                 choose another package name",
                c.name
            )),
            NameStatus::Unknown(why) => println!(
                "  name {}: NOT CHECKED, crates.io could not be asked ({why}); run again with \
                 network access before publishing",
                c.name
            ),
        }
    }

    // 2. READMEs.
    let doc_dir = target_dir(&root).join("doc");
    if !doc_dir.is_dir() {
        println!(
            "  docs.rs links: NOT CHECKED against generated docs ({} is missing; run `cargo doc \
             --workspace --no-deps --all-features` first)",
            doc_dir.display()
        );
    }
    for c in &crates {
        let readme = c.dir.join("README.md");
        let text = std::fs::read_to_string(&readme)
            .with_context(|| format!("reading {}", readme.display()))?;
        let found = readme_problems(&text, &root, &doc_dir, c.repository.as_deref());
        if found.is_empty() {
            println!("  README of {}: links absolute and resolvable", c.name);
        }
        problems.extend(
            found
                .into_iter()
                .map(|p| format!("{}/README.md: {p}", c.name)),
        );
    }

    // 3. Contents.
    for c in &crates {
        let out = cargo()
            .current_dir(&root)
            .args(["package", "--list", "--allow-dirty", "-p", &c.name])
            .output()
            .context("running cargo package --list")?;
        if !out.status.success() {
            bail!(
                "cargo package --list -p {} failed:\n{}",
                c.name,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let files: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        println!(
            "  contents of {} ({} files): {}",
            c.name,
            files.len(),
            files.join(" ")
        );
        problems.extend(
            content_problems(&files)
                .into_iter()
                .map(|p| format!("{}: {p}", c.name)),
        );
    }
    if !problems.is_empty() {
        bail!("publish check failed:\n  {}", problems.join("\n  "));
    }

    // 4. Package and verify, each crate alone, in dependency order, from nothing left by an
    //    earlier run: cargo takes a registry crate's version as its content, so it would
    //    reuse what it built, and what it unpacked, for an older state of the same version.
    let package_dir = target_dir(&root).join("package");
    if package_dir.exists() {
        std::fs::remove_dir_all(&package_dir)
            .with_context(|| format!("removing {}", package_dir.display()))?;
        println!(
            "  removed {} (packages, and builds of them, from an earlier run)",
            package_dir.display()
        );
    }
    for stale in forget_registry_builds(&target_dir(&root), &crates)? {
        println!(
            "  forgot a build of an earlier package of this version: {}",
            stale.display()
        );
    }
    match cargo_home() {
        Some(home) => {
            for stale in forget_unpacked_sources(&home, &crates)? {
                println!(
                    "  removed sources cargo unpacked from an earlier packaging of this path: {}",
                    stale.display()
                );
            }
        }
        None => println!(
            "  CARGO_HOME and HOME are unset: sources unpacked by an earlier packaging are not \
             looked for"
        ),
    }
    let mut cmd = cargo();
    cmd.current_dir(&root).args(["package", "--allow-dirty"]);
    for c in &crates {
        cmd.args(["-p", &c.name]);
    }
    run_inherited(
        "cargo package (packages and verifies every crate)",
        &mut cmd,
    )?;
    for c in &crates {
        let file = package_dir.join(format!("{}-{}.crate", c.name, c.version));
        let size = std::fs::metadata(&file)
            .with_context(|| format!("{} was not written", file.display()))?
            .len();
        let verdict = if size < MAX_CRATE_BYTES {
            "ok"
        } else {
            "TOO LARGE"
        };
        println!(
            "  {}: {:.1} KiB (limit {} KiB): {verdict}",
            file.file_name().unwrap_or_default().to_string_lossy(),
            size as f64 / 1024.0,
            MAX_CRATE_BYTES / 1024
        );
        if size >= MAX_CRATE_BYTES {
            problems.push(format!("{}: the .crate is {size} bytes", c.name));
        }
        if c.lib.is_none() {
            problems.push(format!("{}: no library target", c.name));
        }
    }
    if !problems.is_empty() {
        bail!("publish check failed:\n  {}", problems.join("\n  "));
    }
    println!(
        "xtask publish-check: ok: {} packaged and verified alone, in dependency order; nothing \
         was published",
        order.join(", ")
    );
    Ok(())
}

/// Where cargo keeps its registries: `CARGO_HOME`, else `~/.cargo`.
fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
}

/// Removes what cargo unpacked of this workspace's crates from the local registries of
/// earlier `cargo package` runs, and returns the folders removed.
///
/// To verify a crate against the packages made just before it, cargo serves them from a
/// local registry under `target/package` and unpacks each one into
/// `<cargo home>/registry/src/-<hash of that registry's path>/<name>-<version>`. It never
/// unpacks a version again while that folder exists. A checkout at a path that was
/// packaged before (a CI machine that reuses its work folder) would then verify each crate
/// against the *old* sources of its unchanged version, and fail on code that is right (or
/// pass on code that is wrong). Local registries have no host, so their folders' names begin
/// with `-`; crates.io's and other remote registries' folders are left alone.
fn forget_unpacked_sources(cargo_home: &Path, crates: &[Crate]) -> Result<Vec<PathBuf>> {
    let src = cargo_home.join("registry").join("src");
    let entries = match std::fs::read_dir(&src) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", src.display())),
    };
    let mut removed = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", src.display()))?;
        if !entry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for c in crates {
            let unpacked = entry.path().join(format!("{}-{}", c.name, c.version));
            if unpacked.is_dir() {
                std::fs::remove_dir_all(&unpacked)
                    .with_context(|| format!("removing {}", unpacked.display()))?;
                removed.push(unpacked);
            }
        }
    }
    removed.sort();
    Ok(removed)
}

/// Removes the fingerprints of builds of this workspace's crates made from a local registry
/// (an earlier `cargo package`), and returns the fingerprint folders removed.
///
/// When cargo verifies a crate, it builds the packages it depends on from the local
/// registry in the workspace's target folder. Their files are unpacked with one fixed
/// modification time, so cargo finds a build of an *earlier* package of the same version
/// fresh and links against it. A build is recognised by its dependency file
/// (`<profile>/deps/<lib>-<hash>.d`) naming sources under a local registry
/// (`registry/src/-<hash>/`); removing `<profile>/.fingerprint/<package>-<hash>` makes cargo
/// build it again. The workspace's own builds are left alone.
fn forget_registry_builds(target: &Path, crates: &[Crate]) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let Ok(profiles) = std::fs::read_dir(target) else {
        return Ok(removed);
    };
    for profile in profiles.flatten() {
        let deps = profile.path().join("deps");
        let Ok(files) = std::fs::read_dir(&deps) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".d") else {
                continue;
            };
            let Some((lib, hash)) = stem.rsplit_once('-') else {
                continue;
            };
            let Some(c) = crates.iter().find(|c| c.lib.as_deref() == Some(lib)) else {
                continue;
            };
            let text = std::fs::read_to_string(file.path()).unwrap_or_default();
            let unpacked = format!("-{}", c.version);
            let from_local_registry = text.lines().any(|line| {
                line.contains("/registry/src/-") && line.contains(&format!("{}{unpacked}/", c.name))
            });
            if !from_local_registry {
                continue;
            }
            let fingerprint = profile
                .path()
                .join(".fingerprint")
                .join(format!("{}-{hash}", c.name));
            if fingerprint.is_dir() {
                std::fs::remove_dir_all(&fingerprint)
                    .with_context(|| format!("removing {}", fingerprint.display()))?;
                removed.push(fingerprint);
            }
        }
    }
    removed.sort();
    Ok(removed)
}

/// The publishable workspace members, each after the members it depends on.
fn publishable_in_order(meta: &Value) -> Result<Vec<Crate>> {
    let graph = Graph::from_metadata(meta)?;
    let ids: Vec<String> = graph.publishable();
    let package = |id: &str| {
        meta["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    let internal_deps = |p: &Value| -> BTreeSet<String> {
        p["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["kind"].is_null() || d["kind"] == "build")
            .filter_map(|d| d["name"].as_str().map(str::to_owned))
            .collect()
    };
    let mut pending: Vec<Value> = ids.iter().map(|id| package(id)).collect();
    let names: BTreeSet<String> = pending
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut ordered = Vec::new();
    while !pending.is_empty() {
        let before = pending.len();
        let mut rest = Vec::new();
        for p in pending {
            let waits = internal_deps(&p)
                .iter()
                .any(|d| names.contains(d) && !done.contains(d));
            if waits {
                rest.push(p);
                continue;
            }
            let name = p["name"].as_str().unwrap_or_default().to_owned();
            done.insert(name.clone());
            let lib = p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| {
                    t["kind"]
                        .as_array()
                        .is_some_and(|k| k.iter().any(|k| k == "lib"))
                })
                .and_then(|t| t["name"].as_str().map(str::to_owned));
            let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap_or_default());
            ordered.push(Crate {
                name,
                version: p["version"].as_str().unwrap_or_default().to_owned(),
                lib,
                dir: manifest.parent().map(Path::to_path_buf).unwrap_or_default(),
                repository: p["repository"].as_str().map(str::to_owned),
            });
        }
        if rest.len() == before {
            bail!("the publishable crates depend on each other in a cycle");
        }
        pending = rest;
    }
    Ok(ordered)
}

#[derive(Debug, PartialEq, Eq)]
enum NameStatus {
    Free,
    Published(String),
    Unknown(String),
}

/// Asks crates.io about `name` with `cargo info`, from outside the workspace (inside it,
/// `cargo info` describes the local package).
fn name_status(name: &str) -> NameStatus {
    let out = match cargo()
        .current_dir(std::env::temp_dir())
        .args(["info", name, "--registry", "crates-io", "--quiet"])
        .env("CARGO_NET_RETRY", "1")
        .env("CARGO_HTTP_TIMEOUT", "30")
        .output()
    {
        Ok(out) => out,
        Err(e) => return NameStatus::Unknown(format!("cannot run cargo info: {e}")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    classify_info(out.status.success(), &stdout, &stderr)
}

fn classify_info(success: bool, stdout: &str, stderr: &str) -> NameStatus {
    if success {
        let repository = stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("repository:"))
            .map_or_else(|| "none given".to_owned(), |r| r.trim().to_owned());
        return NameStatus::Published(repository);
    }
    if stderr.contains("could not find") {
        return NameStatus::Free;
    }
    let first = stderr
        .lines()
        .find(|l| l.contains("error"))
        .unwrap_or("no answer")
        .trim();
    NameStatus::Unknown(first.to_owned())
}

/// What a package must not hold, and what it must.
fn content_problems(files: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    for f in files {
        let forbidden = f.starts_with("tests/")
            || f.starts_with("benches/")
            || f.starts_with("fuzz/")
            || f.contains("fixtures")
            || f.contains("proptest-regressions")
            || f.ends_with(".jsonl");
        if forbidden {
            problems.push(format!(
                "the package holds {f} (tests, fixtures and benches stay out)"
            ));
        }
    }
    for needed in ["README.md", "LICENSE-MIT", "LICENSE-APACHE", "src/lib.rs"] {
        if !files.iter().any(|f| f == needed) {
            problems.push(format!("the package lacks {needed}"));
        }
    }
    problems
}

/// Links of a crate README that would not work on crates.io or docs.rs.
fn readme_problems(
    text: &str,
    root: &Path,
    doc_dir: &Path,
    repository: Option<&str>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let prose = without_code_blocks(text);
    let mut definitions = BTreeSet::new();
    for line in prose.lines() {
        let line = line.trim();
        if let Some((label, url)) = line.strip_prefix('[').and_then(|l| l.split_once("]: ")) {
            definitions.insert(label.to_owned());
            problems.extend(url_problem(url.trim(), root, doc_dir, repository));
        }
    }
    // Inline links: `[text](url)`.
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let url = after.split(')').next().unwrap_or_default().trim();
        problems.extend(url_problem(url, root, doc_dir, repository));
        rest = after;
    }
    // Bracketed items without a definition: `[`Agent`]` not followed by `(` or `[`.
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("[`") {
        let after = &rest[at + 1..];
        let Some(end) = after.find("`]") else { break };
        let label = &after[..end + 1];
        let next = after[end + 2..].chars().next();
        let linked = matches!(next, Some('(' | '[' | ':'));
        if !linked && !definitions.contains(label) && !label.contains('\n') {
            problems.push(format!(
                "[{label}] has no link definition: it shows as plain brackets on crates.io \
                 (add `[{label}]: https://docs.rs/...`)"
            ));
        }
        rest = &after[end + 2..];
    }
    problems
}

fn url_problem(url: &str, root: &Path, doc_dir: &Path, repository: Option<&str>) -> Option<String> {
    let url = url.split_whitespace().next().unwrap_or_default();
    if url.starts_with('#') {
        return None;
    }
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Some(format!(
            "relative link {url:?}: dead on crates.io and docs.rs; link the repository \
             (https://github.com/.../blob/main/{url}) or docs.rs"
        ));
    }
    let path = url.split('#').next().unwrap_or_default();
    let file = repository
        .and_then(|repo| path.strip_prefix(repo))
        .and_then(|p| p.strip_prefix(BLOB_PREFIX));
    if let Some(file) = file.filter(|f| !root.join(f).exists()) {
        return Some(format!("{url}: {file} is not in the repository"));
    }
    if let Some(rest) = path.strip_prefix("https://docs.rs/") {
        // https://docs.rs/<package>[/latest/<lib>/<item path>]
        let parts: Vec<&str> = rest.splitn(4, '/').collect();
        let missing = match parts[..] {
            [_, "latest", lib, item] if doc_dir.is_dir() => {
                (!doc_dir.join(lib).join(item).is_file()).then_some((lib, item))
            }
            _ => None,
        };
        if let Some((lib, item)) = missing {
            return Some(format!(
                "{url}: `cargo doc` made no {lib}/{item}; is the item path right?"
            ));
        }
    }
    None
}

/// The text with fenced code blocks and inline code spans (other than bracketed ones)
/// blanked out, lines kept.
fn without_code_blocks(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if !fenced {
            out.push_str(&blank_code_spans(line));
        }
        out.push('\n');
    }
    out
}

/// Blanks `` `code` `` spans unless they are an item in brackets (`` [`Json`] ``).
fn blank_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.char_indices().peekable();
    let bytes = line.as_bytes();
    while let Some((i, c)) = chars.next() {
        if c != '`' {
            out.push(c);
            continue;
        }
        let Some(len) = line[i + 1..].find('`') else {
            out.push(c);
            continue;
        };
        let end = i + 1 + len;
        let bracketed = i > 0 && bytes[i - 1] == b'[' && bytes.get(end + 1) == Some(&b']');
        if bracketed {
            out.push_str(&line[i..=end]);
        } else {
            out.push_str("``");
        }
        while chars.peek().is_some_and(|(j, _)| *j <= end) {
            chars.next();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: &str = "https://github.com/magma-rs/magma-rs";

    #[test]
    fn builds_from_local_registries_are_forgotten_and_nothing_else() {
        let target = magma_testkit::TempDir::new("xtask-target");
        let debug = target.path().join("debug");
        let unit = |hash: &str, source: &str| {
            std::fs::create_dir_all(debug.join("deps")).unwrap();
            let fingerprint = debug
                .join(".fingerprint")
                .join(format!("magma-rs-protocol-{hash}"));
            std::fs::create_dir_all(&fingerprint).unwrap();
            std::fs::write(
                debug.join("deps").join(format!("magma_protocol-{hash}.d")),
                format!(
                    "{}/deps/libmagma_protocol-{hash}.rlib: {source}/src/lib.rs\n",
                    debug.display()
                ),
            )
            .unwrap();
            fingerprint
        };
        let packaged = unit(
            "2f1682dbfeef73dd",
            "/home/x/.cargo/registry/src/-14cd1cce6819ff87/magma-rs-protocol-0.1.0",
        );
        let workspace = unit("565e3a9fe6cef55e", "/repo/crates/magma-protocol");
        let crates_io = unit(
            "0123456789abcdef",
            "/home/x/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/magma-rs-protocol-0.1.0",
        );
        let crates = [Crate {
            name: "magma-rs-protocol".into(),
            version: "0.1.0".into(),
            lib: Some("magma_protocol".into()),
            dir: PathBuf::new(),
            repository: None,
        }];
        assert_eq!(
            forget_registry_builds(target.path(), &crates).unwrap(),
            std::slice::from_ref(&packaged)
        );
        assert!(!packaged.exists());
        assert!(workspace.is_dir() && crates_io.is_dir());
        // A target folder that does not exist yet is not an error.
        assert!(
            forget_registry_builds(&target.path().join("none"), &crates)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn sources_unpacked_from_local_registries_are_forgotten_and_nothing_else() {
        let home = magma_testkit::TempDir::new("xtask-cargo-home");
        let src = home.path().join("registry").join("src");
        let ours = |registry: &str, name: &str| src.join(registry).join(name);
        for dir in [
            ours("-14cd1cce6819ff87", "magma-rs-protocol-0.1.0"),
            ours("-14cd1cce6819ff87", "magma-rs-protocol-0.0.9"),
            ours("-22c3805da5a543b4", "magma-rs-protocol-0.1.0"),
            ours("-22c3805da5a543b4", "serde-1.0.0"),
            ours(
                "index.crates.io-1949cf8c6b5b557f",
                "magma-rs-protocol-0.1.0",
            ),
        ] {
            std::fs::create_dir_all(dir.join("src")).unwrap();
        }
        let crates = [Crate {
            name: "magma-rs-protocol".into(),
            version: "0.1.0".into(),
            lib: Some("magma_protocol".into()),
            dir: PathBuf::new(),
            repository: None,
        }];
        let removed = forget_unpacked_sources(home.path(), &crates).unwrap();
        assert_eq!(
            removed,
            [
                ours("-14cd1cce6819ff87", "magma-rs-protocol-0.1.0"),
                ours("-22c3805da5a543b4", "magma-rs-protocol-0.1.0"),
            ]
        );
        assert!(!removed[0].exists() && !removed[1].exists());
        // Another version, another crate and crates.io's copy stay.
        assert!(ours("-14cd1cce6819ff87", "magma-rs-protocol-0.0.9").is_dir());
        assert!(ours("-22c3805da5a543b4", "serde-1.0.0").is_dir());
        assert!(
            ours(
                "index.crates.io-1949cf8c6b5b557f",
                "magma-rs-protocol-0.1.0"
            )
            .is_dir()
        );
        // A cargo home without registries is not an error.
        let empty = magma_testkit::TempDir::new("xtask-cargo-home-empty");
        assert!(
            forget_unpacked_sources(empty.path(), &crates)
                .unwrap()
                .is_empty()
        );
    }

    fn problems(text: &str) -> Vec<String> {
        let root = crate::project_root().unwrap();
        readme_problems(text, &root, Path::new("/nonexistent/doc"), Some(REPO))
    }

    #[test]
    fn readme_links_must_be_absolute_and_items_defined() {
        assert!(
            problems(
                "See [the guide](https://github.com/magma-rs/magma-rs/blob/main/docs/server.md)."
            )
            .is_empty()
        );
        assert_eq!(problems("See [the guide](docs/server.md).").len(), 1);
        let missing = problems("Implement [`Agent`], then serve.");
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(missing[0].contains("[`Agent`] has no link definition"));
        assert!(problems(
            "Implement [`Agent`].\n\n[`Agent`]: https://docs.rs/magma-rs-server/latest/magma_server/trait.Agent.html"
        )
        .is_empty());
        // A file of this repository that does not exist.
        assert_eq!(
            problems("[x](https://github.com/magma-rs/magma-rs/blob/main/docs/nothing.md)").len(),
            1
        );
        // Code is not prose: brackets and links in code blocks and spans do not count.
        assert!(
            problems("```rust\nlet a = [`x`];\n[y](z)\n```\n`{\"a\": [1]}` and `[x](y)`")
                .is_empty()
        );
    }

    #[test]
    fn packages_hold_no_tests_fixtures_or_benches() {
        let good: Vec<String> = [
            "Cargo.toml",
            "README.md",
            "LICENSE-MIT",
            "LICENSE-APACHE",
            "src/lib.rs",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert!(content_problems(&good).is_empty());
        let mut bad = good.clone();
        bad.push("tests/fixtures/reference.jsonl".to_owned());
        bad.push("benches/parse.rs".to_owned());
        assert_eq!(content_problems(&bad).len(), 2);
        assert_eq!(content_problems(&good[..2]).len(), 3);
    }

    #[test]
    fn cargo_info_answers_are_classified() {
        assert_eq!(
            classify_info(
                false,
                "",
                "error: could not find `magma-rs-x` in registry `crates-io`"
            ),
            NameStatus::Free
        );
        assert_eq!(
            classify_info(
                true,
                "magma-protocol #terraform\nrepository: https://example.com/tf\n",
                ""
            ),
            NameStatus::Published("https://example.com/tf".to_owned())
        );
        assert!(matches!(
            classify_info(
                false,
                "",
                "error: failed to query replaced source registry `crates-io`"
            ),
            NameStatus::Unknown(_)
        ));
    }
}
