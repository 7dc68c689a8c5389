//! The models of `magma_core.protocol.agent` 2.0.1, one file per document.
//!
//! Each file owns its types, the [`Shape`](crate::json::Shape) the parser
//! follows for it (where its free-form objects are), its validator (built
//! from `crate::validate`), its direct writer and its serde impls, so that
//! "two ways to write, one output" lives on one screen. A file uses another
//! model only through the types re-exported here, never through the other
//! file's private items (`tests/it/tidy.rs` checks this). Adding a model is
//! its file plus a `mod` line and a `pub use` line below.

pub mod coaching;
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
