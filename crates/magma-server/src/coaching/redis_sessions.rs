//! Coaching sessions shared through Redis (feature `redis`): any replica
//! answers any coaching route. The connection is `crate::redis_store`'s.
//!
//! What lives where:
//!
//! - **In Redis** (see `redis_store/scripts.rs` for the keys): each session's
//!   configuration as the first `PUT` sent it, its canonical digest, its
//!   state and generation; its requests in flight, each with a lease the
//!   replica running it renews every [`REFRESH_EVERY`] (so a replica that
//!   dies mid-request holds the session for at most [`REQUEST_LEASE`]); the
//!   count and bytes of all sessions, checked against this replica's
//!   `max_coaching_sessions` and `max_coaching_session_bytes` when a `PUT`
//!   creates one (give every replica the same limits).
//! - **On each replica**: the state its agent prepared for the sessions it
//!   served (`open_coaching_session`, called the first time the replica
//!   serves a session, from the stored configuration) and the
//!   configuration's text, in a cache bounded by the same byte budget;
//!   entries not in use are given back to the agent
//!   (`close_coaching_session`) when the session is closed or expires
//!   anywhere (the replica's sweep, every [`SWEEP_EVERY`], compares them
//!   with Redis), when the same run id is reopened, or to make room.
//!
//! A `DELETE` on any replica marks the session closing in Redis (every
//! replica's `POST` is `404` from then on), waits until no request is in
//! flight on any replica, lets its own agent release its state, and removes
//! the session. A `DELETE` that dies on the way leaves a lease that ends;
//! the next `PUT`, `DELETE` or sweep finishes the close.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use magma_protocol::coaching::CoachingSessionConfig;
use redis::Value;

use super::store::{ExpiredReport, HoldError, SessionAgent, Swept, Unavailable};
use super::{OpenError, session_bytes};
use crate::redis_store::{Link, Op, RedisStore, malformed, scripts, words};

/// How long a request in flight holds its session without being renewed.
pub(crate) const REQUEST_LEASE: Duration = Duration::from_secs(10);
/// How long a `DELETE` closing a session counts as alive without renewing.
const CLOSER_LEASE: Duration = Duration::from_secs(10);
/// How often a replica renews the leases of its requests in flight.
pub(crate) const REFRESH_EVERY: Duration = Duration::from_secs(2);
/// How often a replica sweeps: idle sessions, and its state of sessions
/// closed elsewhere.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// A waiting `DELETE` looks again after this long, doubling up to
/// [`POLL_MAX`].
const POLL_START: Duration = Duration::from_millis(20);
const POLL_MAX: Duration = Duration::from_millis(200);
/// Sessions one sweep may look at.
const SWEEP_LIMIT: usize = 256;

/// What the `PUT` script answered.
enum Opened {
    Same(String),
    New(String),
    Absent,
    Conflict,
    Full,
    Over(u64),
}

/// What the `DELETE` script answered.
enum Closing {
    Gone,
    Closer(String),
    Waiter(String),
}

/// A session this replica's agent holds state for, by generation.
#[derive(Debug)]
struct Entry {
    run_id: Arc<str>,
    text: Arc<str>,
    active: usize,
    bytes: u64,
    last_used: Instant,
}

#[derive(Debug, Default)]
struct Local {
    entries: HashMap<String, Entry>,
    /// The newest generation seen of each run id.
    current: HashMap<String, String>,
    bytes: u64,
}

impl Local {
    /// Removes the entry of `generation` (not in use) and returns it.
    fn take(&mut self, generation: &str) -> Option<Entry> {
        if self.entries.get(generation).is_none_or(|e| e.active > 0) {
            return None;
        }
        let entry = self.entries.remove(generation)?;
        self.bytes -= entry.bytes;
        if self
            .current
            .get(&*entry.run_id)
            .is_some_and(|g| g == generation)
        {
            self.current.remove(&*entry.run_id);
        }
        Some(entry)
    }
}

