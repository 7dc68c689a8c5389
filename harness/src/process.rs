//! Child processes shared by the subcommands that start servers or drive cargo: a guard that
//! stops a child when dropped, loopback port helpers, and `cargo`/target-directory lookup.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A child process that is killed when dropped.
#[derive(Debug)]
pub struct Guard {
    name: &'static str,
    child: Child,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Guard {
    /// Starts `cmd` (standard input closed) under the given display name.
    pub fn spawn(name: &'static str, cmd: &mut Command) -> Result<Guard> {
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {name}: {cmd:?}"))?;
        Ok(Guard { name, child })
    }

    /// Fails if the child has already exited.
    pub fn ensure_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited early with {status}", self.name);
        }
        Ok(())
    }
}

/// A port on 127.0.0.1 that nothing listened on a moment ago.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// Waits until something accepts connections on `127.0.0.1:port`, failing early if the
/// guarded child exits.
pub fn wait_for_port(guard: &mut Guard, port: u16, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    loop {
        guard.ensure_running()?;
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{} did not listen on port {port} within {within:?}",
                guard.name
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `cargo` that runs xtask (`$CARGO`), else `cargo` from `PATH`, without the
/// variables `cargo run` set for xtask (see [`without_cargo_run_env`]).
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    without_cargo_run_env(&mut cmd);
    cmd
}

/// Variables that `cargo run` sets for the program it runs, here xtask, on top of
/// `CARGO_PKG_*`.
const CARGO_RUN_VARS: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_RUSTC_CURRENT_DIR",
];

/// Removes from `cmd`'s environment what `cargo run` set for xtask: the package's
/// `CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, `CARGO_PKG_VERSION`, ... A cargo started from
/// xtask (directly or through maturin) would otherwise see them, and build scripts that
/// declare `rerun-if-env-changed` for them (ring's does, for `CARGO_MANIFEST_DIR` and
/// `CARGO_PKG_*`) would count as changed: ring and everything above it (rustls,
/// tokio-rustls, the client, the validator, the harness and xtask itself) were rebuilt
/// at every switch between `cargo xtask ...` and a cargo started by it, about 40 s each
/// time in CI.
pub fn without_cargo_run_env(cmd: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("CARGO_PKG_") || CARGO_RUN_VARS.contains(&name) {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// Cargo's target directory for the workspace at `root` (honours `CARGO_TARGET_DIR`).
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .map_or_else(
            || root.join("target"),
            |p| if p.is_absolute() { p } else { root.join(p) },
        )
}

/// Builds the `magma-server` binary (debug or `release`, with or without the
/// `tls` feature) and returns its path.
pub fn build_magma_server(root: &Path, release: bool, tls: bool) -> Result<PathBuf> {
    build_magma_server_with(root, release, if tls { &["tls"] } else { &[] })
}

/// [`build_magma_server`] with these features on top of the default ones.
pub fn build_magma_server_with(root: &Path, release: bool, features: &[&str]) -> Result<PathBuf> {
    let mut cmd = cargo();
    cmd.current_dir(root).args([
        "build",
        "--quiet",
        "-p",
        "magma-rs-server",
        "--bin",
        "magma-server",
    ]);
    if release {
        cmd.arg("--release");
    }
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    let what = format!(
        "building magma-server ({}{})",
        if release { "release" } else { "debug" },
        match features {
            [] => String::new(),
            [one] => format!(", feature {one}"),
            many => format!(", features {}", many.join(", ")),
        }
    );
    eprintln!("xtask: {what}");
    run_inherited(&what, &mut cmd)?;
    Ok(target_dir(root)
        .join(if release { "release" } else { "debug" })
        .join(format!("magma-server{}", std::env::consts::EXE_SUFFIX)))
}

/// Runs `cmd` with inherited output (standard input closed) and fails on a non-zero exit.
pub fn run_inherited(what: &str, cmd: &mut Command) -> Result<()> {
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{what}: failed with {status}");
    }
    Ok(())
}

/// `12.3s` or `4m 05s`.
pub fn fmt_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let whole = d.as_secs();
        format!("{}m {:02}s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(fmt_duration(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(fmt_duration(Duration::from_secs(245)), "4m 05s");
    }

    /// `cargo test` sets for this test binary what `cargo run` sets for xtask; a child
    /// started through `without_cargo_run_env` sees none of it, and the rest as it was.
    #[cfg(unix)]
    #[test]
    fn children_do_not_inherit_what_cargo_run_set() {
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
        let mut cmd = Command::new("env");
        let out = without_cargo_run_env(&mut cmd).output().unwrap();
        assert!(out.status.success());
        let env = String::from_utf8(out.stdout).unwrap();
        let names: Vec<&str> = env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(n, _)| n)
            .collect();
        for gone in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION",
            "CARGO_CRATE_NAME",
        ] {
            assert!(!names.contains(&gone), "{gone} reached the child");
        }
        assert!(names.contains(&"PATH"), "PATH was removed");
        // The cargo that xtask starts is configured the same way.
        assert!(
            cargo()
                .get_envs()
                .any(|(n, v)| n == "CARGO_PKG_NAME" && v.is_none())
        );
    }
}
