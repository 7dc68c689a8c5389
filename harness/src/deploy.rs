//! `cargo xtask deploy-check`: two `magma-server` replicas behind a real nginx on loopback,
//! sharing their coaching sessions through a real Redis.
//!
//! 1. Installs nginx and redis-server from Debian's packages if either is missing
//!    (`apt-get update`, then `apt-get install -y --no-install-recommends PACKAGE`; printed
//!    before it runs).
//! 2. Builds `magma-server` (features `tls`, for its certificate generator, and `redis`), makes
//!    a development CA and a certificate for `localhost`/`127.0.0.1` with
//!    `magma-server --tls-self-signed DIR`, starts `redis-server` on loopback (append-only file,
//!    so that a restart keeps the sessions) and two plain-HTTP replicas on loopback with
//!    `--coaching-store redis://127.0.0.1:PORT/0`.
//! 3. Writes `<target>/xtask/deploy/nginx.conf`: nginx terminates TLS on 127.0.0.1, serves the
//!    agent under `/agents/demo/` (the replicas serve under `--path-prefix /agents/demo`, so the
//!    path goes through encoded as sent) and balances the two replicas (round robin, failover
//!    on connection errors).
//! 4. Runs `harness/python/bench_client.py https://localhost:PORT/agents/demo --cacert ca.pem`
//!    twice with both replicas (the nginx access log must show both serving).
//! 5. GEN's own `RemoteCoaching` (`harness/python/gen_coaching_replicas.py`) drives three whole
//!    sessions through nginx: open, every advertised kind, concurrent requests, close; the access
//!    log must show both replicas serving coaching routes. Then, on the replicas directly, a
//!    `DELETE` answered by replica A must wait for a slow request in flight on replica B.
//! 6. Redis stopped during a GEN session: coaching answers 503 through nginx, `/health` and
//!    inference do not notice (a bench_client run passes meanwhile); Redis started again: the
//!    same session goes on, without restarting the replicas.
//! 7. One replica killed during a GEN session (while its concurrent requests run) and during
//!    the third bench_client run: both pass on the other, then two more bench_client runs and two
//!    more GEN sessions.
//! 8. Stops nginx, the replicas and Redis (also on failure) and leaves the files for inspection.
//!
//! The nginx configuration written is the one `docs/deploy.md` shows.

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
    let started = Instant::now();
    let root = crate::project_root()?;
    let nginx = ensure_package("nginx", "nginx")?;
    let redis_server = ensure_package("redis-server", "redis-server")?;
    // The venv of `cargo xtask interop` (same packages, so neither rebuilds it for the other).
    let python = python::ensure_venv(
        "interop",
        &root.join("harness/python/requirements-interop.txt"),
        &["magma-core==2.0.1", "magma-gen==2.0.0"],
    )?;
    let server_bin = crate::process::build_magma_server_with(&root, false, &["tls", "redis"])?;
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

    let mut redis = Redis::new(&redis_server, free_port()?, &dir.join("redis"))?;
    redis.start()?;
    let store = format!("redis://127.0.0.1:{}/0", redis.port);
    eprintln!(
        "xtask deploy-check: {} on 127.0.0.1:{} (append-only file in {})",
        redis_version(&redis_server),
        redis.port,
        redis.dir.display()
    );

    let ports = [free_port()?, free_port()?];
    let mut replicas = Vec::new();
    for port in ports {
        let mut guard = Guard::spawn(
            "magma-server replica",
            Command::new(&server_bin)
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .args(["--path-prefix", PREFIX])
                .args(["--coaching-store", &store])
                .env("RUST_LOG", "warn"),
        )?;
        wait_for_port(&mut guard, port, Duration::from_secs(30))?;
        replicas.push(Some(guard));
    }
    eprintln!(
        "xtask deploy-check: replicas on 127.0.0.1:{} and 127.0.0.1:{}, --coaching-store {store}",
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

    let ca = tls_dir.join("ca.pem");
    let client = |round: usize| -> Result<Child> {
        eprintln!("xtask deploy-check: bench_client run {round} against {url}");
        python::command(&python)
            .arg(root.join("harness/python/bench_client.py"))
            .arg(&url)
            .arg("--cacert")
            .arg(&ca)
            .args(["--timeout", "30"])
            .stdin(Stdio::null())
            .spawn()
            .context("starting bench_client.py")
    };
    let gen_coaching = |what: &str, args: &[&str]| -> Result<Child> {
        eprintln!("xtask deploy-check: GEN's RemoteCoaching: {what}");
        python::command(&python)
            .arg(root.join("harness/python/gen_coaching_replicas.py"))
            .args(args)
            .stdin(Stdio::null())
            .spawn()
            .context("starting gen_coaching_replicas.py")
    };
    let ca_arg = ca.display().to_string();
    let sessions = |runs: &str, pause: Option<(&str, &Path)>| -> Result<Child> {
        let mut args = vec![
            "sessions",
            url.as_str(),
            "--cacert",
            ca_arg.as_str(),
            "--runs",
            runs,
            "--concurrency",
            "8",
            "--delay-ms",
            "150",
        ];
        let signals;
        if let Some((pause, dir)) = pause {
            signals = dir.display().to_string();
            args.extend(["--pause", pause, "--signals", signals.as_str()]);
            return gen_coaching(&format!("{runs} session(s), pausing for {pause}"), &args);
        }
        gen_coaching(&format!("{runs} session(s) through nginx"), &args)
    };
    let access_log = dir.join("access.log");

    // Two bench runs with both replicas: both must serve.
    for round in 1..=2 {
        wait_success(&mut client(round)?, &format!("bench_client run {round}"))?;
    }
    let served = upstreams_seen(&fs::read_to_string(&access_log)?);
    for port in ports {
        if !served.iter().any(|u| u.ends_with(&format!(":{port}"))) {
            bail!("nginx never used the replica on port {port}: upstreams seen {served:?}");
        }
    }

    // GEN's whole sessions through nginx: both replicas serve coaching routes.
    wait_success(&mut sessions("3", None)?, "GEN sessions through nginx")?;
    let coaching_log = coaching_lines(&fs::read_to_string(&access_log)?);
    let coaching_served = upstreams_seen(&coaching_log);
    for port in ports {
        if !coaching_served
            .iter()
            .any(|u| u.ends_with(&format!(":{port}")))
        {
            bail!(
                "nginx never sent a coaching route to the replica on port {port}: upstreams \
                 seen {coaching_served:?}"
            );
        }
    }
    let coaching_requests = coaching_log.lines().count();
    if let Some(bad) = coaching_log
        .lines()
        .find(|l| !l.starts_with("status=2") && !l.starts_with("status=404"))
    {
        bail!("a coaching request through nginx failed: {bad}");
    }

    // DELETE on replica A waits for a slow request on replica B.
    let a = format!("http://127.0.0.1:{}{PREFIX}", ports[0]);
    let b = format!("http://127.0.0.1:{}{PREFIX}", ports[1]);
    wait_success(
        &mut gen_coaching(
            "DELETE on replica A while a slow request runs on replica B",
            &["delete-wait", &a, &b, "--delay-ms", "2000"],
        )?,
        "DELETE waiting across replicas",
    )?;

    // Redis stopped during a session, and started again.
    let signals = dir.join("outage");
    fs::create_dir_all(&signals)?;
    let mut outage = sessions("1", Some(("outage", &signals)))?;
    wait_file(
        &signals.join("ready"),
        &mut outage,
        "the outage session to get going",
    )?;
    redis.stop();
    eprintln!("xtask deploy-check: redis-server stopped during a GEN session");
    fs::write(signals.join("down"), "")?;
    wait_success(&mut client(3)?, "bench_client run 3 while Redis is down")?;
    wait_file(&signals.join("checked"), &mut outage, "the outage checks")?;
    redis.start()?;
    eprintln!("xtask deploy-check: redis-server started again (replicas not restarted)");
    fs::write(signals.join("up"), "")?;
    wait_success(&mut outage, "GEN session across the Redis outage")?;
    let log = fs::read_to_string(&access_log)?;
    let outage_503 = coaching_lines(&log)
        .lines()
        .filter(|l| l.starts_with("status=503"))
        .count();
    if outage_503 == 0 {
        bail!("no coaching request was answered 503 while Redis was down");
    }
    if let Some(bad) = log
        .lines()
        .filter(|l| !l.contains(COACHING))
        .find(|l| l.starts_with("status=5"))
    {
        bail!("an inference or health request failed while Redis was down: {bad}");
    }

    // One replica killed during a GEN session and a bench run.
    let lines_before_kill = fs::read_to_string(&access_log)?.lines().count();
    let signals = dir.join("kill");
    fs::create_dir_all(&signals)?;
    let mut running_gen = sessions("2", Some(("kill", &signals)))?;
    let mut running_bench = client(4)?;
    wait_file(
        &signals.join("ready"),
        &mut running_gen,
        "the kill session to get going",
    )?;
    let ready_lines = fs::read_to_string(&access_log)?.lines().count();
    let deadline = Instant::now() + Duration::from_secs(30);
    while coaching_lines(
        &fs::read_to_string(&access_log)?
            .lines()
            .skip(ready_lines)
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .lines()
    .count()
        < 2
    {
        if Instant::now() > deadline {
            bail!("the GEN session's concurrent requests made no request through nginx");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    replicas[0] = None; // kill and reap
    eprintln!(
        "xtask deploy-check: killed the replica on port {} during a GEN session's concurrent \
         requests and bench_client run 4",
        ports[0]
    );
    wait_success(&mut running_gen, "GEN sessions across the kill")?;
    wait_success(&mut running_bench, "bench_client run 4")?;
    for round in 5..=6 {
        wait_success(&mut client(round)?, &format!("bench_client run {round}"))?;
    }
    wait_success(&mut sessions("2", None)?, "GEN sessions on the survivor")?;
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
    redis.ensure_running()?;
    drop(proxy);
    drop(replicas);
    drop(redis);
    println!(
        "deploy-check: nginx {} (TLS, prefix {PREFIX}, 2 replicas, coaching in {}): 6 \
         bench_client runs and 8 GEN RemoteCoaching sessions passed, {} requests through nginx \
         ({coaching_requests} coaching requests of the first 3 sessions, served by both \
         replicas); a DELETE on one replica waited for a slow request on the other; Redis \
         stopped during a session: {outage_503} coaching answers 503, inference and /health \
         unaffected, the session went on once Redis was back; replica on port {} killed \
         during a session and bench_client run 4, the rest passed on the other \
         ({failovers} request(s) retried on it by nginx); {}",
        nginx_version(&nginx),
        redis_version(&redis_server),
        log.lines().count(),
        ports[0],
        crate::process::fmt_duration(started.elapsed())
    );
    Ok(())
}

/// Every coaching route's path starts with this.
const COACHING: &str = magma_protocol::routes::Endpoint::Coaching.path();

/// The lines of an access log for coaching routes.
fn coaching_lines(log: &str) -> String {
    log.lines()
        .filter(|l| l.contains(COACHING))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A `redis-server` on 127.0.0.1 with an append-only file in `dir`: stopped and started again
/// on the same port, it keeps its data. Killed when dropped.
struct Redis {
    bin: PathBuf,
    port: u16,
    dir: PathBuf,
    guard: Option<Guard>,
}

impl Redis {
    fn new(bin: &Path, port: u16, dir: &Path) -> Result<Redis> {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Redis {
            bin: bin.to_owned(),
            port,
            dir: dir.to_owned(),
            guard: None,
        })
    }

    fn log(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    /// Starts it and waits until it has loaded its data ("Ready to accept connections").
    fn start(&mut self) -> Result<()> {
        let ready = |log: &Path| {
            fs::read_to_string(log).map_or(0, |l| l.matches("Ready to accept connections").count())
        };
        let before = ready(&self.log());
        let mut guard = Guard::spawn(
            "redis-server",
            Command::new(&self.bin)
                .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
                .args([
                    "--save",
                    "",
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                ])
                .args(["--daemonize", "no", "--dir"])
                .arg(&self.dir)
                .arg("--logfile")
                .arg(self.log())
                .stdout(Stdio::null()),
        )?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while ready(&self.log()) == before {
            guard.ensure_running()?;
            if Instant::now() > deadline {
                bail!(
                    "redis-server did not get ready within 30 s; see {}",
                    self.log().display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.guard = Some(guard);
        Ok(())
    }

    /// Kills it (an outage).
    fn stop(&mut self) {
        self.guard = None;
    }

    fn ensure_running(&mut self) -> Result<()> {
        match self.guard.as_mut() {
            Some(g) => g.ensure_running(),
            None => bail!("redis-server is not running"),
        }
    }
}

/// Waits (at most 120 s) for `path` to exist, failing if `child` ends first.
fn wait_file(path: &Path, child: &mut Child, what: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !path.exists() {
        if let Some(status) = child.try_wait()? {
            bail!("{what}: the GEN driver ended first ({status}; output above)");
        }
        if Instant::now() > deadline {
            bail!("{what}: {} did not appear within 120 s", path.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
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
            # No URI part: the path goes through as the client wrote it, encoded
            # (the replicas serve under --path-prefix {PREFIX}). A URI part
            # (`http://magma_demo/`, to strip the prefix) makes nginx decode the
            # path first: a run id with an encoded `/` (GEN encodes every
            # character) would reach the replica as two segments, and 404.
            proxy_pass http://magma_demo;
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

/// Waits (at most 180 s) for a client run and fails unless it passed.
fn wait_success(child: &mut Child, what: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() {
                return Ok(());
            }
            bail!("{what} failed ({status}; output above)");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what} did not finish within 180 s");
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

/// The binary `name`, installed from Debian's package `package` when missing.
fn ensure_package(name: &str, package: &str) -> Result<PathBuf> {
    if let Some(found) = which(name) {
        return Ok(found);
    }
    eprintln!(
        "xtask deploy-check: {name} is not installed; running `apt-get update` and `apt-get \
         install -y --no-install-recommends {package}` (Debian's package; needs root)"
    );
    run_inherited(
        "apt-get update",
        Command::new("apt-get").args(["update", "-q"]),
    )?;
    run_inherited(
        &format!("apt-get install {package}"),
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    which(name).with_context(|| format!("{name} is still not found after apt-get install"))
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `Redis 7.0.15`, from `redis-server --version`.
fn redis_version(bin: &Path) -> String {
    Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let v = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
            Some(format!("Redis {v}"))
        })
        .unwrap_or_else(|| "Redis".to_owned())
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
    fn the_config_forwards_the_prefix_and_lists_both_replicas() {
        let conf = nginx_conf(Path::new("/d"), Path::new("/t"), 8443, [1001, 1002]);
        assert!(conf.contains("location /agents/demo/ {"));
        assert!(conf.contains("proxy_pass http://magma_demo;"));
        assert!(conf.contains("server 127.0.0.1:1001") && conf.contains("server 127.0.0.1:1002"));
        assert!(conf.contains("listen 127.0.0.1:8443 ssl"));
    }
}
