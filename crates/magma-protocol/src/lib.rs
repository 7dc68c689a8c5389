#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Layers, each using only those listed before it (`tests/it/tidy.rs`):
// the JSON layer, the limits, errors, the validation engine, the models,
// then what is built on the models, then the registry of documents over
// all of them.
pub mod documents;
mod env;
mod error;
mod exchange;
pub mod json;
#[cfg(feature = "schema")]
mod json_schema;
mod limits;
mod model;
pub mod routes;
#[cfg(feature = "schema")]
#[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
pub mod schema;
pub mod tools;
mod validate;

pub use env::{EnvFeedback, EnvFeedbackError, ToolOutcome};
pub use error::{Error, ErrorKind, Issue};
#[allow(deprecated)]
pub use exchange::check_exchange;
pub use exchange::{
    AssembleError, Candidate, CandidateKey, CandidateMismatch, ExchangeError, OutputWriter,
    validate_exchange,
};
pub use json::{Json, Location, Map, Number, Object, Position, Segment};
pub use json::{ValueConversionError, ValueLocation};
pub use limits::{MAX_FREE_FORM_DEPTH, MAX_JSON_DEPTH, MAX_REPORTED_ERRORS};
pub use model::*;
pub use validate::{DuplicateKeys, EmptyStringError, NonEmptyString, duplicate_keys};
