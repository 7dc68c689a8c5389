//! The coaching extension: the session registry behind
//! `PUT`/`DELETE /v1/coaching/sessions/{run_id}`, and what a coach sees of
//! its session while it answers `POST /v1/coaching`.
//!
//! Semantics of `magma_core.workers.coaching_sessions` 2.0.1: a session is
//! created once per run id; the same configuration again is accepted, a
//! different one (or any while the session closes) is a conflict; a request
//! holds its session open; closing marks the session, waits for the
//! requests in flight, lets the agent release it, then removes it.
//!
//! Beyond magma-core, the registry is bounded in count and in bytes (each
//! session counts its configuration's compact JSON length and its run id),
//! and a session that goes without a request for the idle timeout is closed
//! as a `DELETE` would close it (a crashed run never sends one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use magma_protocol::coaching::{CoachingKind, CoachingLog, CoachingSessionConfig};
use tokio::sync::Notify;

#[cfg(feature = "redis")]
pub(crate) mod redis_sessions;
pub(crate) mod store;

/// The error type a coach returns: any error; its text becomes the
/// `reason` of a `status: "error"` response (or the server log, for a
/// refused session).
pub type CoachError = Box<dyn std::error::Error + Send + Sync>;

/// What a coach knows about the request it answers: its session's run id
/// and configuration (the LLM backends GEN hands over), and a log that the
/// response carries when the session asked for it (`capture_logs`).
///
/// Passed to [`Agent::coach`](crate::Agent::coach).
#[derive(Debug)]
pub struct CoachingContext {
    run_id: Arc<str>,
    config: Arc<CoachingSessionConfig>,
    kind: CoachingKind,
    captured: Mutex<Vec<CoachingLog>>,
}

impl CoachingContext {
    pub(crate) fn new(
        run_id: Arc<str>,
        config: Arc<CoachingSessionConfig>,
        kind: CoachingKind,
    ) -> CoachingContext {
        CoachingContext {
            run_id,
            config,
            kind,
            captured: Mutex::new(Vec::new()),
        }
    }

    /// The run id the session was opened with (percent-decoded).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The session's configuration: its backends and `capture_logs`.
    pub fn config(&self) -> &CoachingSessionConfig {
        &self.config
    }

    /// Records a log of this request (e.g. a prompt sent to a backend and
    /// its completion), as magma-core's LLM worker records its calls. When
    /// the session has `capture_logs: true` the response carries the
    /// captured logs first, before the coach's own `logs`, with
    /// `coaching_type` the request's kind; otherwise the log is dropped.
    pub fn log(&self, content: impl Into<String>) {
        if self.config.capture_logs() {
            let log = CoachingLog::new(self.kind.as_str(), content.into());
            if let Ok(log) = log {
                self.captured
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(log);
            }
        }
    }

    /// The logs captured so far, taken out.
    pub(crate) fn take_captured(&self) -> Vec<CoachingLog> {
        std::mem::take(&mut *self.captured.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether the session captures logs.
    pub(crate) fn captures(&self) -> bool {
        self.config.capture_logs()
    }
}

/// Why a session could not be opened.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// Another configuration, or the session is closing: `409`.
    Conflict,
    /// The agent refused it: `503`.
    Refused(CoachError),
    /// As many sessions as the limit (carried) are open: `503`.
    Full(usize),
    /// The session's bytes do not fit in what the open sessions leave of
    /// the byte budget: `503`.
    OverBudget {
        /// This session's bytes.
        needed: u64,
        /// What the open sessions hold.
        held: u64,
        /// The budget (`max_coaching_session_bytes`).
        budget: u64,
    },
    /// The shared store cannot be reached: `503`.
    #[cfg_attr(
        not(feature = "redis"),
        allow(dead_code, reason = "the in-process store is always reachable")
    )]
    Unavailable(store::Unavailable),
}

/// One open session.
#[derive(Debug)]
struct Session {
    /// Tells sessions of the same run id apart across close and reopen.
    generation: u64,
    /// The configuration's compact JSON: a parsed configuration costs
    /// about twice its text, and a coach needs it once per request.
    config: Arc<str>,
    run_id: Arc<str>,
    active: usize,
    closing: bool,
    /// What the session counts against the byte budget.
    bytes: u64,
    /// When its last request ended (or it was opened).
    last_used: Instant,
}

#[derive(Debug, Default)]
struct State {
    sessions: HashMap<String, Session>,
    next_generation: u64,
    /// The sum of the sessions' `bytes`.
    bytes: u64,
}

/// A session closed for being idle: the agent is told, as for a `DELETE`.
#[derive(Debug)]
pub(crate) struct Expired {
    pub(crate) run_id: Arc<str>,
    pub(crate) config: Arc<CoachingSessionConfig>,
    pub(crate) idle: Duration,
}

