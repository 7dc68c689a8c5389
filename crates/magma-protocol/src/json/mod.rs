//! Lossless JSON values: [`Json`], [`Number`], the ordered [`Map`] and
//! [`Object`], and where something is in a document ([`Location`],
//! [`Segment`], [`Position`]).
//!
//! These are the types of the free-form positions of the protocol
//! (`memory`, `attributes`, `tools`, `extra_keys`, `arguments`,
//! `internal_steps`): numbers keep their lexeme and objects their key order,
//! so a document read and written back says the same thing. They are also
//! re-exported at the crate root: `magma_protocol::Json` is
//! `magma_protocol::json::Json`.
//!
//! ```
//! use magma_protocol::json::{Json, Object};
//!
//! let v = Json::from_slice(br#"{"n": 123456789012345678901234567890, "f": 1.0}"#).unwrap();
//! let o: &Object = v.as_object().unwrap();
//! assert_eq!(o.get("n").unwrap().to_json_string(), "123456789012345678901234567890");
//! assert_eq!(v.to_json_string(), r#"{"n":123456789012345678901234567890,"f":1.0}"#);
//! ```

// The JSON layer of the crate: values (`value.rs`, `path.rs`), lexing
// (`lex.rs`), the parser with its own syntax error and the `Shape` a
// document gives it (`parse.rs`), the free-form scan (`scan.rs`), the
// key filter of kept objects (`key_filter.rs`) and the key set of large
// ones (`key_set.rs`), the normal text of free-form objects with repeated
// or escaped keys (`normal.rs`), the count of a top-level array's containers
// (`count.rs`), the cursor of direct
// readers (`cursor.rs`), the writer (`write.rs`), the free-form checks
// (`check.rs`) and the serde impls of the values (`serde.rs`). It imports
// nothing from the rest of the crate (`tests/it/tidy.rs` keeps it so): the
// limits it applies are given by its callers, and documents tell it where
// their free-form objects are. It is ready to become a crate of its own.

mod check;
mod count;
mod cursor;
mod kept;
mod kept_text;
mod key_filter;
mod key_set;
mod lex;
mod normal;
pub(crate) mod parse;
mod path;
mod scan;
pub(crate) mod serde;
mod shared_text;
mod value;
mod value_conv;
pub(crate) mod write;

pub use parse::Position;
pub use path::{Location, Segment};
pub use value::{Json, Map, Number, Object};
pub use value_conv::{ValueConversionError, ValueLocation};

pub(crate) use check::{FreeFormProblem, check_free_form};
pub(crate) use count::nth_container;
pub(crate) use cursor::Cursor;
pub(crate) use key_filter::KeyFilter;
// The exact path without the error cap: the direct readers' tests compare
// against it; every `from_slice` goes through `parse_shaped_counted`.
pub(crate) use kept::{KeptInputs, Parts};
pub(crate) use lex::Limits;
#[cfg(test)]
pub(crate) use parse::parse_shaped;
pub(crate) use parse::{Counted, Shape, SyntaxError, duplicate_keys, parse, parse_shaped_counted};
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
