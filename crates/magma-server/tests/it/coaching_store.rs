//! Coaching sessions shared through Redis (feature `redis`): two replicas
//! (servers in this process, or the binary) on one real `redis-server` on
//! 127.0.0.1, each test with its own. Every route on any replica, `DELETE`
//! waiting for requests in flight elsewhere, a replica dying mid-request,
//! the limits counted in the store, idle expiry, Redis lost and back, TLS
//! and passwords, and the binary's start-up with an unreachable store.
//!
//! Without `redis-server` (outside CI) these tests are built as ignored
//! (`build.rs`); under `CI=true` a missing one fails them.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use magma_server::magma_protocol::coaching::{
    CoachingKind, CoachingProposal, CoachingSessionConfig, SpecializedCoachingRequest,
    SpecializedCoachingResponse,
};
use magma_server::{
    AgentDecision, AgentInfo, AgentInput, Candidate, CoachError, CoachingContext, Config, Json,
    Object, RedisStore, Rejection, json,
};
use magma_testkit::redis::RedisServer;

use crate::coaching::{coach, delete, expect_204, put};
use crate::support::{Reply, TestServer, send, within};

/// What one replica's agent saw: sessions it prepared and released, by
/// run id, and its coach's requests.
#[derive(Clone, Default)]
struct Replica {
    opened: Arc<Mutex<Vec<String>>>,
    closed: Arc<Mutex<Vec<String>>>,
    active: Arc<AtomicUsize>,
    finished_at: Arc<Mutex<Option<Instant>>>,
}

impl Replica {
    fn opened(&self) -> Vec<String> {
        self.opened.lock().unwrap().clone()
    }

    fn closed(&self) -> Vec<String> {
        self.closed.lock().unwrap().clone()
    }
}

impl magma_server::Agent for Replica {
    fn info(&self) -> AgentInfo {
        AgentInfo::new("replica", "1.0.0")
    }

    async fn respond(&self, _input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        Ok(vec![Candidate::new(
            Object::new(),
            AgentDecision::say("ok"),
        )])
    }

    fn coaching_kinds(&self) -> &[CoachingKind] {
        &[CoachingKind::Failure, CoachingKind::Format]
    }

    async fn open_coaching_session(
        &self,
        run_id: &str,
        config: &CoachingSessionConfig,
    ) -> Result<(), CoachError> {
        if config
            .backends()
            .iter()
            .any(|(_, b)| b.endpoint().contains("unreachable"))
        {
            return Err("backend unreachable".into());
        }
        self.opened.lock().unwrap().push(run_id.to_owned());
        Ok(())
    }

    async fn coach(
        &self,
        request: &SpecializedCoachingRequest,
        context: &CoachingContext,
    ) -> Result<SpecializedCoachingResponse, CoachError> {
        self.active.fetch_add(1, Ordering::SeqCst);
        if let Some(ms) = request
            .additional_info()
            .get("delay_ms")
            .and_then(Json::as_number)
        {
            tokio::time::sleep(Duration::from_millis(ms.as_u64().unwrap_or(0))).await;
        }
        *self.finished_at.lock().unwrap() = Some(Instant::now());
        self.active.fetch_sub(1, Ordering::SeqCst);
        // The session's configuration as this replica has it.
        let mut keys = Object::new();
        let models: Vec<&str> = context
            .config()
            .backends()
            .iter()
            .map(|(_, b)| b.default_model())
            .collect();
        keys.insert("models", Json::from(models.join(",")));
        keys.insert("run_id", Json::from(context.run_id()));
        Ok(SpecializedCoachingResponse::corrected(
            request.request_id(),
            vec![CoachingProposal::raw("replacement", keys)],
        )?)
    }

    async fn close_coaching_session(&self, run_id: &str, _config: &CoachingSessionConfig) {
        self.closed.lock().unwrap().push(run_id.to_owned());
    }
}

fn config(model: &str) -> String {
    json!({
        "backends": {"gen": {"type": "openai", "endpoint": "http://127.0.0.1:9/v1",
                             "default_model": model, "timeout": 30,
                             "headers": {"a": "1", "b": "2"}}},
        "capture_logs": false
    })
    .to_json_string()
}

