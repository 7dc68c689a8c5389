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

/// The `cargo` that runs xtask (`$CARGO`), else `cargo` from `PATH`.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
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
    if tls {
        cmd.args(["--features", "tls"]);
    }
    let what = format!(
        "building magma-server ({}{})",
        if release { "release" } else { "debug" },
        if tls { ", feature tls" } else { "" }
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
}