/// This replica's requests in flight (member -> in-flight key), whose
/// leases its refresher renews.
#[derive(Debug, Default)]
struct InFlight {
    members: Mutex<HashMap<String, String>>,
}

/// The shared store as the routes use it.
pub(crate) struct RedisSessions {
    store: RedisStore,
    max: usize,
    max_bytes: u64,
    idle: Option<Duration>,
    /// Names this replica's requests in flight.
    replica: String,
    seq: AtomicU64,
    local: Mutex<Local>,
    in_flight: Arc<InFlight>,
    /// Serializes this replica's agent opening sessions.
    opening: tokio::sync::Mutex<()>,
    last_sweep: Mutex<Option<Instant>>,
    refresher: std::sync::Once,
}

impl fmt::Debug for RedisSessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSessions")
            .field("store", &self.store)
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

/// A request counted in flight in Redis: given back when dropped, also
/// when the request is abandoned (in the background; if Redis cannot be
/// told, the lease ends).
struct Claim<'a> {
    sessions: &'a RedisSessions,
    member: String,
    run_id: Arc<str>,
    generation: String,
    /// Whether this replica's entry of `generation` counts the request.
    attached: bool,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let s = self.sessions;
        if self.attached
            && let Some(e) = s.lock().entries.get_mut(&self.generation)
        {
            e.active -= 1;
            e.last_used = Instant::now();
        }
        s.in_flight
            .members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.member);
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let link = Arc::clone(&s.store.link);
        let member = std::mem::take(&mut self.member);
        let generation = std::mem::take(&mut self.generation);
        let run_id = Arc::clone(&self.run_id);
        rt.spawn(async move {
            let script = &scripts().release;
            let mut inv = script.prepare_invoke();
            inv.key(link.key("f", &run_id))
                .key(link.key("s", &run_id))
                .key(link.sessions_key())
                .arg(&member)
                .arg(&*run_id)
                .arg(&generation);
            if let Err(e) = link.exec::<Value>(Op::Script(&inv)).await {
                tracing::debug!(reason = %e, "a coaching request's end was not recorded in the store; its lease ends instead");
            }
        });
    }
}

/// A request's hold on its session.
pub(crate) struct RedisHeld<'a> {
    claim: Claim<'a>,
    run_id: Arc<str>,
    config: Arc<CoachingSessionConfig>,
}

impl fmt::Debug for RedisHeld<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisHeld")
            .field("run_id", &self.run_id)
            .field("member", &self.claim.member)
            .finish_non_exhaustive()
    }
}

impl RedisHeld<'_> {
    pub(crate) fn config(&self) -> &Arc<CoachingSessionConfig> {
        &self.config
    }

    pub(crate) fn run_id(&self) -> &Arc<str> {
        &self.run_id
    }
}

/// The configuration of a session back from its stored text.
fn reread(run_id: &str, text: &str) -> Option<Arc<CoachingSessionConfig>> {
    super::reread(run_id, text)
}

/// A random token (hex): generations, closers, replica names.
fn token() -> String {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    // The system's generator does not fail on the platforms ring supports;
    // the counter and clock keep tokens apart if it ever did.
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        bytes[8..].copy_from_slice(&(t ^ u64::from(std::process::id())).to_le_bytes());
    }
    hex(&bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of `config` in a canonical form: equal for configurations the
/// reference's `==` finds equal (backends and headers in any order, `30`
/// and `30.0` alike), different otherwise.
pub(crate) fn digest(config: &CoachingSessionConfig) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut field = |bytes: &[u8]| {
        ctx.update(&(bytes.len() as u64).to_le_bytes());
        ctx.update(bytes);
    };
    field(&[u8::from(config.capture_logs())]);
    let mut backends: Vec<_> = config.backends().iter().collect();
    backends.sort_unstable_by(|a, b| a.0.cmp(b.0));
    field(&(backends.len() as u64).to_le_bytes());
    for (name, b) in backends {
        field(name.as_bytes());
        field(b.kind().as_bytes());
        field(b.endpoint().as_bytes());
        field(b.default_model().as_bytes());
        field(&b.timeout().to_bits().to_le_bytes());
        field(&b.max_retry().to_le_bytes());
        let mut headers: Vec<_> = b.headers().iter().collect();
        headers.sort_unstable_by(|x, y| x.0.cmp(y.0));
        field(&(headers.len() as u64).to_le_bytes());
        for (k, v) in headers {
            field(k.as_bytes());
            field(v.as_bytes());
        }
    }
    hex(ctx.finish().as_ref())
}

