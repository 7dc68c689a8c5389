//! Child processes: a guard that stops one when dropped, and readers of
//! its `/proc/<pid>` entries (Linux).

use std::process::{Child, Command, Stdio};

/// A child process killed (and reaped) when dropped, so a failing test
/// leaves no server behind.
#[derive(Debug)]
pub struct ChildGuard(Child);

impl ChildGuard {
    /// Starts `cmd` with standard input closed; panics with the command if it
    /// cannot start.
    pub fn spawn(cmd: &mut Command) -> ChildGuard {
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
        ChildGuard(child)
    }

    /// Guards a child started elsewhere.
    pub fn new(child: Child) -> ChildGuard {
        ChildGuard(child)
    }

    /// The child.
    pub fn child(&mut self) -> &mut Child {
        &mut self.0
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`, ...), in KiB;
/// `None` if the process or the field is gone.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Resident memory of `pid` now, in KiB (`VmRSS`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// Peak resident memory of `pid` since it started, in KiB (`VmHWM`).
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmHWM:")
}

/// Open sockets of `pid` (listeners included); 0 if unreadable.
pub fn sockets(pid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|t| t.to_string_lossy().starts_with("socket:"))
        .count()
}
