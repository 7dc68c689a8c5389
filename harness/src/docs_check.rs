//! `cargo xtask docs-check`: what the README and `docs/` tell a user to type, done as
//! a user would, outside the workspace.
//!
//! 1. **Unpublished names are marked.** Until [`FIRST_RELEASE_PUBLISHED`], a command that
//!    installs from crates.io or PyPI (`cargo install magma-rs-...`, `pip install
//!    magma-validate`) must say "from the first release" on its line or the line above,
//!    and every `cargo install` says `--locked`.
//! 2. **A new crate with the documented dependency lines.** Every `toml` block of the
//!    guides is a user's `[dependencies]` (the repository's `git` lines become `path`
//!    lines to this clone, as the README's "from a clone" line says); the crate is a new
//!    one outside the workspace, without its `Cargo.lock` (cargo resolves the newest
//!    compatible versions, as for a user). Its build must print no warning, and every Rust
//!    block of the guides runs as one of its doctests (compiled only where `no_run`): an
//!    example that needs a crate the docs do not name fails here.
//! 3. **The documented installs.** `cargo install --locked --path crates/...` of both
//!    binaries into a scratch root; the installed `magma-server` serves and the installed
//!    `magma-validate` probes it (exit 0). Every `--flag` of a documented `magma-server` or
//!    `magma-validate` command line is one its `--help` lists.
//!
//! The wheel path (`cargo xtask wheel`, then `pip install` of the file) is CI's
//! `cargo xtask wheel` step. Builds share the workspace's target directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};

use crate::process::{Guard, cargo, free_port, run_inherited, target_dir, wait_for_port};

/// Set when the first release is on crates.io and PyPI (RELEASING.md, step 9): the
/// unmarked `cargo install magma-rs-...` and `pip install magma-validate` then work.
const FIRST_RELEASE_PUBLISHED: bool = false;

/// The pages whose commands and examples are checked.
const PAGES: [&str; 8] = [
    "README.md",
    "docs/server.md",
    "docs/client.md",
    "docs/validator.md",
    "crates/magma-protocol/README.md",
    "crates/magma-client/README.md",
    "crates/magma-server/README.md",
    "crates/magma-validator/README.md",
];

/// Pages with commands only (marks, `--locked`, flags).
const COMMAND_PAGES: [&str; 6] = [
    "docs/deploy.md",
    "docs/security.md",
    "docs/conformance.md",
    "docs/reliability.md",
    "docs/architecture.md",
    "examples/llm-agent/README.md",
];

/// The published packages and their folders.
const PACKAGES: [(&str, &str); 4] = [
    ("magma-rs-protocol", "crates/magma-protocol"),
    ("magma-rs-client", "crates/magma-client"),
    ("magma-rs-server", "crates/magma-server"),
    ("magma-rs-validator", "crates/magma-validator"),
];

