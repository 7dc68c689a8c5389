//! `cargo xtask wheel [--debug]`: the `magma-validate` binary as a Python
//! wheel, and a smoke test of it the way a MAGMA agent author would use it.
//!
//! 1. maturin (from PyPI, in `<target>/xtask/venv-wheel`) builds the wheel
//!    of `crates/magma-validator` with binary bindings
//!    (`crates/magma-validator/pyproject.toml`) into `<target>/xtask/wheels`.
//! 2. A fresh Python 3.12 venv installs it offline (`--no-index`).
//! 3. `magma-validate probe` from that venv's `bin/` passes against a
//!    `magma-server` on loopback (exit 0), writing a JUnit report.
//! 4. The README's pytest example (`harness/python/test_probe_agent.py`) passes
//!    in that venv, with pytest from PyPI (exact pins).
//!
//! The release profile, stripped, by default: the wheel users install and the
//! one that is published, written to `<target>/xtask/wheels/`; `--debug` for a
//! quicker local build.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use crate::process::{Guard, free_port, wait_for_port};
use crate::python;

/// Options of `cargo xtask wheel`.
#[derive(Debug, Default, clap::Args)]
pub struct Options {
    /// Build the debug profile instead (unstripped and much larger; not for users).
    #[arg(long)]
    debug: bool,
    /// The default (kept so that older instructions still work).
    #[arg(long, hide = true, conflicts_with = "debug")]
    release: bool,
}

fn bin_dir(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts")
    } else {
        venv.join("bin")
    }
}

pub fn run(options: &Options) -> Result<()> {
    let root = crate::project_root()?;
    let scratch = crate::xtask_dir()?;
    let maturin_python = python::ensure_venv(
        "wheel",
        &root.join("harness/python/requirements-wheel.txt"),
        &[],
    )?;

    // 1. Build.
    let wheels = scratch.join("wheels");
    if wheels.exists() {
        std::fs::remove_dir_all(&wheels)
            .with_context(|| format!("removing {}", wheels.display()))?;
    }
    let mut build = python::command(&maturin_python);
    build
        .current_dir(&root)
        .args(["-m", "maturin", "build", "--manifest-path"])
        .arg(root.join("crates/magma-validator/Cargo.toml"))
        .arg("--out")
        .arg(&wheels);
    if options.debug && !options.release {
        build.args(["--profile", "dev"]);
    } else {
        // What users install: optimized, without symbols (the debug build is ~67 MB).
        build.args(["--release", "--strip"]);
    }
    eprintln!("xtask wheel: building the magma-validate wheel with maturin");
    crate::process::run_inherited("maturin build", &mut build)?;
    let wheel = std::fs::read_dir(&wheels)
        .with_context(|| format!("reading {}", wheels.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .with_context(|| format!("maturin wrote no wheel into {}", wheels.display()))?;
    eprintln!("xtask wheel: built {}", wheel.display());

    // 2. A fresh Python 3.12 venv, the wheel installed offline.
    let venv = scratch.join("venv-wheel-smoke");
    let venv_python = python::fresh_venv(&venv)?;
    let mut install = python::command(&venv_python);
    install
        .args(["-m", "pip", "install", "--no-index", "--no-deps", "--quiet"])
        .arg(&wheel)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
    python::run(&mut install)?;
    let validate = bin_dir(&venv).join(format!("magma-validate{}", std::env::consts::EXE_SUFFIX));
    ensure!(
        validate.is_file(),
        "the wheel did not install {}",
        validate.display()
    );
    let version = python::run(Command::new(&validate).arg("--version"))?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    ensure!(
        version == format!("magma-validate {}", env!("CARGO_PKG_VERSION")),
        "unexpected version line {version:?}"
    );

    // 3. The installed binary probes magma-server.
    let server_bin = crate::process::build_magma_server(&root, false, false)?;
    let port = free_port()?;
    let mut cmd = Command::new(&server_bin);
    cmd.args(["--listen", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn");
    let mut server = Guard::spawn("magma-server", &mut cmd)?;
    wait_for_port(&mut server, port, Duration::from_secs(30))?;
    let report = scratch.join("wheel-probe.xml");
    let status = Command::new(&validate)
        .args(["probe", &format!("http://127.0.0.1:{port}")])
        .args(["--format", "junit", "--output"])
        .arg(&report)
        .status()
        .with_context(|| format!("running {}", validate.display()))?;
    server.ensure_running()?;
    ensure!(
        status.code() == Some(0),
        "magma-validate probe from the wheel exited with {status}"
    );
    ensure!(
        std::fs::read_to_string(&report)?.contains("<testsuites"),
        "{} is not a JUnit report",
        report.display()
    );
    // 4. The README's pytest example, in the same venv.
    let mut pip = python::command(&venv_python);
    pip.args(["-m", "pip", "install", "--quiet", "--requirement"])
        .arg(root.join("harness/python/requirements-wheel-smoke.txt"))
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
    python::run(&mut pip)?;
    let mut pytest = python::command(&venv_python);
    pytest
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root.join("harness/python/test_probe_agent.py"))
        .env("AGENT_URL", format!("http://127.0.0.1:{port}"));
    crate::process::run_inherited("pytest test_probe_agent.py", &mut pytest)?;
    server.ensure_running()?;

    println!(
        "wheel: 2 passed, 0 failed ({} installed into a fresh venv; probe of magma-server exit 0; the README's pytest example passed)",
        wheel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    Ok(())
}
