//! Python virtual environments for xtask subcommands that run the reference implementation.
//!
//! [`ensure_venv`] creates (or reuses) `<target>/xtask/venv-<name>` from a Python 3.12
//! interpreter, installs an exactly pinned requirements file plus packages that must be
//! installed without their dependencies, and records a stamp so that later runs skip pip
//! when nothing changed. The interpreter comes from `MAGMA_PYTHON`, else `python3.12`; it
//! runs with `PYENV_VERSION=3.12.1` unless `PYENV_VERSION` is already set (pyenv shims).

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, bail};

/// Environment variable naming the Python interpreter to build venvs from.
pub const PYTHON_ENV: &str = "MAGMA_PYTHON";
const DEFAULT_PYTHON: &str = "python3.12";
const DEFAULT_PYENV_VERSION: &str = "3.12.1";
const STAMP_FILE: &str = "xtask-stamp";

/// Makes sure the venv `<target>/xtask/venv-<name>` exists with exactly `requirements_file`
/// installed (and each of `no_deps_pkgs`, e.g. `"magma-core==2.0.1"`, with `--no-deps`), and
/// returns the path of its Python interpreter.
pub fn ensure_venv(name: &str, requirements_file: &Path, no_deps_pkgs: &[&str]) -> Result<PathBuf> {
    let venv = crate::xtask_dir()?.join(format!("venv-{name}"));
    let requirements = fs::read_to_string(requirements_file)
        .with_context(|| format!("reading requirements file {}", requirements_file.display()))?;
    let base = base_interpreter()?;
    let stamp = format!(
        "{:016x}\n",
        fnv1a(&[
            requirements.as_bytes(),
            no_deps_pkgs.join("\n").as_bytes(),
            base.version.as_bytes()
        ])
    );

    let python = venv_python(&venv);
    let stamp_path = venv.join(STAMP_FILE);
    if python.is_file() && interpreter_works(&python) {
        if fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
            return Ok(python);
        }
    } else if venv.exists() {
        eprintln!("xtask: removing broken venv {}", venv.display());
        fs::remove_dir_all(&venv).with_context(|| format!("removing {}", venv.display()))?;
    }

    if !python.is_file() {
        eprintln!(
            "xtask: creating venv {} with Python {}",
            venv.display(),
            base.version
        );
        if let Some(parent) = venv.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let mut cmd = base.command();
        cmd.arg("-m").arg("venv").arg(&venv);
        run(&mut cmd)?;
    }
    // A half-finished install must not look finished.
    if stamp_path.exists() {
        fs::remove_file(&stamp_path)
            .with_context(|| format!("removing {}", stamp_path.display()))?;
    }

    eprintln!(
        "xtask: installing {} into {}",
        requirements_file.display(),
        venv.display()
    );
    let mut cmd = pip(&python);
    cmd.arg("install")
        .arg("--requirement")
        .arg(requirements_file);
    run(&mut cmd)?;
    if !no_deps_pkgs.is_empty() {
        eprintln!("xtask: installing {} (--no-deps)", no_deps_pkgs.join(", "));
        let mut cmd = pip(&python);
        cmd.arg("install").arg("--no-deps").args(no_deps_pkgs);
        run(&mut cmd)?;
    }
    fs::write(&stamp_path, stamp).with_context(|| format!("writing {}", stamp_path.display()))?;
    Ok(python)
}

/// Creates an empty venv at `venv` from the Python 3.12 interpreter (removing
/// whatever was there) and returns its Python.
pub fn fresh_venv(venv: &Path) -> Result<PathBuf> {
    if venv.exists() {
        fs::remove_dir_all(venv).with_context(|| format!("removing {}", venv.display()))?;
    }
    let base = base_interpreter()?;
    eprintln!(
        "xtask: creating a fresh venv {} with Python {}",
        venv.display(),
        base.version
    );
    let mut cmd = base.command();
    cmd.arg("-m").arg("venv").arg(venv);
    run(&mut cmd)?;
    Ok(venv_python(venv))
}

