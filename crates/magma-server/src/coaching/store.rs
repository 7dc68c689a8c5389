//! The coaching session store the routes talk to: the in-process registry
//! ([`Sessions`]) by default, or Redis shared by every replica (feature
//! `redis`, [`RedisSessions`](super::redis_sessions::RedisSessions)).
//!
//! Both keep the same semantics for one replica (magma-core's
//! `coaching_sessions`); what the shared store adds is said in
//! `redis_store.rs`. The agent is reached through [`SessionAgent`]: the
//! store decides *when* a replica prepares or releases its own state for a
//! session (the backend clients `open_coaching_session` builds), the
//! routes decide *how* (panics caught, agents without a coach skipped).

use std::sync::Arc;
use std::time::{Duration, Instant};

use magma_protocol::coaching::CoachingSessionConfig;

use super::{CoachError, Held, OpenError, Sessions};
use crate::Config;

/// What the store asks of the agent, once per session on each replica that
/// serves it: prepare (`open_coaching_session`) and release
/// (`close_coaching_session`).
pub(crate) trait SessionAgent: Sync {
    /// Prepares this replica's state for `run_id`; `Err` refuses it.
    fn open(
        &self,
        run_id: Arc<str>,
        config: Arc<CoachingSessionConfig>,
    ) -> impl Future<Output = Result<(), CoachError>> + Send;

    /// Releases this replica's state for `run_id`.
    fn close(
        &self,
        run_id: Arc<str>,
        config: Arc<CoachingSessionConfig>,
    ) -> impl Future<Output = ()> + Send;
}

/// Why the shared store could not answer (Redis unreachable, or answering
/// errors): the route answers `503` with this text in its `detail`. Never
/// holds a credential.
#[derive(Debug, Clone)]
pub(crate) struct Unavailable(pub(crate) String);

impl From<String> for Unavailable {
    fn from(why: String) -> Self {
        Unavailable(why)
    }
}

/// Why a request could not hold its session.
#[derive(Debug)]
#[cfg_attr(
    not(feature = "redis"),
    allow(dead_code, reason = "the in-process store always holds")
)]
pub(crate) enum HoldError {
    /// The store cannot be reached: `503`.
    Unavailable(Unavailable),
    /// This replica's agent refused to prepare the session from its stored
    /// configuration: `503`, as for a refused `PUT`.
    Refused(CoachError),
    /// This replica's copy of the session does not fit in what it may hold
    /// (`max_coaching_session_bytes`): `503`.
    OverBudget {
        /// This session's bytes.
        needed: u64,
        /// What the replica holds for sessions in use.
        held: u64,
        /// The budget.
        budget: u64,
    },
}

/// A session closed for going without a request for the idle timeout.
#[derive(Debug)]
pub(crate) struct ExpiredReport {
    pub(crate) run_id: Arc<str>,
    pub(crate) idle: Duration,
}

/// What a sweep found: sessions that expired (to log and count) and the
/// local state of sessions this replica must release (to hand to the agent).
#[derive(Debug, Default)]
pub(crate) struct Swept {
    pub(crate) expired: Vec<ExpiredReport>,
    pub(crate) release: Vec<(Arc<str>, Arc<CoachingSessionConfig>)>,
}

/// The store of a server: chosen once, from its [`Config`].
#[derive(Debug)]
pub(crate) enum Store {
    /// This process's memory (the default).
    Local(Sessions),
    /// Redis, shared by every replica configured with it.
    #[cfg(feature = "redis")]
    Redis(super::redis_sessions::RedisSessions),
}

/// A request's hold on its session, released when dropped.
#[derive(Debug)]
pub(crate) enum Hold<'a> {
    Local(Held<'a>),
    #[cfg(feature = "redis")]
    Redis(super::redis_sessions::RedisHeld<'a>),
}

impl Hold<'_> {
    /// The session's configuration.
    pub(crate) fn config(&self) -> &Arc<CoachingSessionConfig> {
        match self {
            Hold::Local(h) => &h.config,
            #[cfg(feature = "redis")]
            Hold::Redis(h) => h.config(),
        }
    }

    /// The run id, shared with the session.
    pub(crate) fn run_id(&self) -> &Arc<str> {
        match self {
            Hold::Local(h) => &h.session_run_id,
            #[cfg(feature = "redis")]
            Hold::Redis(h) => h.run_id(),
        }
    }
}

impl Store {
    /// The store `config` asks for, with its limits.
    pub(crate) fn new(config: &Config) -> Store {
        #[cfg(feature = "redis")]
        if let Some(redis) = &config.coaching_store {
            return Store::Redis(super::redis_sessions::RedisSessions::new(
                redis.clone(),
                config.max_coaching_sessions,
                config.max_coaching_session_bytes,
                config.coaching_session_idle_timeout,
            ));
        }
        Store::Local(Sessions::new(
            config.max_coaching_sessions,
            config.max_coaching_session_bytes,
            config.coaching_session_idle_timeout,
        ))
    }

    /// Opens `run_id` with `config` (`PUT`): `Ok` for a new session and for
    /// the same configuration again.
    pub(crate) async fn open(
        &self,
        run_id: &str,
        config: CoachingSessionConfig,
        agent: &impl SessionAgent,
    ) -> Result<(), OpenError> {
        match self {
            Store::Local(s) => {
                s.open(run_id, config, |id, config| agent.open(id, config))
                    .await
            }
            #[cfg(feature = "redis")]
            Store::Redis(s) => s.open(run_id, config, agent).await,
        }
    }

    /// A hold on the open session `run_id` (`POST`), or `None` when it is
    /// unknown or closing (`404`).
    pub(crate) async fn hold(
        &self,
        run_id: &str,
        agent: &impl SessionAgent,
    ) -> Result<Option<Hold<'_>>, HoldError> {
        match self {
            Store::Local(s) => {
                let _ = agent;
                Ok(s.hold(run_id).map(Hold::Local))
            }
            #[cfg(feature = "redis")]
            Store::Redis(s) => Ok(s.hold(run_id, agent).await?.map(Hold::Redis)),
        }
    }

    /// Closes `run_id` (`DELETE`) once its requests in flight are done.
    pub(crate) async fn close(
        &self,
        run_id: &str,
        agent: &impl SessionAgent,
    ) -> Result<(), Unavailable> {
        match self {
            Store::Local(s) => {
                s.close(run_id, |id, config| agent.close(id, config)).await;
                Ok(())
            }
            #[cfg(feature = "redis")]
            Store::Redis(s) => s.close(run_id, agent).await,
        }
    }

    /// Closes the sessions idle for the idle timeout (and, with Redis,
    /// finds the local state of sessions closed elsewhere).
    pub(crate) async fn sweep(&self, now: Instant) -> Swept {
        match self {
            Store::Local(s) => {
                let mut swept = Swept::default();
                for e in s.take_expired(now) {
                    swept.expired.push(ExpiredReport {
                        run_id: Arc::clone(&e.run_id),
                        idle: e.idle,
                    });
                    swept.release.push((e.run_id, e.config));
                }
                swept
            }
            #[cfg(feature = "redis")]
            Store::Redis(s) => s.sweep(now).await,
        }
    }

    /// How often the server sweeps; `None`: never.
    pub(crate) fn sweep_period(&self) -> Option<Duration> {
        match self {
            Store::Local(s) => s.sweep_period(),
            #[cfg(feature = "redis")]
            Store::Redis(s) => Some(s.sweep_period()),
        }
    }
}