/// [`config`] written differently but equal by the reference's `==`.
fn same_config_reordered(model: &str) -> String {
    json!({
        "capture_logs": false,
        "backends": {"gen": {"headers": {"b": "2", "a": "1"}, "timeout": 30.0,
                             "default_model": model, "endpoint": "http://127.0.0.1:9/v1",
                             "type": "openai", "max_retry": 3}}
    })
    .to_json_string()
}

fn request(run_id: &str, request_id: &str, additional: Json) -> String {
    json!({
        "run_id": run_id,
        "request_id": request_id,
        "kind": "failure",
        "stage": {"id": 1, "goal": "Press sw0.", "hint": "Use press_button."},
        "target_step_id": 4,
        "trajectory": [
            {"id": 4, "input": {"id": 0, "instruction": {"type": "user", "content": "Press sw0."}}}
        ],
        "reinjection_points": [{"id": "replacement", "input_step_id": 4}],
        "additional_info": additional
    })
    .to_json_string()
}

/// The `models` the coach saw, from a `200` answer.
fn models_seen(reply: &Reply) -> String {
    reply.expect(200);
    let json: serde_json::Value = serde_json::from_slice(&reply.body).expect("JSON");
    json["proposals"][0]["extra_keys"]["models"]
        .as_str()
        .unwrap_or_else(|| panic!("no models in {json}"))
        .to_owned()
}

async fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(&redis.url())
        .expect("url")
        .connect()
        .await
        .expect("connect to redis-server")
}

/// A replica on `redis` with `settings`.
async fn replica_with(redis: &RedisServer, agent: Replica, mut settings: Config) -> TestServer {
    settings.coaching_store = Some(store(redis).await);
    TestServer::with_config(agent, settings).await
}

async fn replica(redis: &RedisServer, agent: Replica) -> TestServer {
    replica_with(redis, agent, Config::default()).await
}

/// Waits (within the tests' patience) until `done` holds.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    within(what, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    redis_server_missing,
    ignore = "skipped: redis-server not found when built (Debian's package redis-server, or MAGMA_REDIS_SERVER); CI installs it"
)]
async fn any_replica_answers_any_coaching_route() {
    let redis = RedisServer::start();
    let (agent_a, agent_b) = (Replica::default(), Replica::default());
    let a = replica(&redis, agent_a.clone()).await;
    let b = replica(&redis, agent_b.clone()).await;

    expect_204(&put(&a, "run%201", config("m1")).await);
    assert_eq!(agent_a.opened(), ["run 1"]);
    // B has never seen the session: it prepares it from the stored config.
    let body = request("run 1", "r1", json!({}));
    assert_eq!(models_seen(&coach(&b, &body).await), "m1");
    assert_eq!(agent_b.opened(), ["run 1"]);
    assert_eq!(models_seen(&coach(&b, &body).await), "m1");
    assert_eq!(agent_b.opened(), ["run 1"], "prepared once per replica");
    // Idempotence and conflicts are decided in the store, by the reference's
    // `==` (order of keys, 30 and 30.0 alike), on any replica.
    expect_204(&put(&b, "run%201", config("m1")).await);
    expect_204(&put(&b, "run%201", same_config_reordered("m1")).await);
    let detail = put(&b, "run%201", config("m2")).await.expect_detail(409);
    assert_eq!(
        detail,
        "Coaching session already has a different configuration or is closing"
    );
    assert_eq!(agent_b.opened(), ["run 1"], "a conflict asks no agent");

    // DELETE on B: B released its state at once, A on its next sweep.
    expect_204(&delete(&b, "run%201").await);
    assert_eq!(agent_b.closed(), ["run 1"]);
    coach(&a, &body).await.expect_detail(404);
    coach(&b, &body).await.expect_detail(404);
    eventually("A to release the closed session", || {
        agent_a.closed() == ["run 1"]
    })
    .await;
    expect_204(&delete(&a, "run%201").await);

    // Reopened with another configuration: a new session everywhere.
    expect_204(&put(&b, "run%201", config("m2")).await);
    assert_eq!(models_seen(&coach(&a, &body).await), "m2");
    assert_eq!(agent_a.opened(), ["run 1", "run 1"]);
    expect_204(&delete(&a, "run%201").await);
    // Nothing is left in Redis once every session is closed.
    assert_eq!(
        redis.command(&["DBSIZE"]).trim(),
        ":1",
        "only the byte count: {}",
        redis.command(&["KEYS", "*"])
    );
    assert_eq!(
        redis.command(&["GET", "magma:coaching:bytes"]).trim(),
        "$1\r\n0"
    );
}

