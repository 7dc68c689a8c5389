// The README's example runs an agent with `cli::run`; without that feature
// the crate documentation is the summary below.
#![cfg_attr(feature = "cli", doc = include_str!("../README.md"))]
#![cfg_attr(
    not(feature = "cli"),
    doc = "A server for MAGMA agents (Agent HTTP Contract, protocol 2.0): implement [`Agent`], \
           then [`Server::bind`] and [`Server::serve`]. An agent with a coach also serves GEN's \
           coaching extension: implement [`Agent::coaching_kinds`] and [`Agent::coach`]."
)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod access;
mod agent;
mod body;
mod candidate_errors;
mod coaching;
mod coaching_routes;
mod config;
mod context;
pub mod demo;
mod error;
pub mod export;
mod forwarded;
mod get_routes;
mod handler;
mod inference;
mod limits;
mod reply;
mod routes;
mod server;
mod service;
mod state;
#[cfg(feature = "metrics")]
mod telemetry;
mod unwind;

#[cfg(feature = "cli")]
#[cfg_attr(docsrs, doc(cfg(feature = "cli")))]
pub mod cli;

#[cfg(feature = "tls")]
mod crypto;
#[cfg(feature = "tls")]
mod tls;

pub use agent::{Agent, Readiness, ReadyFlag, Rejection};
pub use coaching::{CoachError, CoachingContext};
pub use config::Config;
pub use context::RequestContext;
pub use error::Error;
pub use export::Exporter;
pub use forwarded::{TrustedProxy, TrustedProxyError};
pub use server::Server;
pub use service::MagmaService;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use telemetry::Metrics;
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub use tls::{SelfSignedFiles, TlsConfig, TlsError};

/// The wire types, re-exported so that an agent needs only this crate.
pub use magma_protocol;
pub use magma_protocol::{
    AgentDecision, AgentError, AgentInfo, AgentInput, AgentOutput, AgentRequest, AgentResponse,
    Candidate, CandidateStatus, InlineVec, InstructionType, Json, NonEmptyString, Object, Outcome,
    ToolCall, json,
};

/// The agent author's guide, `docs/server.md`: its Rust blocks compile (and
/// run, unless `no_run`) as doctests of this crate, so the guide cannot drift
/// from the API. It is written for the default features (its agents run with
/// `cli::run`), as the README is.
#[cfg(all(doctest, feature = "cli"))]
#[doc = include_str!("../../../docs/server.md")]
struct ServerGuide;
