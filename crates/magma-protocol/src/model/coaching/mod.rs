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

/// The parsing, validating and writing entry points every coaching
/// document has: `from_slice`, `from_json`, `to_json_string`, `FromStr`,
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
