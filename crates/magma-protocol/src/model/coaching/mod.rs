//! The coaching extension of the contract, the models of
//! `magma_core.protocol.agent_coaching` 2.0.1, one file per document:
//!
//! - `PUT /v1/coaching/sessions/{run_id}`: [`CoachingSessionConfig`] and its
//!   [`CoachingBackendConfig`]s (`session.rs`);
//! - `POST /v1/coaching`: [`SpecializedCoachingRequest`] (`request.rs`),
//!   made of [`CoachingStage`], [`CoachingError`], [`CoachingDiagnosis`],
//!   [`CoachingStep`]s and [`ReinjectionPoint`]s (`step.rs`), and its answer
//!   [`SpecializedCoachingResponse`] with its [`CoachingProposal`]s and
//!   [`CoachingLog`]s (`response.rs`);
//! - what a coached agent sees and returns on the inference wire: the
//!   payloads of `extra_keys.coaching` ([`CoachingPayload`], [`ReplaceSay`],
//!   `payload.rs`) and the [`InternalStep`] records of `internal_steps`
//!   (`internal_step.rs`).
//!
//! Every document type parses with `from_slice` (bytes, as the reference's
//! `json.loads` then `model_validate`), `from_json` (a parsed [`Json`]),
//! [`FromStr`](std::str::FromStr) and serde's `Deserialize` (which validate
//! alike), and writes with `to_json_string` and serde's `Serialize` (which
//! give the same bytes). Free-form values (`additional_info`, `execution`,
//! `details`, `extra_keys`, `input_elements`, `internal_steps`) are kept
//! exactly as read.
//!
//! ```
//! use magma_protocol::coaching::{CoachingProposal, SpecializedCoachingRequest, SpecializedCoachingResponse, ReplaceSay};
//!
//! let request = SpecializedCoachingRequest::from_slice(br#"{
//!     "run_id": "run-1", "request_id": "r1", "kind": "format",
//!     "stage": {"id": 0, "goal": "greet"},
//!     "target_step_id": 7,
//!     "trajectory": [{"id": 7, "input": {"id": 0, "instruction": {"type": "user", "content": "hi"}},
//!                     "output": {"say": ""}, "execution": {"diagnosable": true}}],
//!     "reinjection_points": [{"id": "p7", "input_step_id": 7}]
//! }"#).unwrap();
//! assert_eq!(request.target_step().id, 7);
//!
//! let fix = ReplaceSay::new("Hello!").unwrap();
//! let reply = SpecializedCoachingResponse::corrected(
//!     "r1",
//!     vec![CoachingProposal::new("p7", fix)],
//! ).unwrap();
//! reply.validate_request(&request).unwrap();
//! assert!(reply.to_json_string().contains(r#""status":"corrected""#));
//! ```
//!
//! [`Json`]: crate::Json

mod internal_step;
mod payload;
mod request;
mod response;
mod session;
mod step;

pub use internal_step::{InternalStep, InternalStepBuilder, InternalStepOrigin};
pub use payload::{CoachingPayload, CustomPayload, ReplaceSay};
pub use request::{CoachingKind, SpecializedCoachingRequest};
pub use response::{CoachingLog, CoachingProposal, CoachingStatus, SpecializedCoachingResponse};
pub use session::{CoachingBackendConfig, CoachingSessionConfig};
pub use step::{CoachingDiagnosis, CoachingError, CoachingStage, CoachingStep, ReinjectionPoint};
