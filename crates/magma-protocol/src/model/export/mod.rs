//! Local dataset export, the models of `magma_core.protocol.agent_export`
//! and `magma_core.protocol.graph` 2.0.1, one file per document:
//!
//! - the records GEN saves for every situation of a generation graph:
//!   [`SituationRecord`] (`situation.rs`), made of [`CandidateRecord`]s and
//!   their [`SituationLink`]s (`candidate.rs`);
//! - what GEN's export (`magma_gen.launch_export`) hands an agent's
//!   exporter: an [`ExportExample`] per selected candidate (`example.rs`),
//!   and what the exporter gives back: an [`ExportResult`] per example with
//!   its [`ExportRecord`]s (`result.rs`).
//!
//! Export is not an HTTP capability: GEN discovers exporters through the
//! Python entry point group `magma.export.gen`. These types are what a
//! Rust exporter reads and writes (see `magma_server::export`).
//!
//! Every document type parses with `from_slice`, `from_json`,
//! [`FromStr`](std::str::FromStr) and serde's `Deserialize` (which validate
//! alike), and writes with `to_json_string` and serde's `Serialize` (which
//! give the same bytes). Free-form values (`internal_steps`, `execution`,
//! `score`, `coaching`, `coaching_source`, `data`) are kept exactly as read.
//!
//! ```
//! use magma_protocol::export::{ExportExample, ExportRecord, ExportResult, ExportStatus};
//! use magma_protocol::Object;
//!
//! let example = ExportExample::from_slice(br#"{
//!     "example_id": "3:7",
//!     "input": {"id": 3, "instruction": {"type": "user", "content": "Press sw0."}},
//!     "candidate": {"id": 7, "parent_id": null, "stage_id": 0, "kind": "agent",
//!                   "response_status": "completed", "output": {"say": "ok"},
//!                   "status": "finished", "execution_finished": true, "origin": "model"}
//! }"#).unwrap();
//! assert_eq!(example.candidate.decision().unwrap().say, "ok");
//!
//! let mut data = Object::new();
//! data.insert("prompt", "Press sw0.".into());
//! let record = ExportRecord::new("3:7:0", "chat", data).unwrap();
//! let result = ExportResult::exported(&example.example_id, vec![record]).unwrap();
//! assert_eq!(result.status(), ExportStatus::Exported);
//! assert!(ExportResult::error("3:7", "").is_err());
//! ```

mod candidate;
mod example;
mod result;
mod situation;

pub use candidate::{CandidateKind, CandidateOrigin, CandidateRecord, LinkKind, SituationLink};
pub use example::ExportExample;
pub use result::{ExportRecord, ExportResult, ExportStatus};
pub use situation::SituationRecord;