impl RedisSessions {
    pub(crate) fn new(
        store: RedisStore,
        max: usize,
        max_bytes: u64,
        idle: Option<Duration>,
    ) -> RedisSessions {
        RedisSessions {
            store,
            max,
            max_bytes,
            idle,
            replica: token(),
            seq: AtomicU64::new(0),
            local: Mutex::default(),
            in_flight: Arc::default(),
            opening: tokio::sync::Mutex::new(()),
            last_sweep: Mutex::new(None),
            refresher: std::sync::Once::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn link(&self) -> &Link {
        &self.store.link
    }

    pub(crate) fn sweep_period(&self) -> Duration {
        SWEEP_EVERY
    }

    /// Starts the task that renews this replica's leases (once, from the
    /// first call in a runtime; it ends with the store).
    fn start_refresher(&self) {
        self.refresher.call_once(|| {
            let weak: Weak<InFlight> = Arc::downgrade(&self.in_flight);
            let link = Arc::clone(&self.store.link);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(REFRESH_EVERY);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(in_flight) = weak.upgrade() else {
                        return;
                    };
                    let members: Vec<(String, String)> = in_flight
                        .members
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .iter()
                        .map(|(m, k)| (m.clone(), k.clone()))
                        .collect();
                    drop(in_flight);
                    if members.is_empty() {
                        continue;
                    }
                    let script = &scripts().refresh;
                    let mut inv = script.prepare_invoke();
                    inv.arg(REQUEST_LEASE.as_millis() as u64);
                    for (member, key) in &members {
                        inv.key(key).arg(member);
                    }
                    if let Err(e) = link.exec::<Value>(Op::Script(&inv)).await {
                        tracing::debug!(reason = %e, "the leases of coaching requests in flight were not renewed");
                    }
                }
            });
        });
    }

    async fn open_script(
        &self,
        run_id: &str,
        digest: &str,
        needed: u64,
        create: Option<(&str, &str)>,
    ) -> Result<Opened, Unavailable> {
        let link = self.link();
        let script = &scripts().open;
        let mut inv = script.prepare_invoke();
        let (generation, text) = create.unwrap_or(("", ""));
        inv.key(link.key("s", run_id))
            .key(link.key("f", run_id))
            .key(link.sessions_key())
            .key(link.bytes_key())
            .arg(run_id)
            .arg(digest)
            .arg(needed)
            .arg(self.max as u64)
            .arg(self.max_bytes)
            .arg(generation)
            .arg(text);
        let reply = words(link.exec::<Value>(Op::Script(&inv)).await?)
            .ok_or_else(|| Unavailable(malformed("a PUT")))?;
        let arg = || reply.get(1).cloned().flatten();
        Ok(match reply.first().cloned().flatten().as_deref() {
            Some("same") => Opened::Same(arg().ok_or_else(|| Unavailable(malformed("a PUT")))?),
            Some("new") => Opened::New(arg().ok_or_else(|| Unavailable(malformed("a PUT")))?),
            Some("absent") => Opened::Absent,
            Some("conflict") => Opened::Conflict,
            Some("full") => Opened::Full,
            Some("over") => Opened::Over(arg().and_then(|h| h.parse().ok()).unwrap_or(0)),
            _ => return Err(Unavailable(malformed("a PUT"))),
        })
    }

    fn refusal(&self, opened: Opened, needed: u64) -> OpenError {
        match opened {
            Opened::Full => OpenError::Full(self.max),
            Opened::Over(held) => OpenError::OverBudget {
                needed,
                held,
                budget: self.max_bytes,
            },
            _ => OpenError::Conflict,
        }
    }

    /// `PUT`: looks first (the same configuration, a conflict or a full
    /// store are answered without asking the agent), asks this replica's
    /// agent, then creates the session in one script that decides again;
    /// if another replica created it meanwhile, the agent's state is kept
    /// for the same configuration and released otherwise.
    pub(crate) async fn open(
        &self,
        run_id: &str,
        config: CoachingSessionConfig,
        agent: &impl SessionAgent,
    ) -> Result<(), OpenError> {
        self.start_refresher();
        let text = config.to_json_string();
        let digest = digest(&config);
        let needed = session_bytes(run_id, &text);
        match self
            .open_script(run_id, &digest, needed, None)
            .await
            .map_err(OpenError::Unavailable)?
        {
            Opened::Same(_) | Opened::New(_) => return Ok(()),
            Opened::Absent => {}
            refused => return Err(self.refusal(refused, needed)),
        }
        let _opening = self.opening.lock().await;
        let shared_id: Arc<str> = Arc::from(run_id);
        let config = Arc::new(config);
        agent
            .open(Arc::clone(&shared_id), Arc::clone(&config))
            .await
            .map_err(OpenError::Refused)?;
        let generation = token();
        let created = self
            .open_script(run_id, &digest, needed, Some((&generation, &text)))
            .await;
        match created {
            Ok(Opened::New(generation) | Opened::Same(generation)) => {
                let (kept, evicted) =
                    self.cache(&generation, &shared_id, Arc::from(text), needed, 0);
                self.release_all(evicted, agent).await;
                if !kept {
                    agent.close(shared_id, config).await;
                }
                Ok(())
            }
            Ok(other) => {
                agent.close(shared_id, config).await;
                Err(self.refusal(other, needed))
            }
            Err(e) => {
                agent.close(shared_id, config).await;
                Err(OpenError::Unavailable(e))
            }
        }
    }

    /// Keeps this replica's state of `generation` (`active` requests on
    /// it), making room within the byte budget by giving back entries not
    /// in use (oldest first; the run id's older generations first of all).
    /// Returns whether it was kept (it was not when already there, or when
    /// no room could be made) and what was given back.
    fn cache(
        &self,
        generation: &str,
        run_id: &Arc<str>,
        text: Arc<str>,
        bytes: u64,
        active: usize,
    ) -> (bool, Vec<Entry>) {
        let mut local = self.lock();
        if local.entries.contains_key(generation) {
            return (false, Vec::new());
        }
        let mut evicted = Vec::new();
        if let Some(old) = local.current.get(&**run_id).cloned()
            && let Some(e) = local.take(&old)
        {
            evicted.push(e);
        }
        while local.bytes.saturating_add(bytes) > self.max_bytes {
            let oldest = local
                .entries
                .iter()
                .filter(|(_, e)| e.active == 0)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(g, _)| g.clone());
            match oldest.and_then(|g| local.take(&g)) {
                Some(e) => evicted.push(e),
                None => return (false, evicted),
            }
        }
        local.bytes += bytes;
        local
            .current
            .insert(run_id.to_string(), generation.to_owned());
        local.entries.insert(
            generation.to_owned(),
            Entry {
                run_id: Arc::clone(run_id),
                text,
                active,
                bytes,
                last_used: Instant::now(),
            },
        );
        (true, evicted)
    }

    /// Hands the agent back the state of `entries`.
    async fn release_all(&self, entries: Vec<Entry>, agent: &impl SessionAgent) {
        for e in entries {
            if let Some(config) = reread(&e.run_id, &e.text) {
                agent.close(e.run_id, config).await;
            }
        }
    }

    /// A hold on `(generation)` if this replica has it: `(run_id, text)`.
    fn attach(&self, generation: &str) -> Option<(Arc<str>, Arc<str>)> {
        let mut local = self.lock();
        let e = local.entries.get_mut(generation)?;
        e.active += 1;
        e.last_used = Instant::now();
        Some((Arc::clone(&e.run_id), Arc::clone(&e.text)))
    }

    /// `POST`: counts the request in flight in Redis (nil: unknown or
    /// closing), then finds this replica's state of the session or has the
    /// agent prepare it from the stored configuration (fetched under the
    /// opening lock: one configuration in transit at a time, however many
    /// requests arrive for a session this replica has not served yet).
    pub(crate) async fn hold(
        &self,
        run_id: &str,
        agent: &impl SessionAgent,
    ) -> Result<Option<RedisHeld<'_>>, HoldError> {
        self.start_refresher();
        let link = self.link();
        let member = format!(
            "{}:{}",
            self.replica,
            self.seq.fetch_add(1, Ordering::Relaxed)
        );
        let in_flight_key = link.key("f", run_id);
        // Registered first, so that its lease is renewed from the start.
        self.in_flight
            .members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(member.clone(), in_flight_key.clone());
        let forget = |member: &str| {
            self.in_flight
                .members
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(member);
        };
        let script = &scripts().hold;
        let mut inv = script.prepare_invoke();
        inv.key(link.key("s", run_id))
            .key(&in_flight_key)
            .arg(&member)
            .arg(REQUEST_LEASE.as_millis() as u64);
        let reply = match link.exec::<Value>(Op::Script(&inv)).await {
            Ok(v) => words(v),
            Err(e) => {
                forget(&member);
                return Err(HoldError::Unavailable(Unavailable(e)));
            }
        };
        let Some(reply) = reply else {
            forget(&member);
            return Ok(None);
        };
        let Some(generation) = reply.first().cloned().flatten() else {
            forget(&member);
            return Err(HoldError::Unavailable(Unavailable(malformed("a POST"))));
        };
        // From here on the claim gives the count back, whatever happens.
        let mut claim = Claim {
            sessions: self,
            member,
            run_id: Arc::from(run_id),
            generation: generation.clone(),
            attached: false,
        };
        if let Some((shared_id, text)) = self.attach(&generation) {
            claim.attached = true;
            return Ok(held(claim, shared_id, &text));
        }
        let _opening = self.opening.lock().await;
        if let Some((shared_id, text)) = self.attach(&generation) {
            claim.attached = true;
            return Ok(held(claim, shared_id, &text));
        }
        // Not prepared here yet: from the stored configuration.
        let text: Arc<str> = match self.stored_config(run_id, &generation).await {
            Ok(Some(t)) => Arc::from(t),
            Ok(None) => return Ok(None),
            Err(e) => return Err(HoldError::Unavailable(e)),
        };
        let Some(config) = reread(run_id, &text) else {
            return Ok(None);
        };
        let shared_id: Arc<str> = Arc::from(run_id);
        agent
            .open(Arc::clone(&shared_id), Arc::clone(&config))
            .await
            .map_err(HoldError::Refused)?;
        let bytes = session_bytes(run_id, &text);
        let (kept, evicted) = self.cache(&generation, &shared_id, Arc::clone(&text), bytes, 1);
        self.release_all(evicted, agent).await;
        if !kept {
            agent.close(shared_id, config).await;
            let held_bytes = self.lock().bytes;
            return Err(HoldError::OverBudget {
                needed: bytes,
                held: held_bytes,
                budget: self.max_bytes,
            });
        }
        claim.attached = true;
        Ok(Some(RedisHeld {
            claim,
            run_id: shared_id,
            config,
        }))
    }

    /// The stored configuration of `generation` of `run_id`.
    async fn stored_config(
        &self,
        run_id: &str,
        generation: &str,
    ) -> Result<Option<String>, Unavailable> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(self.link().key("s", run_id))
            .arg("gen")
            .arg("config");
        let reply: Vec<Option<String>> = self.link().exec(Op::Cmd(&cmd)).await?;
        Ok(match reply.as_slice() {
            [Some(g), Some(text)] if g == generation => Some(text.clone()),
            _ => None,
        })
    }

    async fn close_script(&self, run_id: &str, token: &str) -> Result<Closing, Unavailable> {
        let link = self.link();
        let script = &scripts().close;
        let mut inv = script.prepare_invoke();
        inv.key(link.key("s", run_id))
            .key(link.sessions_key())
            .arg(run_id)
            .arg(token)
            .arg(CLOSER_LEASE.as_millis() as u64);
        let Some(reply) = words(link.exec::<Value>(Op::Script(&inv)).await?) else {
            return Ok(Closing::Gone);
        };
        let generation = reply.get(1).cloned().flatten();
        Ok(
            match (reply.first().cloned().flatten().as_deref(), generation) {
                (Some("closer"), Some(g)) => Closing::Closer(g),
                (Some("waiter"), Some(g)) => Closing::Waiter(g),
                _ => return Err(Unavailable(malformed("a DELETE"))),
            },
        )
    }

    /// `DELETE`: marks the session closing in Redis, waits for the requests
    /// in flight on every replica, releases this replica's state, removes
    /// it. A second `DELETE` waits for the first (and takes over if the
    /// first's lease ends).
    pub(crate) async fn close(
        &self,
        run_id: &str,
        agent: &impl SessionAgent,
    ) -> Result<(), Unavailable> {
        self.start_refresher();
        let token = token();
        let link = self.link();
        let mut pause = POLL_START;
        let mut waited_for: Option<String> = None;
        let generation = loop {
            match self.close_script(run_id, &token).await? {
                Closing::Gone => return Ok(()),
                Closing::Closer(g) => break g,
                Closing::Waiter(g) => {
                    // Another DELETE closes it; done once that session is
                    // gone (or replaced by a new one).
                    if waited_for.as_ref().is_some_and(|w| *w != g) {
                        return Ok(());
                    }
                    waited_for = Some(g);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(POLL_MAX);
                }
            }
        };
        let script = &scripts().in_flight;
        loop {
            let mut inv = script.prepare_invoke();
            inv.key(link.key("s", run_id))
                .key(link.key("f", run_id))
                .arg(&generation)
                .arg(&token)
                .arg(CLOSER_LEASE.as_millis() as u64);
            let n: i64 = link.exec(Op::Script(&inv)).await?;
            match n {
                0 => break,
                // Taken over (this DELETE's lease ended): another closes it.
                n if n < 0 => return Box::pin(self.close(run_id, agent)).await,
                _ => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(POLL_MAX);
                }
            }
        }
        let mine = self.lock().take(&generation);
        if let Some(e) = mine {
            self.release_all(vec![e], agent).await;
        }
        let script = &scripts().finish;
        let mut inv = script.prepare_invoke();
        inv.key(link.key("s", run_id))
            .key(link.key("f", run_id))
            .key(link.sessions_key())
            .key(link.bytes_key())
            .arg(run_id)
            .arg(&generation)
            .arg(&token);
        link.exec::<i64>(Op::Script(&inv)).await?;
        Ok(())
    }

    /// The sweep (at most once per [`SWEEP_EVERY`]): expires idle sessions
    /// in Redis (any replica may be the one that does), finishes closes
    /// whose `DELETE` died, and finds this replica's state of sessions
    /// closed, expired or reopened elsewhere.
    pub(crate) async fn sweep(&self, now: Instant) -> Swept {
        {
            let mut last = self
                .last_sweep
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last.is_some_and(|t| now.saturating_duration_since(t) < SWEEP_EVERY / 2) {
                return Swept::default();
            }
            *last = Some(now);
        }
        let mut swept = Swept::default();
        let link = self.link();
        let script = &scripts().expire;
        let mut inv = script.prepare_invoke();
        inv.key(link.sessions_key())
            .key(link.bytes_key())
            .arg(&link.prefix)
            .arg(self.idle.map_or(0, |d| d.as_millis() as u64))
            .arg(SWEEP_LIMIT as u64);
        match link.exec::<Value>(Op::Script(&inv)).await {
            Ok(v) => {
                let pairs = words(v).unwrap_or_default();
                for pair in pairs.chunks(2) {
                    if let [Some(run_id), Some(ms)] = pair {
                        swept.expired.push(ExpiredReport {
                            run_id: Arc::from(run_id.as_str()),
                            idle: Duration::from_millis(ms.parse().unwrap_or(0)),
                        });
                    }
                }
            }
            // Logged once per outage by the link.
            Err(_) => return swept,
        }
        let unused: Vec<(String, Arc<str>)> = self
            .lock()
            .entries
            .iter()
            .filter(|(_, e)| e.active == 0)
            .map(|(g, e)| (g.clone(), Arc::clone(&e.run_id)))
            .collect();
        if unused.is_empty() {
            return swept;
        }
        let mut pipe = redis::pipe();
        for (_, run_id) in &unused {
            pipe.cmd("HMGET")
                .arg(link.key("s", run_id))
                .arg("state")
                .arg("gen");
        }
        let Ok(states) = link.exec::<Vec<Vec<Option<String>>>>(Op::Pipe(&pipe)).await else {
            return swept;
        };
        let mut local = self.lock();
        for ((generation, _), state) in unused.iter().zip(states) {
            let alive =
                matches!(state.as_slice(), [Some(s), Some(g)] if s == "open" && g == generation);
            if !alive && let Some(e) = local.take(generation) {
                if let Some(config) = reread(&e.run_id, &e.text) {
                    swept.release.push((e.run_id, config));
                }
            }
        }
        swept
    }
}

