//! `cargo xtask gen-export`: GEN's dataset export (magma-gen 2.0.0's
//! `launch_export`) through the package `python/magma-rs-export` and the
//! demo agent's exporter (`magma-server export`).
//!
//! Builds the export venv (magma-core 2.0.1 and magma-gen 2.0.0 with
//! `--no-deps` beside pinned pydantic and packaging,
//! `harness/python/requirements-export.txt`), installs the package with a
//! plain `pip install` of (a fresh copy of) `python/magma-rs-export` as a
//! user would, builds
//! `magma-server` and `llm-agent` and runs `harness/python/gen_export.py` in a scratch
//! directory under `target/xtask`, removed afterwards unless a check failed.

use std::fs;

use anyhow::{Context, Result};

use crate::python;

const REQUIREMENTS: &str = "harness/python/requirements-export.txt";
const PACKAGE: &str = "python/magma-rs-export";
const SCRIPT: &str = "harness/python/gen_export.py";

pub fn run() -> Result<()> {
    let root = crate::project_root()?;
    let python = python::ensure_venv(
        "export",
        &root.join(REQUIREMENTS),
        &["magma-core==2.0.1", "magma-gen==2.0.0"],
    )?;
    let work = crate::xtask_dir()?.join(format!("gen-export.{}", std::process::id()));
    if work.exists() {
        fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    // A copy of the package's committed files, so that build folders a
    // previous `pip install` left in the tree are never installed instead.
    let package = work.join("magma-rs-export");
    for file in [
        "pyproject.toml",
        "README.md",
        "src/magma_rs_export/__init__.py",
    ] {
        let to = package.join(file);
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::copy(root.join(PACKAGE).join(file), &to)
            .with_context(|| format!("copying {PACKAGE}/{file}"))?;
    }
    eprintln!("xtask gen-export: pip install {PACKAGE}");
    let mut install = python::command(&python);
    install
        .args(["-m", "pip", "install", "--quiet", "--force-reinstall"])
        .arg(&package)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_INPUT", "1");
    python::run(&mut install)?;
    let server = crate::process::build_magma_server(&root, false, false)?;
    crate::process::run_inherited(
        "building llm-agent",
        crate::process::cargo().current_dir(&root).args([
            "build",
            "--quiet",
            "-p",
            "magma-llm-agent",
            "--bin",
            "llm-agent",
        ]),
    )?;
    let llm_agent = crate::process::target_dir(&root)
        .join("debug")
        .join(format!("llm-agent{}", std::env::consts::EXE_SUFFIX));
    let mut cmd = python::command(&python);
    cmd.current_dir(&root)
        .arg(root.join(SCRIPT))
        .arg("--binary")
        .arg(&server)
        .arg("--work")
        .arg(&work)
        .arg("--llm-binary")
        .arg(&llm_agent);
    crate::process::run_inherited("GEN's launch_export through magma-rs-export", &mut cmd)
        .with_context(|| {
            format!(
                "the export checks failed; their files are in {}",
                work.display()
            )
        })?;
    if let Err(err) = fs::remove_dir_all(&work) {
        eprintln!(
            "xtask gen-export: could not remove {}: {err}",
            work.display()
        );
    }
    Ok(())
}