/// A `DELETE` answered by replica A waits for a slow request in flight on
/// replica B; meanwhile the session is closing on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    redis_server_missing,
    ignore = "skipped: redis-server not found when built (Debian's package redis-server, or MAGMA_REDIS_SERVER); CI installs it"
)]
async fn delete_on_one_replica_waits_for_a_request_in_flight_on_the_other() {
    let redis = RedisServer::start();
    let (agent_a, agent_b) = (Replica::default(), Replica::default());
    let a = Arc::new(replica(&redis, agent_a.clone()).await);
    let b = Arc::new(replica(&redis, agent_b.clone()).await);
    expect_204(&put(&a, "run-1", config("m")).await);
    let slow = request("run-1", "slow", json!({"delay_ms": 1500}));
    let post = tokio::spawn({
        let b = Arc::clone(&b);
        async move { coach(&b, &slow).await }
    });
    eventually("B's coach to start", || {
        agent_b.active.load(Ordering::SeqCst) == 1
    })
    .await;
    let deleting = tokio::spawn({
        let a = Arc::clone(&a);
        async move {
            let reply = delete(&a, "run-1").await;
            (reply, Instant::now())
        }
    });
    // Closing everywhere: the same configuration conflicts, requests are 404.
    within("the session to be closing", async {
        loop {
            let reply = put(&b, "run-1", config("m")).await;
            if reply.status.as_u16() == 409 {
                break;
            }
            expect_204(&reply);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let late = request("run-1", "late", json!({}));
    coach(&a, &late).await.expect_detail(404);
    coach(&b, &late).await.expect_detail(404);
    assert!(agent_a.closed().is_empty() && agent_b.closed().is_empty());

    let post_reply = within("B's slow request", post).await.unwrap();
    let (delete_reply, deleted_at) = within("A's DELETE", deleting).await.unwrap();
    assert_eq!(models_seen(&post_reply), "m");
    expect_204(&delete_reply);
    let finished = agent_b
        .finished_at
        .lock()
        .unwrap()
        .expect("B's coach finished");
    assert!(
        deleted_at >= finished,
        "A's DELETE answered before B's request finished"
    );
    assert_eq!(
        agent_a.closed(),
        ["run-1"],
        "A released its state before answering"
    );
    eventually("B to release its state", || agent_b.closed() == ["run-1"]).await;
    expect_204(&put(&b, "run-1", config("other")).await);
}

/// A replica killed while its request runs: its lease ends, and a `DELETE`
/// on the other replica completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    redis_server_missing,
    ignore = "skipped: redis-server not found when built (Debian's package redis-server, or MAGMA_REDIS_SERVER); CI installs it"
)]
async fn a_replica_that_dies_mid_request_does_not_keep_the_session_open() {
    let redis = RedisServer::start();
    let a = replica(&redis, Replica::default()).await;
    let url = redis.url();
    let mut b = crate::binary::Binary::start(&["--coaching-store", &url], Some("info")).await;
    expect_204(&put(&a, "run-1", config("m")).await);
    // The demo agent's coach waits `additional_info.delay_ms` first.
    let slow = request("run-1", "slow", json!({"delay_ms": 60000}));
    let b_addr = b.addr;
    let post = tokio::spawn(async move {
        send(
            b_addr,
            Method::POST,
            "/v1/coaching",
            &[("content-type", "application/json")],
            Bytes::from(slow),
        )
        .await
    });
    within("B's request to be counted in the store", async {
        while redis.command(&["ZCARD", "magma:coaching:f:run-1"]).trim() != ":1" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    b.signal("KILL");
    b.wait_exit().await;
    post.abort();
    // Within the lease (10 s), the DELETE goes through.
    expect_204(&within("the DELETE", delete(&a, "run-1")).await);
    coach(&a, &request("run-1", "after", json!({})))
        .await
        .expect_detail(404);
    assert_eq!(
        redis.command(&["EXISTS", "magma:coaching:s:run-1"]).trim(),
        ":0"
    );
}

/// Redis lost: coaching routes answer 503 with a `detail` naming the flag,
/// inference and `/health` do not notice; Redis back: coaching works again
/// without a restart (the session kept, with Redis's append-only file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    redis_server_missing,
    ignore = "skipped: redis-server not found when built (Debian's package redis-server, or MAGMA_REDIS_SERVER); CI installs it"
)]
async fn coaching_answers_503_while_redis_is_down_and_recovers_without_a_restart() {
    let mut redis = RedisServer::with_args(&["--appendonly", "yes", "--appendfsync", "always"]);
    let agent = Replica::default();
    let a = replica(&redis, agent.clone()).await;
    expect_204(&put(&a, "run-1", config("m")).await);
    let body = request("run-1", "r1", json!({}));
    assert_eq!(models_seen(&coach(&a, &body).await), "m");

    redis.stop();
    for reply in [
        put(&a, "run-1", config("m")).await,
        put(&a, "run-2", config("m")).await,
        coach(&a, &body).await,
        delete(&a, "run-1").await,
    ] {
        let detail = reply.expect_detail(503);
        assert!(
            detail.contains("--coaching-store") && detail.contains("cannot be reached"),
            "{detail}"
        );
    }
    // Inference and health are not coaching.
    a.get("/health").await.expect(200);
    a.get("/v1/info").await.expect(200);
    let inference = json!({"request_id": "q", "inputs": [
        {"id": 0, "instruction": {"type": "user", "content": "hi"}}
    ]});
    a.respond(inference.to_json_string()).await.expect(200);

    redis.resume();
    // The first call after the outage reconnects.
    assert_eq!(models_seen(&coach(&a, &body).await), "m");
    expect_204(&put(&a, "run-2", config("m")).await);
    assert_eq!(
        models_seen(&coach(&a, &request("run-2", "r2", json!({}))).await),
        "m"
    );
    expect_204(&delete(&a, "run-1").await);
    expect_204(&delete(&a, "run-2").await);
    assert_eq!(agent.closed(), ["run-1", "run-2"]);
}

/// `--max-coaching-sessions` and `--max-coaching-session-bytes` count the
/// sessions of the whole store: a replica refuses what another filled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    redis_server_missing,
    ignore = "skipped: redis-server not found when built (Debian's package redis-server, or MAGMA_REDIS_SERVER); CI installs it"
)]
async fn the_count_and_byte_limits_are_the_stores() {
    let redis = RedisServer::start();
    let mut settings = Config::default();
    settings.max_body_bytes = 64 * 1024;
    settings.max_total_body_bytes = 64 << 20;
    settings.max_coaching_session_bytes = 64 * 1024;
    settings.max_coaching_sessions = 3;
    let a = replica_with(&redis, Replica::default(), settings.clone()).await;
    let b = replica_with(&redis, Replica::default(), settings).await;
    let big = |n: usize| {
        let mut headers = Object::new();
        for i in 0..n {
            headers.insert(format!("h{i}"), Json::from("v".repeat(100)));
        }
        json!({"backends": {"gen": {"type": "t", "endpoint": "e", "default_model": "m",
                                    "headers": headers}}})
        .to_json_string()
    };
    expect_204(&put(&a, "big-1", big(350)).await);
    let detail = put(&b, "big-2", big(350)).await.expect_detail(503);
    assert!(detail.contains("--max-coaching-session-bytes"), "{detail}");
    expect_204(&delete(&b, "big-1").await);
    expect_204(&put(&b, "big-2", big(350)).await);
    expect_204(&delete(&a, "big-2").await);

    for (server, run) in [(&a, "s1"), (&b, "s2"), (&a, "s3")] {
        expect_204(&put(server, run, config("m")).await);
    }
    let detail = put(&b, "s4", config("m")).await.expect_detail(503);
    assert!(detail.contains("--max-coaching-sessions"), "{detail}");
    expect_204(&delete(&b, "s1").await);
    expect_204(&put(&b, "s4", config("m")).await);
}

