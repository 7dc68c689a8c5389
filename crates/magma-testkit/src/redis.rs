//! A real `redis-server` on 127.0.0.1 for the shared coaching store's tests:
//! its own port, directory and log, stopped on drop; it can be stopped and
//! started again on the same port (an outage).
//!
//! The binary is `$MAGMA_REDIS_SERVER`, else `redis-server` on `PATH` (Debian's
//! package `redis-server`; `.ci/run` installs it). magma-server's `build.rs`
//! builds the tests that need it as ignored, with the reason, when it is
//! missing outside CI.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::TempDir;
use crate::process::ChildGuard;

/// Where `redis-server` is, if anywhere.
pub fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MAGMA_REDIS_SERVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
}

/// A running (or stopped) `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    bin: PathBuf,
    /// 127.0.0.1 port: plain, or TLS when started with [`RedisServer::tls`].
    pub port: u16,
    args: Vec<String>,
    dir: TempDir,
    child: Option<ChildGuard>,
    tls: bool,
}

impl RedisServer {
    /// A plain server without persistence.
    pub fn start() -> RedisServer {
        RedisServer::with_args(&[])
    }

    /// A plain server with these extra arguments (e.g. `--requirepass s`).
    pub fn with_args(extra: &[&str]) -> RedisServer {
        RedisServer::launch(extra, None)
    }

    /// A TLS-only server presenting `cert`/`key` (PEM files), clients not
    /// asked for certificates.
    pub fn tls(cert: &Path, key: &Path, ca: &Path, extra: &[&str]) -> RedisServer {
        RedisServer::launch(extra, Some((cert, key, ca)))
    }

    fn launch(extra: &[&str], tls: Option<(&Path, &Path, &Path)>) -> RedisServer {
        let bin = binary().unwrap_or_else(|| {
            panic!(
                "redis-server not found (PATH, or MAGMA_REDIS_SERVER): install Debian's package \
                 `redis-server` (apt-get install -y redis-server); .ci/run does"
            )
        });
        let dir = TempDir::new("redis");
        let port = free_port();
        let mut args: Vec<String> = vec![
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--daemonize".into(),
            "no".into(),
            "--dir".into(),
            dir.path().display().to_string(),
            "--logfile".into(),
            dir.path().join("redis.log").display().to_string(),
        ];
        match tls {
            None => args.extend(["--port".into(), port.to_string()]),
            Some((cert, key, ca)) => args.extend([
                "--port".into(),
                "0".into(),
                "--tls-port".into(),
                port.to_string(),
                "--tls-cert-file".into(),
                cert.display().to_string(),
                "--tls-key-file".into(),
                key.display().to_string(),
                "--tls-ca-cert-file".into(),
                ca.display().to_string(),
                "--tls-auth-clients".into(),
                "no".into(),
            ]),
        }
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let mut server = RedisServer {
            bin,
            port,
            args,
            dir,
            child: None,
            tls: tls.is_some(),
        };
        server.resume();
        server
    }

    /// `redis://127.0.0.1:PORT/0` (`rediss://localhost:PORT/0` for TLS).
    pub fn url(&self) -> String {
        match self.tls {
            false => format!("redis://127.0.0.1:{}/0", self.port),
            true => format!("rediss://localhost:{}/0", self.port),
        }
    }

    /// Kills the server (an outage: its data is gone unless persisted).
    pub fn stop(&mut self) {
        self.child = None;
        // The port is free once the process is reaped.
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(
                Instant::now() < deadline,
                "redis-server still listens after being killed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts it again on the same port, with the same arguments, and waits
    /// until it accepts commands.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "redis-server is already running");
        let log = self.dir.path().join("redis.log");
        let before =
            std::fs::read_to_string(&log).map_or(0, |l| l.matches("Ready to accept").count());
        let child = ChildGuard::spawn(
            Command::new(&self.bin)
                .args(&self.args)
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.matches("Ready to accept").count() > before {
                return;
            }
            if let Some(c) = self.child.as_mut() {
                assert!(
                    c.is_running(),
                    "redis-server exited at start ({:?}): {text}",
                    self.args
                );
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not get ready within 30 s: {text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One command on a plain server, answered in RESP (e.g. `DBSIZE`).
    pub fn command(&self, words: &[&str]) -> String {
        assert!(!self.tls, "command() speaks plain RESP");
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to redis");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut out = format!("*{}\r\n", words.len());
        for w in words {
            out.push_str(&format!("${}\r\n{w}\r\n", w.len()));
        }
        stream.write_all(out.as_bytes()).expect("write to redis");
        let mut buf = vec![0u8; 64 * 1024];
        let n = stream.read(&mut buf).expect("read from redis");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}