pub fn run() -> Result<()> {
    let root = crate::project_root()?;
    let scratch = crate::xtask_dir()?.join("docs-check");
    let mut pages = Vec::new();
    for page in PAGES.iter().chain(&COMMAND_PAGES) {
        let text =
            std::fs::read_to_string(root.join(page)).with_context(|| format!("reading {page}"))?;
        pages.push((*page, text));
    }

    // 1. Marks and --locked.
    let mut problems = Vec::new();
    for (page, text) in &pages {
        problems.extend(command_problems(page, text, FIRST_RELEASE_PUBLISHED));
    }
    if !problems.is_empty() {
        bail!(
            "documented commands that cannot work as written:\n  {}",
            problems.join("\n  ")
        );
    }
    eprintln!("xtask docs-check: every install command is marked or works today, with --locked");

    // 2. A new crate with the documented dependency lines.
    let user_crate = scratch.join("new-crate");
    if user_crate.exists() {
        std::fs::remove_dir_all(&user_crate)
            .with_context(|| format!("removing {}", user_crate.display()))?;
    }
    std::fs::create_dir_all(user_crate.join("src"))?;
    std::fs::create_dir_all(user_crate.join("pages"))?;
    let mut deps = BTreeMap::new();
    let mut lib =
        String::from("//! A user's new crate: every Rust block of the guides is a doctest here.\n");
    for (i, page) in PAGES.iter().enumerate() {
        let text = &pages[i].1;
        for line in dependency_lines(text) {
            let (name, spec) = to_local(&line, &root)?;
            merge(&mut deps, name, spec);
        }
        let copy = format!("page{i}.md");
        // rustdoc reads an unlabelled block as Rust; the guides use them for output.
        std::fs::write(
            user_crate.join("pages").join(&copy),
            label_plain_blocks(text),
        )?;
        lib.push_str(&format!(
            "\n/// `{page}`\n#[doc = include_str!(\"../pages/{copy}\")]\npub struct Page{i};\n"
        ));
    }
    let mut manifest = String::from(
        "[package]\nname = \"new-crate\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         # Not a member of the workspace it happens to sit in.\n[workspace]\n\n[dependencies]\n",
    );
    for (name, spec) in &deps {
        manifest.push_str(&format!("{name} = {spec}\n"));
    }
    std::fs::write(user_crate.join("Cargo.toml"), &manifest)?;
    std::fs::write(user_crate.join("src/lib.rs"), lib)?;
    eprintln!(
        "xtask docs-check: a new crate with the documented dependencies:\n{}",
        manifest
            .lines()
            .skip_while(|l| *l != "[dependencies]")
            .collect::<Vec<_>>()
            .join("\n")
    );
    let target = target_dir(&root);
    let output = cargo()
        .current_dir(&user_crate)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .args(["build", "--color", "never"])
        .output()
        .context("running cargo build in the new crate")?;
    let log = String::from_utf8_lossy(&output.stderr);
    ensure!(
        output.status.success(),
        "the new crate does not build with the documented dependencies:\n{log}"
    );
    let warnings: Vec<&str> = log.lines().filter(|l| l.starts_with("warning")).collect();
    ensure!(
        warnings.is_empty(),
        "building the new crate printed warnings (a user who denies warnings breaks):\n{log}"
    );
    let mut doctests = cargo();
    doctests
        .current_dir(&user_crate)
        .env("CARGO_TARGET_DIR", &target)
        .args(["test", "--doc", "--quiet"]);
    run_inherited(
        "the guides' examples in a new crate with only the documented dependencies",
        &mut doctests,
    )?;

    // 3. The documented installs, and the flags of documented command lines.
    let install_root = scratch.join("install-root");
    for (package, dir) in [PACKAGES[2], PACKAGES[3]] {
        let mut install = cargo();
        install
            .env("CARGO_TARGET_DIR", &target)
            .args(["install", "--locked", "--quiet", "--force", "--root"])
            .arg(&install_root)
            .arg("--path")
            .arg(root.join(dir));
        eprintln!("xtask docs-check: cargo install --locked --path {dir} ({package})");
        run_inherited(
            &format!("cargo install --locked --path {dir}"),
            &mut install,
        )?;
    }
    let bin = install_root.join("bin");
    let server_bin = bin.join(format!("magma-server{}", std::env::consts::EXE_SUFFIX));
    let validate_bin = bin.join(format!("magma-validate{}", std::env::consts::EXE_SUFFIX));
    let version = stdout(Command::new(&server_bin).arg("--version"))?;
    ensure!(
        version.contains("features: cli, tls"),
        "the installed magma-server says {version:?}, not the README's features"
    );
    let port = free_port()?;
    let mut cmd = Command::new(&server_bin);
    cmd.args(["--listen", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn");
    let mut server = Guard::spawn("magma-server", &mut cmd)?;
    wait_for_port(&mut server, port, Duration::from_secs(30))?;
    let status = Command::new(&validate_bin)
        .args([
            "probe",
            &format!("http://127.0.0.1:{port}"),
            "--progress",
            "never",
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running the installed magma-validate")?;
    server.ensure_running()?;
    drop(server);
    ensure!(
        status.success(),
        "the installed magma-validate probe of the installed magma-server exited with {status}"
    );

    let mut unknown = Vec::new();
    let mut helps: BTreeMap<String, String> = BTreeMap::new();
    let mut invocations = 0;
    for (page, text) in &pages {
        for (line_no, program, sub, flags) in documented_invocations(text) {
            invocations += 1;
            let key = format!("{program} {sub}");
            if !helps.contains_key(&key) {
                let exe = if program == "magma-server" {
                    &server_bin
                } else {
                    &validate_bin
                };
                let mut help = Command::new(exe);
                if !sub.is_empty() {
                    help.arg(&sub);
                }
                helps.insert(key.clone(), stdout(help.arg("--help"))?);
            }
            let help = &helps[&key];
            for flag in flags {
                if !help_lists(help, &flag) {
                    unknown.push(format!("{page}:{line_no}: `{key}` has no flag {flag}"));
                }
            }
        }
    }
    ensure!(
        unknown.is_empty(),
        "documented flags that do not exist:\n  {}",
        unknown.join("\n  ")
    );

    println!(
        "docs-check: marks and --locked hold on {} pages; a new crate with {} documented dependencies built without a warning and ran the guides' examples; both binaries installed with --locked, the installed probe passed; the flags of {} documented command lines exist ({} commands' --help read)",
        pages.len(),
        deps.len(),
        invocations,
        helps.len()
    );
    Ok(())
}

fn stdout(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether `--help` output lists `flag` (as `--flag` followed by a space, `,`, `=`,
/// `[` or `<`, or at a line's end).
fn help_lists(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let next = help[at + flag.len()..].chars().next();
        matches!(next, None | Some(' ' | ',' | '=' | '[' | '<' | '\n'))
    })
}

/// The lines inside fenced blocks of `lang` (`toml`, `sh`, ...), with their line numbers.
fn fenced(text: &str, langs: &[&str]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    // `Some(wanted)` inside a block: whether its language is one of `langs`.
    let mut block: Option<bool> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            block = match block {
                Some(_) => None,
                None => Some(langs.contains(&info.split(',').next().unwrap_or("").trim())),
            };
            continue;
        }
        if block == Some(true) {
            out.push((i + 1, line.to_owned()));
        }
    }
    out
}

/// The page with its unlabelled fenced blocks labelled `text`.
fn label_plain_blocks(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut inside = false;
    for line in text.lines() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            if !inside && info.trim().is_empty() {
                out.push_str(line);
                out.push_str("text\n");
                inside = true;
                continue;
            }
            inside = !inside;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The `name = spec` lines of the page's `toml` blocks (comments and tables skipped).
pub(crate) fn dependency_lines(text: &str) -> Vec<String> {
    fenced(text, &["toml"])
        .into_iter()
        .filter_map(|(_, line)| {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('[') {
                return None;
            }
            let code = trimmed.split(" #").next().unwrap_or(trimmed).trim();
            code.contains(" = ").then(|| code.to_owned())
        })
        .collect()
}

/// A dependency line with the repository's `git` source turned into this clone's path.
fn to_local(line: &str, root: &Path) -> Result<(String, String)> {
    let (name, spec) = line
        .split_once(" = ")
        .with_context(|| format!("not a dependency line: {line}"))?;
    let name = name.trim().to_owned();
    let mut spec = spec.trim().to_owned();
    if let Some((_, dir)) = PACKAGES.iter().find(|(p, _)| *p == name) {
        let git = "git = \"https://github.com/magma-rs/magma-rs\"";
        ensure!(
            spec.contains(git),
            "{name}: the docs' line {line:?} does not name the repository"
        );
        let path: PathBuf = root.join(dir);
        spec = spec.replace(git, &format!("path = {:?}", path.display().to_string()));
    }
    Ok((name, spec))
}

/// Adds `name = spec`, uniting the features of two lines for one package.
fn merge(deps: &mut BTreeMap<String, String>, name: String, spec: String) {
    match deps.get(&name) {
        None => {
            deps.insert(name, spec);
        }
        Some(old) if features(old).is_empty() => {
            if !features(&spec).is_empty() {
                deps.insert(name, spec);
            }
        }
        Some(old) => {
            let mut all = features(old);
            for f in features(&spec) {
                if !all.contains(&f) {
                    all.push(f);
                }
            }
            let list = all
                .iter()
                .map(|f| format!("{f:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            let start = old.find("features = [").unwrap_or(0);
            let end = old[start..].find(']').map_or(old.len(), |e| start + e + 1);
            let merged = format!("{}features = [{list}]{}", &old[..start], &old[end..]);
            deps.insert(name, merged);
        }
    }
}

/// The `features = [...]` of a dependency spec.
fn features(spec: &str) -> Vec<String> {
    let Some(start) = spec.find("features = [") else {
        return Vec::new();
    };
    let rest = &spec[start + "features = [".len()..];
    let list = rest.split(']').next().unwrap_or("");
    list.split(',')
        .map(|f| f.trim().trim_matches('"').to_owned())
        .filter(|f| !f.is_empty())
        .collect()
}

/// Problems of the page's install commands: an unpublished name without the "from the
/// first release" mark (on the line or the one above), a `cargo install` without
/// `--locked`.
pub(crate) fn command_problems(page: &str, text: &str, published: bool) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut problems = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let marked =
            |l: &str| l.contains("from the first release") || l.contains("From the first release");
        let near = marked(line) || (i > 0 && marked(lines[i - 1]));
        for cmd in line.split('`').flat_map(|s| s.split(';')) {
            let cmd = cmd.trim().trim_start_matches("- run:").trim();
            let cmd = cmd.strip_prefix("# ").unwrap_or(cmd).trim();
            if let Some(rest) = cmd.strip_prefix("cargo install ") {
                if !rest.split_whitespace().any(|w| w == "--locked") {
                    problems.push(format!(
                        "{page}:{}: `cargo install` without --locked: {}",
                        i + 1,
                        line.trim()
                    ));
                }
                let from_registry = !rest.contains("--git") && !rest.contains("--path");
                let ours = rest.split_whitespace().any(|w| w.starts_with("magma-rs-"));
                if from_registry && ours && !published && !near {
                    problems.push(format!(
                        "{page}:{}: installs an unpublished crate without \"from the first release\": {}",
                        i + 1,
                        line.trim()
                    ));
                }
            }
            let pip_unpublished = cmd
                .strip_prefix("pip install ")
                .is_some_and(|rest| rest.split_whitespace().any(|w| w == "magma-validate"));
            if pip_unpublished && !published && !near {
                problems.push(format!(
                    "{page}:{}: `pip install magma-validate` (not on PyPI before the first release) without \"from the first release\": {}",
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    problems
}

/// `(line, program, subcommand, flags)` of every `magma-server ...` or
/// `magma-validate SUB ...` command line in the page's `sh`, `yaml` or plain blocks.
pub(crate) fn documented_invocations(text: &str) -> Vec<(usize, String, String, Vec<String>)> {
    let mut out = Vec::new();
    for (line_no, line) in fenced(text, &["sh", "bash", "yaml", ""]) {
        let code = line.split(" # ").next().unwrap_or(&line);
        let code = code.trim().trim_start_matches("- run:").trim();
        let mut words = code.split_whitespace();
        let program = match words.next() {
            Some(p @ ("magma-server" | "magma-validate")) => p.to_owned(),
            _ => continue,
        };
        let mut words = words.peekable();
        let sub = if program == "magma-validate" {
            match words.peek() {
                Some(w) if !w.starts_with('-') => words.next().unwrap_or_default().to_owned(),
                _ => String::new(),
            }
        } else {
            String::new()
        };
        let flags = words
            .filter(|w| w.starts_with("--"))
            .map(|w| w.split('=').next().unwrap_or(w).to_owned())
            .collect();
        out.push((line_no, program, sub, flags));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmarked_unpublished_installs_and_missing_locked_are_named() {
        let page = "```sh\npip install magma-validate\n# from the first release:\npip install magma-validate\ncargo install --git https://x magma-rs-server\ncargo install --locked magma-rs-server   # from the first release\n\ncargo install --locked magma-rs-validator\n```\n";
        let problems = command_problems("p.md", page, false);
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(
            problems[0].starts_with("p.md:2: `pip install magma-validate`"),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].starts_with("p.md:5: `cargo install` without --locked"),
            "{}",
            problems[1]
        );
        assert!(
            problems[2].starts_with("p.md:8: installs an unpublished crate"),
            "{}",
            problems[2]
        );
        assert_eq!(command_problems("p.md", page, true).len(), 1);
    }

    #[test]
    fn dependency_lines_come_from_toml_blocks_only() {
        let page = "```toml\n[dependencies]\n# a = 1\nmagma-rs-server = { git = \"https://github.com/magma-rs/magma-rs\" }  # agents\n```\n```sh\nx = 1\n```\n```toml\ntokio = \"1\"\n```\n";
        assert_eq!(
            dependency_lines(page),
            [
                "magma-rs-server = { git = \"https://github.com/magma-rs/magma-rs\" }",
                "tokio = \"1\""
            ]
        );
    }

    #[test]
    fn features_of_two_lines_are_united() {
        let mut deps = BTreeMap::new();
        merge(&mut deps, "c".into(), "{ path = \"x\" }".into());
        merge(
            &mut deps,
            "c".into(),
            "{ path = \"x\", features = [\"tls\"] }".into(),
        );
        merge(
            &mut deps,
            "c".into(),
            "{ path = \"x\", features = [\"a\"] }".into(),
        );
        assert_eq!(deps["c"], "{ path = \"x\", features = [\"tls\", \"a\"] }");
    }

    #[test]
    fn invocations_and_their_flags() {
        let page = "```sh\nmagma-validate probe http://x --cacert ca.pem --format=junit  # a comment --not\nmagma-server --listen 1\n```\n";
        let got = documented_invocations(page);
        assert_eq!(got[0].2, "probe");
        assert_eq!(got[0].3, ["--cacert", "--format"]);
        assert_eq!(got[1].3, ["--listen"]);
        assert!(help_lists("  --listen <ADDR>\n", "--listen"));
        assert!(!help_lists("  --listen-x <ADDR>\n", "--listen"));
    }
}