/// A session no request touches for the idle timeout expires in the store;
/// every replica that served it releases its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    redis_server_missing,
    ignore = "skipped: redis-server not found when built (Debian's package redis-server, or MAGMA_REDIS_SERVER); CI installs it"
)]
async fn idle_sessions_expire_in_the_store_and_every_replica_lets_go() {
    let redis = RedisServer::start();
    let mut settings = Config::default();
    settings.coaching_session_idle_timeout = Some(Duration::from_secs(1));
    let (agent_a, agent_b) = (Replica::default(), Replica::default());
    let a = replica_with(&redis, agent_a.clone(), settings.clone()).await;
    let b = replica_with(&redis, agent_b.clone(), settings).await;
    expect_204(&put(&a, "idle", config("m")).await);
    expect_204(&put(&a, "busy", config("m")).await);
    coach(&b, &request("idle", "r1", json!({})))
        .await
        .expect(200);
    // A request of the busy session runs past the idle timeout on B.
    let slow_body = request("busy", "slow", json!({"delay_ms": 2500}));
    let slow = coach(&b, &slow_body);
    let (slow, ()) = tokio::join!(slow, tokio::time::sleep(Duration::from_millis(1500)));
    slow.expect(200);
    eventually("both replicas to release the idle session", || {
        agent_a.closed().contains(&"idle".to_owned())
            && agent_b.closed().contains(&"idle".to_owned())
    })
    .await;
    coach(&a, &request("idle", "late", json!({})))
        .await
        .expect_detail(404);
    coach(&b, &request("busy", "again", json!({})))
        .await
        .expect(200);
}