/// The hold of `claim` on this replica's entry, with its configuration;
/// `None` (the claim given back) if the text does not read back.
fn held<'a>(claim: Claim<'a>, run_id: Arc<str>, text: &str) -> Option<RedisHeld<'a>> {
    let config = reread(&run_id, text)?;
    Some(RedisHeld {
        claim,
        run_id,
        config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_follow_the_references_equality() {
        let read = |s: &str| CoachingSessionConfig::from_slice(s.as_bytes()).unwrap();
        let a = read(
            r#"{"backends":{"a":{"type":"t","endpoint":"e","default_model":"m","timeout":30,
                "headers":{"x":"1","y":"2"}},"b":{"type":"t","endpoint":"e","default_model":"m"}}}"#,
        );
        let b = read(
            r#"{"capture_logs":true,"backends":{"b":{"type":"t","endpoint":"e","default_model":"m",
                "max_retry":3},"a":{"headers":{"y":"2","x":"1"},"type":"t","endpoint":"e",
                "default_model":"m","timeout":30.0}}}"#,
        );
        assert!(a == b);
        assert_eq!(digest(&a), digest(&b));
        for other in [
            r#"{"backends":{"a":{"type":"t","endpoint":"e","default_model":"m"}}}"#,
            r#"{"backends":{"a":{"type":"t","endpoint":"e","default_model":"m","timeout":30,
                "headers":{"x":"1","y":"2"}},"b":{"type":"t","endpoint":"e","default_model":"m"}},
                "capture_logs":false}"#,
            r#"{"backends":{"a":{"type":"t","endpoint":"e","default_model":"m","timeout":30.5,
                "headers":{"x":"1","y":"2"}},"b":{"type":"t","endpoint":"e","default_model":"m"}}}"#,
            r#"{"backends":{"a":{"type":"t","endpoint":"e","default_model":"m","timeout":30,
                "headers":{"x":"1","y":"3"}},"b":{"type":"t","endpoint":"e","default_model":"m"}}}"#,
            r#"{"backends":{"a":{"type":"t","endpoint":"e","default_model":"m","timeout":30,
                "headers":{"xy":"1","":"2"}},"b":{"type":"t","endpoint":"e","default_model":"m"}}}"#,
        ] {
            let o = read(other);
            assert!(o != a);
            assert_ne!(digest(&o), digest(&a), "{other}");
        }
    }
}
