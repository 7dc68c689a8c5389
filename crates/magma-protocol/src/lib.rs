#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod env;
mod error;
mod fast;
mod json;
mod model;
mod parse;
mod response;
#[cfg(feature = "schema")]
#[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
pub mod schema;
mod ser;
pub mod tools;
mod validate;
mod value_conv;
mod write;

pub use env::{EnvFeedback, EnvFeedbackError, ToolOutcome};
pub use error::{Error, ErrorKind, Issue, Location, Segment};
pub use json::{Json, Map, Number, Object};
pub use model::{
    AgentDecision, AgentError, AgentHealth, AgentInfo, AgentInput, AgentInstruction, AgentOutput,
    AgentRequest, AgentResponse, CandidateStatus, Capabilities, EmptyStringError,
    IncompatibleAgent, InstructionType, NonEmptyString, Outcome, PROTOCOL_VERSION, ToolCall,
};
pub use parse::{MAX_JSON_DEPTH, Position, duplicate_keys};
pub use response::{
    AssembleError, Candidate, CandidateKey, CandidateMismatch, ExchangeError, check_exchange,
};
pub use validate::MAX_FREE_FORM_DEPTH;
pub use value_conv::{ValueConversionError, ValueLocation};
