//! The JSON layer: lossless values and everything that reads and writes
//! them, with no knowledge of the protocol.
//!
//! - [`Json`], [`Number`], [`Map`] and [`Object`] (`value.rs`): values that
//!   keep everything a document said (number lexemes, key order; an object
//!   read from a free-form position may be kept as its validated text);
//! - [`Location`] and [`Segment`] (`path.rs`): where something is in a
//!   document;
//! - lexing (`lex.rs`), the parser (`parse.rs`, with [`Position`] and its
//!   own syntax error), the free-form scanner (`scan.rs`), the key filter of
//!   kept objects (`key_filter.rs`), the cursor of direct readers
//!   (`cursor.rs`), the writer (`write.rs`), the free-form checks
//!   (`check.rs`) and the `serde` impls of the values (`serde.rs`).
//!
//! This module imports nothing from the rest of the crate (a test in
//! `tests/it/tidy.rs` keeps it so): the limits it applies are given by its
//! callers, and documents tell it their [`Shape`](parse::Shape).
//!
//! The types are also at the crate root (`magma_protocol::Json` is
//! `magma_protocol::json::Json`).

mod check;
mod cursor;
mod key_filter;
mod lex;
pub(crate) mod parse;
mod path;
mod scan;
mod serde;
mod value;
pub(crate) mod write;

pub use parse::Position;
pub use path::{Location, Segment};
pub use value::{Json, Map, Number, Object};

pub(crate) use check::{FreeFormProblem, check_free_form};
pub(crate) use cursor::Cursor;
pub(crate) use key_filter::KeyFilter;
pub(crate) use parse::{Limits, Shape, SyntaxError, duplicate_keys, parse, parse_shaped};
pub(crate) use path::segment_json;
pub(crate) use write::{WriteJson, to_string, to_value};

#[cfg(test)]
pub(crate) use write::testing;

/// The limits the crate applies (CPython's 1497 levels, pydantic's 254),
/// for the tests of this layer, which may not import the crate's
/// `limits.rs`; a test there checks that the two agree.
#[cfg(test)]
pub(crate) const TEST_LIMITS: Limits = Limits {
    depth: 1497,
    free_form_depth: 254,
};
