//! `cargo xtask deploy-check`: two `magma-server` replicas behind a real nginx on loopback.
//!
//! 1. Installs nginx from Debian's packages if `nginx` is missing (`apt-get update`, then
//!    `apt-get install -y --no-install-recommends nginx`; printed before it runs).
//! 2. Builds `magma-server` (feature `tls`, for its certificate generator), makes a
//!    development CA and a certificate for `localhost`/`127.0.0.1` with
//!    `magma-server --tls-self-signed DIR`, and starts two plain-HTTP replicas on loopback.
//! 3. Writes `<target>/xtask/deploy/nginx.conf`: nginx terminates TLS on 127.0.0.1, serves the
//!    agent under `/agents/demo/` (stripping the prefix) and balances the two replicas
//!    (round robin, failover on connection errors).
//! 4. Runs `harness/python/bench_client.py https://localhost:PORT/agents/demo --cacert ca.pem`
//!    twice with both replicas (the nginx access log must show both serving), then starts a
//!    third run, kills one replica while it runs, and requires that run and two more to pass
//!    on the surviving replica.
//! 5. Stops nginx and the replicas (also on failure) and leaves the files for inspection.
//!
//! The configuration written is the one `docs/deploy.md` shows.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::process::{Guard, free_port, run_inherited, wait_for_port};
use crate::python;

/// The URL path prefix the agent is served under.
pub const PREFIX: &str = "/agents/demo";