/// What a session counts against the byte budget: its configuration's
/// compact JSON (what the server keeps of it) and its run id, twice (the
/// map's key and the shared id).
pub(crate) fn session_bytes(run_id: &str, config_text: &str) -> u64 {
    (config_text.len() + 2 * run_id.len()) as u64
}

/// The configuration of a session back from the compact text the registry
/// keeps. It always reads back (the text is the server's own writing of a
/// valid configuration, and configurations round-trip exactly); if it ever
/// did not, the session is treated as unknown and the fault logged.
pub(crate) fn reread(run_id: &str, text: &str) -> Option<Arc<CoachingSessionConfig>> {
    match CoachingSessionConfig::from_slice(text.as_bytes()) {
        Ok(config) => Some(Arc::new(config)),
        Err(e) => {
            tracing::error!(run_id, error = %e, "a kept coaching session configuration does not read back");
            None
        }
    }
}

/// The server's coaching sessions.
#[derive(Debug)]
pub(crate) struct Sessions {
    /// Sessions open at once, at most (`--max-coaching-sessions`).
    max: usize,
    /// Bytes all sessions may hold (`--max-coaching-session-bytes`).
    max_bytes: u64,
    /// Closed when idle this long (`--coaching-session-idle-secs`).
    idle: Option<Duration>,
    state: Mutex<State>,
    /// Woken on every change of a session's `active` count or presence.
    changed: Notify,
    /// Serializes opening, so that the agent is asked once per run id.
    opening: tokio::sync::Mutex<()>,
}

/// A request's hold on its session: the session stays open (its `DELETE`
/// waits) until this is dropped, also when the request is abandoned.
#[derive(Debug)]
pub(crate) struct Held<'a> {
    sessions: &'a Sessions,
    run_id: String,
    generation: u64,
    pub(crate) config: Arc<CoachingSessionConfig>,
    pub(crate) session_run_id: Arc<str>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.sessions.release(&self.run_id, self.generation);
    }
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::new(
            crate::Config::DEFAULT_MAX_COACHING_SESSIONS,
            crate::Config::DEFAULT_MAX_COACHING_SESSION_BYTES,
            Some(crate::Config::DEFAULT_COACHING_SESSION_IDLE_TIMEOUT),
        )
    }
}