/// Two replicas asked at once to open one run id with two configurations:
/// the store decides once; the loser's agent gives back what it prepared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    redis_server_missing,
    ignore = "skipped: redis-server not found when built (Debian's package redis-server, or MAGMA_REDIS_SERVER); CI installs it"
)]
async fn concurrent_puts_of_two_configurations_are_decided_once() {
    let redis = RedisServer::start();
    let (agent_a, agent_b) = (Replica::default(), Replica::default());
    let a = replica(&redis, agent_a.clone()).await;
    let b = replica(&redis, agent_b.clone()).await;
    for i in 0..20 {
        let run = format!("race-{i}");
        let (x, y) = tokio::join!(put(&a, &run, config("x")), put(&b, &run, config("y")));
        let mut statuses = [x.status.as_u16(), y.status.as_u16()];
        statuses.sort_unstable();
        assert_eq!(statuses, [204, 409], "{run}: {} / {}", x.text(), y.text());
        let winner = if x.status.as_u16() == 204 { "x" } else { "y" };
        let seen = models_seen(&coach(&a, &request(&run, "r", json!({}))).await);
        assert_eq!(seen, winner, "{run}");
        assert_eq!(
            models_seen(&coach(&b, &request(&run, "r", json!({}))).await),
            winner
        );
    }
    for i in 0..20 {
        expect_204(&delete(if i % 2 == 0 { &a } else { &b }, &format!("race-{i}")).await);
    }
    // Every state an agent prepared was given back once.
    eventually("every prepared session to be released", || {
        let mut opened = agent_a.opened();
        opened.extend(agent_b.opened());
        let mut closed = agent_a.closed();
        closed.extend(agent_b.closed());
        opened.sort();
        closed.sort();
        opened == closed
    })
    .await;
}