/// A `Command` for a venv's Python with a reproducible, isolated environment.
pub fn command(python: &Path) -> Command {
    let mut cmd = Command::new(python);
    // maturin runs cargo: it must not see what `cargo run` set for xtask.
    crate::process::without_cargo_run_env(&mut cmd);
    cmd.env("PYTHONHASHSEED", "0")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONNOUSERSITE", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONHOME")
        .env_remove("PYTHONSTARTUP");
    cmd
}

/// Runs `cmd`; on a non-zero exit the error carries the command line and its stderr.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let line = command_line(cmd);
    let output = cmd
        .output()
        .with_context(|| format!("could not start `{line}`"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut detail = tail(stderr.trim_end(), 60);
        if detail.is_empty() {
            detail = tail(stdout.trim_end(), 60);
        }
        bail!("`{line}` failed ({})\n{detail}", output.status);
    }
    Ok(output)
}

struct BaseInterpreter {
    program: String,
    pyenv_version: Option<String>,
    version: String,
}

impl BaseInterpreter {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        if let Some(v) = &self.pyenv_version {
            cmd.env("PYENV_VERSION", v);
        }
        cmd.env_remove("PYTHONPATH").env_remove("PYTHONHOME");
        cmd
    }
}

fn base_interpreter() -> Result<BaseInterpreter> {
    let from_env = std::env::var(PYTHON_ENV).ok().filter(|s| !s.is_empty());
    let program = from_env
        .clone()
        .unwrap_or_else(|| DEFAULT_PYTHON.to_owned());
    let pyenv_version = match std::env::var_os("PYENV_VERSION") {
        Some(_) => None, // already set: inherited as is
        None => Some(DEFAULT_PYENV_VERSION.to_owned()),
    };
    let mut base = BaseInterpreter {
        program,
        pyenv_version,
        version: String::new(),
    };
    let origin = if from_env.is_some() {
        format!("{PYTHON_ENV}={}", base.program)
    } else {
        format!("`{DEFAULT_PYTHON}` ({PYTHON_ENV} is not set)")
    };
    let mut cmd = base.command();
    cmd.arg("-c")
        .arg("import sys; print('%d.%d.%d' % sys.version_info[:3])");
    let output = run(&mut cmd).with_context(|| {
        format!(
            "no usable Python 3.12 interpreter: tried {origin}; install Python 3.12 or set \
             {PYTHON_ENV} to the path of a Python 3.12 interpreter"
        )
    })?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) < (3, 12) {
        bail!(
            "{origin} is Python {version}, but Python 3.12 is required; set {PYTHON_ENV} to a \
             Python 3.12 interpreter"
        );
    }
    if (major, minor) > (3, 12) {
        bail!(
            "{origin} is Python {version}, but magma-core 2.0.1 declares Requires-Python <3.13; \
             set {PYTHON_ENV} to a Python 3.12 interpreter"
        );
    }
    base.version = version;
    Ok(base)
}

fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}

fn interpreter_works(python: &Path) -> bool {
    command(python)
        .arg("-c")
        .arg("pass")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn pip(python: &Path) -> Command {
    let mut cmd = command(python);
    cmd.args(["-m", "pip"])
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_INPUT", "1");
    cmd
}

fn command_line(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(OsStr::to_string_lossy).map(|a| {
        if a.contains(' ') {
            format!("'{a}'")
        } else {
            a.into_owned()
        }
    }));
    parts.join(" ")
}

/// The last `max_lines` lines of `text`.
fn tail(text: &str, max_lines: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(max_lines);
    let mut out = String::new();
    if start > 0 {
        out.push_str(&format!("[... {start} earlier lines ...]\n"));
    }
    out.push_str(&lines[start..].join("\n"));
    out
}

/// 64-bit FNV-1a over the parts (with a separator), stable across Rust versions.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &byte in part.iter().chain(std::iter::once(&0xff)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_is_stable() {
        assert_eq!(fnv1a(&[]), 0xcbf2_9ce4_8422_2325);
        assert_ne!(fnv1a(&[b"a", b"b"]), fnv1a(&[b"ab"]));
    }

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail("a\nb\nc", 2), "[... 1 earlier lines ...]\nb\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
