//! The models of `magma_core.protocol.agent` 2.0.1, one file per document.
//!
//! Each file owns its types, the [`Shape`](crate::json::Shape) the parser
//! follows for it (where its free-form objects are), its validator (built
//! from `crate::validate`), its direct writer and its serde impls, so that
//! "two ways to write, one output" lives on one screen. A file uses another
//! model only through the types re-exported here, never through the other
//! file's private items (`tests/it/tidy.rs` checks this). Adding a model is
//! its file plus a `mod` line and a `pub use` line below.

/// The parsing, validating and writing entry points every coaching
/// and export document has: `from_slice`, `from_json`, `to_json_string`, `FromStr`,
/// serde's `Serialize` (through the direct writer, so both give the same
/// bytes) and `Deserialize` (validating). With a fourth argument, a direct
/// reader (`fn(&[u8]) -> Option<Self>`, `None` for anything unusual) that
/// `from_slice` tries before the exact path.
macro_rules! document {
    ($ty:ident, $shape:expr, $validator:expr) => {
        document!($ty, $shape, $validator, |_: &[u8]| -> Option<$ty> { None });
    };
    ($ty:ident, $shape:expr, $validator:expr, $direct:expr) => {
        impl $ty {
            /// Parses and validates a body, exactly as the reference would.
            pub fn from_slice(bytes: &[u8]) -> Result<Self, $crate::error::Error> {
                if let Some(value) = ($direct)(bytes) {
                    return Ok(value);
                }
                // As every document since issue 20: the first
                // `MAX_REPORTED_ERRORS` scalars where objects belong are
                // kept, the rest only counted.
                let (value, counted) = $crate::json::parse_shaped_counted(
                    bytes,
                    $shape,
                    $crate::limits::READ,
                    $crate::limits::MAX_REPORTED_ERRORS,
                )
                .map_err(|e| $crate::error::Error::from(e).with_model(stringify!($ty)))?;
                $crate::validate::Validation::document_counted(
                    stringify!($ty),
                    value,
                    counted,
                    $validator,
                )
            }

            /// Validates an already parsed value.
            pub fn from_json(value: $crate::json::Json) -> Result<Self, $crate::error::Error> {
                $crate::validate::Validation::document(stringify!($ty), value, $validator)
            }

            /// Compact JSON, every field emitted in the reference's order,
            /// free-form values exactly as read.
            pub fn to_json_string(&self) -> String {
                $crate::json::to_string(self)
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::error::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::from_slice(s.as_bytes())
            }
        }

        impl serde::Serialize for $ty {
            /// The bytes of `to_json_string` for serde_json's serializers
            /// (kept free-form text included); the same value as a tree for
            /// the others.
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                if $crate::json::serde::is_serde_json::<S>() {
                    $crate::json::serde::raw(&$crate::json::to_string(self), s)
                } else {
                    serde::Serialize::serialize(
                        &$crate::json::to_value(self, $crate::limits::READ),
                        s,
                    )
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            /// Deserializes any value and validates it as the reference does.
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                let value = <$crate::json::Json as serde::Deserialize>::deserialize(d)?;
                $ty::from_json(value).map_err(serde::de::Error::custom)
            }
        }
    };
}

pub mod coaching;
pub mod export;
mod health;
mod info;
mod request;
mod response;
#[cfg(test)]
mod tests;

pub use coaching::{
    CoachingBackendConfig, CoachingDiagnosis, CoachingError, CoachingKind, CoachingLog,
    CoachingPayload, CoachingProposal, CoachingSessionConfig, CoachingStage, CoachingStatus,
    CoachingStep, CustomPayload, InternalStep, InternalStepOrigin, ReinjectionPoint, ReplaceSay,
    SpecializedCoachingRequest, SpecializedCoachingResponse,
};
pub use export::{
    CandidateKind, CandidateOrigin, CandidateRecord, ExportExample, ExportRecord, ExportResult,
    ExportStatus, LinkKind, SituationLink, SituationRecord,
};
pub use health::AgentHealth;
pub use info::{AgentInfo, Capabilities, IncompatibleAgent, PROTOCOL_VERSION};
pub use request::{AgentInput, AgentInstruction, AgentRequest, InstructionType};
pub use response::{
    AgentDecision, AgentError, AgentOutput, AgentResponse, CandidateStatus, Outcome, ToolCall,
};
// How the parser reads these models where another document holds them (a
// coaching step holds an input, a decision and an error), and the fields
// its direct reader numbers.
pub(crate) use request::INPUT_SHAPE;
pub(crate) use response::{
    AGENT_ERROR_FIELDS, DECISION_FIELDS, DECISION_SHAPE, ERROR_SHAPE as AGENT_ERROR_SHAPE,
    TOOL_CALL_FIELDS,
};
// A candidate written from its parts: an agent's, straight into an answer
// (`exchange.rs`).
pub(crate) use response::{OutputId, OutputParts, output_size_hint, write_output};
