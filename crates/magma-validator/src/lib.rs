#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod batch;
mod check;
mod dupkeys;
mod explain;
mod lint;
pub mod probe;
pub mod proxy;
mod refusal;
pub mod render;
mod report;

pub use batch::{BatchStats, Verdict, line_verdict, reason_of, run_batch, verdict};
pub use check::{
    DocumentKind, UnknownKind, check_coaching_exchange, check_document, check_exchange,
    issue_findings,
};
pub use dupkeys::{
    DuplicateKey, DuplicateScan, MAX_DEPTH as DUPLICATE_SCAN_MAX_DEPTH, find_duplicate_keys,
};
pub use explain::Lint;
pub use report::{Finding, Report, Severity};

/// The wire types, whose errors the findings are made of.
pub use magma_protocol;
