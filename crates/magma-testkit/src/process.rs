//! Child processes: a guard that stops one when dropped, a child whose
//! standard error is collected line by line, and readers of its
//! `/proc/<pid>` entries (Linux).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// A server binary started for a test: standard error is read line by line
/// on a thread of its own into a log the test can search (what the servers
/// log, "listening on ..." first), standard output is dropped, and the child
/// is killed when this is dropped.
#[derive(Debug)]
pub struct LoggedChild {
    child: ChildGuard,
    name: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl LoggedChild {
    /// Starts `cmd` (called `name` in messages) with standard input closed.
    pub fn spawn(name: &str, cmd: &mut Command) -> LoggedChild {
        let mut child = ChildGuard::spawn(cmd.stdout(Stdio::null()).stderr(Stdio::piped()));
        let stderr = child.child().stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        LoggedChild {
            child,
            name: name.to_owned(),
            log,
        }
    }

    /// Everything logged so far, one line each.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The first line logged so far that contains `needle`.
    pub fn find(&self, needle: &str) -> Option<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .find(|l| l.contains(needle))
            .cloned()
    }

    /// How the child ended, if it has; `None` while it runs.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.child().try_wait().ok().flatten()
    }

    /// Panics, with the log, if the child has ended before logging `needle`.
    pub fn assert_running(&mut self, needle: &str) {
        if let Some(status) = self.exited() {
            panic!(
                "{} exited ({status}) before logging {needle:?}:\n{}",
                self.name,
                self.log()
            );
        }
    }

    /// Waits (blocking this thread) for a line containing `needle`, at most
    /// `within`; panics with the log if the child ends or the time runs out.
    pub fn wait_for_log(&mut self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some(line) = self.find(needle) {
                return line;
            }
            self.assert_running(needle);
            assert!(
                Instant::now() < deadline,
                "{} logged no {needle:?} within {within:?}:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The child's guard.
    pub fn guard(&mut self) -> &mut ChildGuard {
        &mut self.child
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

/// The URL in a server's "listening on URL ..." line: `http://127.0.0.1:8080`
/// (up to a space or a quote, so that structured log lines work too).
pub fn listening_url(line: &str) -> &str {
    let (_, rest) = line
        .split_once("listening on ")
        .unwrap_or_else(|| panic!("no \"listening on \" in {line:?}"));
    rest.split(|c: char| c.is_whitespace() || c == '"')
        .next()
        .unwrap_or_default()
}

/// The socket address of that URL.
pub fn listening_addr(line: &str) -> std::net::SocketAddr {
    let url = listening_url(line);
    let host_port = url.split_once("://").map_or(url, |(_, hp)| hp);
    host_port
        .parse()
        .unwrap_or_else(|_| panic!("no address in {line:?}"))
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