/// `rediss://` with the store's own CA and a password; a wrong password
/// and an unknown CA are refused at connection, without the password in
/// the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    redis_server_missing,
    ignore = "skipped: redis-server not found when built (Debian's package redis-server, or MAGMA_REDIS_SERVER); CI installs it"
)]
async fn rediss_with_a_password_and_a_ca_file() {
    let ca = magma_testkit::pki::Ca::new("redis test CA");
    let leaf = ca.server_leaf();
    let dir = magma_testkit::TempDir::new("redis-tls");
    let cert = dir.write("cert.pem", &leaf.cert_pem);
    let key = dir.write("key.pem", &leaf.key_pem);
    let ca_file = dir.write("ca.pem", &ca.pem);
    let redis = RedisServer::tls(&cert, &key, &ca_file, &["--requirepass", "s3cret-pw"]);
    let url = redis.url();
    let store = RedisStore::builder(&url)
        .unwrap()
        .password("s3cret-pw")
        .ca_file(&ca_file)
        .connect()
        .await
        .expect("rediss with the CA and password");
    assert_eq!(
        store.target(),
        format!("rediss://localhost:{}/0", redis.port)
    );
    let mut settings = Config::default();
    settings.coaching_store = Some(store);
    let agent = Replica::default();
    let server = TestServer::with_config(agent, settings).await;
    expect_204(&put(&server, "tls-run", config("m")).await);
    assert_eq!(
        models_seen(&coach(&server, &request("tls-run", "r", json!({}))).await),
        "m"
    );
    expect_204(&delete(&server, "tls-run").await);

    let wrong = RedisStore::builder(&url.replace("rediss://", "rediss://:n0t-the-pw@"))
        .unwrap()
        .ca_file(&ca_file)
        .connect()
        .await
        .expect_err("a wrong password");
    let text = wrong.to_string();
    assert!(
        text.contains("cannot reach the coaching session store"),
        "{text}"
    );
    assert!(
        !text.contains("n0t-the-pw") && format!("{wrong:?}").contains("localhost"),
        "{text}"
    );
    let untrusted = RedisStore::builder(&url)
        .unwrap()
        .password("s3cret-pw")
        .connect()
        .await
        .expect_err("a certificate of an unknown CA")
        .to_string();
    assert!(untrusted.contains("TLS"), "{untrusted}");
}

/// The binary with `--coaching-store` that cannot be reached does not start:
/// exit 1, a message naming the flag (without the password); a URL that is
/// not Redis's is a usage error (2).
#[test]
#[cfg_attr(
    redis_server_missing,
    ignore = "skipped: redis-server not found when built (Debian's package redis-server, or MAGMA_REDIS_SERVER); CI installs it"
)]
fn an_unreachable_store_stops_the_binary_at_start_up_naming_the_flag() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let out = Command::new(crate::binary::BIN)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .output()
            .expect("run magma-server");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let url = format!("redis://:hunter2-pw@127.0.0.1:{port}/0");
    let (code, err) = run(&["--coaching-store", &url], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "--coaching-store redis://127.0.0.1:{port}/0: cannot reach"
        )),
        "{err}"
    );
    assert!(!err.contains("hunter2-pw"), "{err}");
    assert!(!err.contains("listening on"), "{err}");
    // The same from the environment, the password from its own variable.
    let plain = format!("redis://127.0.0.1:{port}/0");
    let (code, err) = run(
        &[],
        &[
            ("MAGMA_SERVER_COACHING_STORE", &plain),
            ("MAGMA_SERVER_COACHING_STORE_PASSWORD", "hunter2-pw"),
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--coaching-store") && !err.contains("hunter2-pw"),
        "{err}"
    );
    let (code, err) = run(&["--coaching-store", "http://:hunter2-pw@127.0.0.1:1"], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--coaching-store") && !err.contains("hunter2-pw"),
        "{err}"
    );
    let (code, err) = run(
        &["--coaching-store", &url],
        &[("MAGMA_SERVER_COACHING_STORE_PASSWORD", "other")],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("give it once"), "{err}");

    // Reachable: the binary starts and serves coaching from the store.
    let redis = RedisServer::with_args(&["--requirepass", "hunter2-pw"]);
    let mut child = magma_testkit::process::LoggedChild::spawn(
        "magma-server",
        Command::new(crate::binary::BIN)
            .args(["--listen", "127.0.0.1:0", "--coaching-store", &redis.url()])
            .env("MAGMA_SERVER_COACHING_STORE_PASSWORD", "hunter2-pw")
            .env("RUST_LOG", "info"),
    );
    let line = child.wait_for_log("listening on ", Duration::from_secs(30));
    assert!(
        child.log().contains("coaching sessions are kept in Redis"),
        "{}",
        child.log()
    );
    assert!(!child.log().contains("hunter2-pw"));
    let _ = line;
}