pub fn run() -> Result<()> {
    let root = crate::project_root()?;
    let nginx = ensure_nginx()?;
    let python = python::ensure_venv(
        "interop",
        &root.join("harness/python/requirements-interop.txt"),
        &["magma-core==2.0.1"],
    )?;
    let server_bin = crate::process::build_magma_server(&root, false, true)?;
    let dir = crate::xtask_dir()?.join("deploy");
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    fs::create_dir_all(dir.join("tmp"))?;

    // The certificate nginx presents: magma-server's development generator.
    let tls_dir = dir.join("tls");
    {
        let port = free_port()?;
        let mut gen_server = Guard::spawn(
            "magma-server --tls-self-signed",
            Command::new(&server_bin)
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .arg("--tls-self-signed")
                .arg(&tls_dir)
                .env("RUST_LOG", "warn"),
        )?;
        wait_for_port(&mut gen_server, port, Duration::from_secs(30))?;
    }
    eprintln!(
        "xtask deploy-check: certificate for localhost from magma-server --tls-self-signed {}",
        tls_dir.display()
    );

    let ports = [free_port()?, free_port()?];
    let mut replicas = Vec::new();
    for port in ports {
        let mut guard = Guard::spawn(
            "magma-server replica",
            Command::new(&server_bin)
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .env("RUST_LOG", "warn"),
        )?;
        wait_for_port(&mut guard, port, Duration::from_secs(30))?;
        replicas.push(Some(guard));
    }
    eprintln!(
        "xtask deploy-check: replicas on 127.0.0.1:{} and 127.0.0.1:{}",
        ports[0], ports[1]
    );

    let https_port = free_port()?;
    let conf = dir.join("nginx.conf");
    fs::write(&conf, nginx_conf(&dir, &tls_dir, https_port, ports))?;
    run_inherited(
        "nginx -t",
        nginx_command(&nginx, &conf, &dir).args(["-t", "-q"]),
    )?;
    let mut proxy = Nginx {
        guard: Guard::spawn("nginx", &mut nginx_command(&nginx, &conf, &dir))?,
        stop: nginx_command(&nginx, &conf, &dir),
    };
    wait_for_port(&mut proxy.guard, https_port, Duration::from_secs(30))?;
    let url = format!("https://localhost:{https_port}{PREFIX}");
    eprintln!(
        "xtask deploy-check: nginx on {url} (config {})",
        conf.display()
    );

    let client = |round: usize| -> Result<Child> {
        eprintln!("xtask deploy-check: bench_client run {round} against {url}");
        python::command(&python)
            .arg(root.join("harness/python/bench_client.py"))
            .arg(&url)
            .arg("--cacert")
            .arg(tls_dir.join("ca.pem"))
            .args(["--timeout", "30"])
            .stdin(Stdio::null())
            .spawn()
            .context("starting bench_client.py")
    };
    let access_log = dir.join("access.log");

    // Two runs with both replicas: both must serve.
    for round in 1..=2 {
        wait_success(&mut client(round)?, round)?;
    }
    let served = upstreams_seen(&fs::read_to_string(&access_log)?);
    for port in ports {
        if !served.iter().any(|u| u.ends_with(&format!(":{port}"))) {
            bail!("nginx never used the replica on port {port}: upstreams seen {served:?}");
        }
    }
    let lines_before_kill = fs::read_to_string(&access_log)?.lines().count();

    // Third run: kill replica 0 while it is running.
    let mut running = client(3)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while fs::read_to_string(&access_log)?.lines().count() < lines_before_kill + 3 {
        if Instant::now() > deadline {
            bail!("bench_client run 3 made no request through nginx");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    replicas[0] = None; // kill and reap
    eprintln!(
        "xtask deploy-check: killed the replica on port {} during run 3",
        ports[0]
    );
    wait_success(&mut running, 3)?;
    for round in 4..=5 {
        wait_success(&mut client(round)?, round)?;
    }
    let log = fs::read_to_string(&access_log)?;
    let after: Vec<&str> = log.lines().skip(lines_before_kill).collect();
    let failed: Vec<&&str> = after.iter().filter(|l| l.starts_with("status=5")).collect();
    if !failed.is_empty() {
        bail!("nginx answered 5xx after the kill: {failed:#?}");
    }
    let failovers = after.iter().filter(|l| upstreams_seen(l).len() > 1).count();
    let last: Vec<&str> = after.iter().rev().take(10).copied().collect();
    let survivor = format!("127.0.0.1:{}", ports[1]);
    if last
        .iter()
        .any(|l| upstreams_seen(l) != [survivor.as_str()])
    {
        bail!("requests after the kill did not all go to the survivor: {last:#?}");
    }
    if let Some(replica) = replicas[1].as_mut() {
        replica.ensure_running()?;
    }
    proxy.guard.ensure_running()?;
    drop(proxy);
    drop(replicas);
    println!(
        "deploy-check: nginx {} (TLS, prefix {PREFIX}, 2 replicas): 5 bench_client runs passed, \
         {} requests through nginx, replica on port {} killed during run 3, runs 3-5 passed on \
         the other ({failovers} request(s) retried on it by nginx)",
        nginx_version(&nginx),
        log.lines().count(),
        ports[0]
    );
    Ok(())
}

/// A running nginx master. Dropped, it is asked to stop with `nginx -s stop`, so that its
/// worker processes go too (a killed master leaves them behind), then reaped by the guard.
struct Nginx {
    guard: Guard,
    stop: Command,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self
            .stop
            .arg("-s")
            .arg("stop")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.guard.ensure_running().is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn nginx_command(nginx: &Path, conf: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(nginx);
    cmd.arg("-c").arg(conf).arg("-p").arg(dir);
    cmd
}

/// The nginx configuration (also shown in `docs/deploy.md`).
fn nginx_conf(dir: &Path, tls_dir: &Path, https_port: u16, replicas: [u16; 2]) -> String {
    let d = dir.display();
    let t = tls_dir.display();
    let [a, b] = replicas;
    // `user root` only because this loopback check runs as root with its files under the
    // target directory; a real deployment keeps the package's unprivileged user.
    format!(
        r#"# Written by `cargo xtask deploy-check`; see docs/deploy.md.
user root;
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log notice;

events {{
    worker_connections 512;
}}

http {{
    client_body_temp_path {d}/tmp/client_body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    log_format upstreams 'status=$status upstream=$upstream_addr '
                         'upstream_status=$upstream_status "$request" $request_time';
    access_log {d}/access.log upstreams;

    upstream magma_demo {{
        server 127.0.0.1:{a} max_fails=1 fail_timeout=30s;
        server 127.0.0.1:{b} max_fails=1 fail_timeout=30s;
        keepalive 16;
    }}

    server {{
        listen 127.0.0.1:{https_port} ssl http2;
        server_name localhost;
        ssl_certificate {t}/cert.pem;
        ssl_certificate_key {t}/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;

        location {PREFIX}/ {{
            proxy_pass http://magma_demo/;       # the trailing / strips the prefix
            proxy_http_version 1.1;
            proxy_set_header Connection "";      # keep-alive to the replicas
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_connect_timeout 2s;
            proxy_read_timeout 400s;             # more than the clients' 360 s
            proxy_send_timeout 60s;
            client_max_body_size 16m;            # as --max-body-bytes
            # Agent state travels in the request (memory), so re-sending a POST
            # that never reached a replica, or whose replica died, is safe.
            proxy_next_upstream error timeout non_idempotent;
            proxy_next_upstream_tries 2;
        }}
    }}
}}
"#
    )
}

/// Waits (at most 120 s) for a bench_client run and fails unless it passed.
fn wait_success(child: &mut Child, round: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() {
                return Ok(());
            }
            bail!("bench_client run {round} through nginx failed ({status}; output above)");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("bench_client run {round} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `upstream=` values of an access log written with the `upstreams` format.
fn upstreams_seen(log: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for line in log.lines() {
        let Some(rest) = line.split(" upstream=").nth(1) else {
            continue;
        };
        let addrs = rest.split(" upstream_status=").next().unwrap_or("");
        for addr in addrs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            if !seen.iter().any(|s| s == addr) {
                seen.push(addr.to_owned());
            }
        }
    }
    seen
}

/// The `nginx` binary, installed from Debian's packages when missing.
fn ensure_nginx() -> Result<PathBuf> {
    if let Some(found) = which("nginx") {
        return Ok(found);
    }
    eprintln!(
        "xtask deploy-check: nginx is not installed; running `apt-get update` and `apt-get \
         install -y --no-install-recommends nginx` (Debian's package; needs root)"
    );
    run_inherited(
        "apt-get update",
        Command::new("apt-get").args(["update", "-q"]),
    )?;
    run_inherited(
        "apt-get install nginx",
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends", "nginx"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    which("nginx").context("nginx is still not found after apt-get install")
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn nginx_version(nginx: &Path) -> String {
    Command::new(nginx)
        .arg("-v")
        .stdin(Stdio::null())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_owned())
        .and_then(|v| v.rsplit('/').next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_are_read_from_the_access_log() {
        let log = "status=200 upstream=127.0.0.1:1 upstream_status=200 \"GET /x HTTP/1.1\" 0.001\n\
                   status=200 upstream=127.0.0.1:1, 127.0.0.1:2 upstream_status=502, 200 \"POST /y HTTP/1.1\" 0.002\n";
        assert_eq!(upstreams_seen(log), ["127.0.0.1:1", "127.0.0.1:2"]);
    }

    #[test]
    fn the_config_strips_the_prefix_and_lists_both_replicas() {
        let conf = nginx_conf(Path::new("/d"), Path::new("/t"), 8443, [1001, 1002]);
        assert!(conf.contains("location /agents/demo/ {"));
        assert!(conf.contains("proxy_pass http://magma_demo/;"));
        assert!(conf.contains("server 127.0.0.1:1001") && conf.contains("server 127.0.0.1:1002"));
        assert!(conf.contains("listen 127.0.0.1:8443 ssl"));
    }
}