impl Sessions {
    pub(crate) fn new(max: usize, max_bytes: u64, idle: Option<Duration>) -> Sessions {
        Sessions {
            max,
            max_bytes,
            idle,
            state: Mutex::default(),
            changed: Notify::new(),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens `run_id` with `config`, asking `open` (the agent) first when
    /// the session is new. `Ok` also when the same configuration is open.
    pub(crate) async fn open<F, Fut>(
        &self,
        run_id: &str,
        config: CoachingSessionConfig,
        open: F,
    ) -> Result<(), OpenError>
    where
        F: FnOnce(Arc<str>, Arc<CoachingSessionConfig>) -> Fut,
        Fut: Future<Output = Result<(), CoachError>>,
    {
        let _opening = self.opening.lock().await;
        let existing = self
            .lock()
            .sessions
            .get(run_id)
            .map(|s| (s.closing, Arc::clone(&s.config)));
        if let Some((closing, text)) = existing {
            // The reference's `==` on configurations (backends in any order,
            // `30` and `30.0` alike), not a comparison of texts.
            let same = !closing && reread(run_id, &text).is_some_and(|kept| *kept == config);
            if !same {
                return Err(OpenError::Conflict);
            }
            if let Some(s) = self.lock().sessions.get_mut(run_id) {
                s.last_used = Instant::now();
            }
            return Ok(());
        }
        if self.lock().sessions.len() >= self.max {
            return Err(OpenError::Full(self.max));
        }
        let text: Arc<str> = Arc::from(config.to_json_string());
        let needed = session_bytes(run_id, &text);
        let held = self.lock().bytes;
        if held.saturating_add(needed) > self.max_bytes {
            return Err(OpenError::OverBudget {
                needed,
                held,
                budget: self.max_bytes,
            });
        }
        let config = Arc::new(config);
        let shared_id: Arc<str> = Arc::from(run_id);
        open(Arc::clone(&shared_id), Arc::clone(&config))
            .await
            .map_err(OpenError::Refused)?;
        let mut state = self.lock();
        let generation = state.next_generation;
        state.next_generation += 1;
        state.bytes += needed;
        state.sessions.insert(
            run_id.to_owned(),
            Session {
                generation,
                config: text,
                run_id: shared_id,
                active: 0,
                closing: false,
                bytes: needed,
                last_used: Instant::now(),
            },
        );
        Ok(())
    }

    /// Removes the sessions idle for the idle timeout at `now` (no request
    /// in flight, not closing) and returns them, for the agent to release.
    pub(crate) fn take_expired(&self, now: Instant) -> Vec<Expired> {
        let Some(idle) = self.idle else {
            return Vec::new();
        };
        let mut state = self.lock();
        let gone: Vec<String> = state
            .sessions
            .iter()
            .filter(|(_, s)| {
                s.active == 0 && !s.closing && now.saturating_duration_since(s.last_used) >= idle
            })
            .map(|(id, _)| id.clone())
            .collect();
        let mut out = Vec::with_capacity(gone.len());
        for id in gone {
            if let Some(s) = state.sessions.remove(&id) {
                state.bytes -= s.bytes;
                out.push((
                    s.run_id,
                    s.config,
                    now.saturating_duration_since(s.last_used),
                ));
            }
        }
        drop(state);
        let out: Vec<Expired> = out
            .into_iter()
            .filter_map(|(run_id, text, idle)| {
                let config = reread(&run_id, &text)?;
                Some(Expired {
                    run_id,
                    config,
                    idle,
                })
            })
            .collect();
        if !out.is_empty() {
            self.changed.notify_waiters();
        }
        out
    }

    /// How often to look for idle sessions: a quarter of the idle timeout,
    /// between 1 s and 60 s; `None` without one.
    pub(crate) fn sweep_period(&self) -> Option<Duration> {
        self.idle
            .map(|idle| (idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(60)))
    }

    /// A hold on the open session `run_id`, or `None` when it is unknown
    /// or closing (`404`).
    pub(crate) fn hold(&self, run_id: &str) -> Option<Held<'_>> {
        let (generation, text, session_run_id) = {
            let mut state = self.lock();
            let s = state.sessions.get_mut(run_id).filter(|s| !s.closing)?;
            s.active += 1;
            (s.generation, Arc::clone(&s.config), Arc::clone(&s.run_id))
        };
        // Counted under the lock, so the session's DELETE waits from now on.
        let Some(config) = reread(run_id, &text) else {
            self.release(run_id, generation);
            return None;
        };
        Some(Held {
            sessions: self,
            run_id: run_id.to_owned(),
            generation,
            config,
            session_run_id,
        })
    }

    /// Gives back a request's count on its session (and marks it used).
    fn release(&self, run_id: &str, generation: u64) {
        let mut state = self.lock();
        if let Some(s) = state.sessions.get_mut(run_id)
            && s.generation == generation
        {
            s.active -= 1;
            s.last_used = Instant::now();
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// Waits until `done` holds for the state, re-checking after every change.
    async fn wait_until(&self, mut done: impl FnMut(&State) -> bool) {
        loop {
            let notified = self.changed.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before the check: a change right after it wakes us.
            notified.as_mut().enable();
            if done(&self.lock()) {
                return;
            }
            notified.await;
        }
    }

    /// Closes `run_id`: marks it closing, waits for its requests in flight,
    /// lets `close` (the agent) release it, removes it. Returns at once for
    /// an unknown run id; a second close waits for the first.
    pub(crate) async fn close<F, Fut>(&self, run_id: &str, close: F)
    where
        F: FnOnce(Arc<str>, Arc<CoachingSessionConfig>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let (generation, first, shared_id, config) = {
            // Taken briefly: an open in progress finishes first, so a DELETE
            // sent after a PUT's answer was lost still finds the session.
            let _opening = self.opening.lock().await;
            let mut state = self.lock();
            let Some(s) = state.sessions.get_mut(run_id) else {
                return;
            };
            let first = !s.closing;
            s.closing = true;
            (
                s.generation,
                first,
                Arc::clone(&s.run_id),
                Arc::clone(&s.config),
            )
        };
        if !first {
            self.wait_until(|state| this(state, run_id, generation).is_none())
                .await;
            return;
        }
        let config = reread(run_id, &config);
        // Whatever happens to this future now (a client that goes away), the
        // session must not stay closing forever: the removal is in a guard.
        let remove = Remove {
            sessions: self,
            run_id,
            generation,
        };
        self.wait_until(|state| this(state, run_id, generation).is_none_or(|s| s.active == 0))
            .await;
        if let Some(config) = config {
            close(shared_id, config).await;
        }
        drop(remove);
    }
}

/// The session `run_id` of `generation`, if it is still there.
fn this<'s>(state: &'s State, run_id: &str, generation: u64) -> Option<&'s Session> {
    state
        .sessions
        .get(run_id)
        .filter(|s| s.generation == generation)
}

/// Removes a closing session when dropped.
struct Remove<'a> {
    sessions: &'a Sessions,
    run_id: &'a str,
    generation: u64,
}

impl Drop for Remove<'_> {
    fn drop(&mut self) {
        let mut state = self.sessions.lock();
        if state
            .sessions
            .get(self.run_id)
            .is_some_and(|s| s.generation == self.generation)
            && let Some(s) = state.sessions.remove(self.run_id)
        {
            state.bytes -= s.bytes;
        }
        drop(state);
        self.sessions.changed.notify_waiters();
    }
}
