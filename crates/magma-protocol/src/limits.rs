//! Every depth and size limit of the crate, named once.
//!
//! The JSON layer applies the limits it is given ([`READ`]); the validation
//! engine and the schemas use the same constants.

use crate::json::Limits;

/// The deepest container nesting `json.loads` accepts in the reference
/// (CPython 3.12: 1497 nested arrays or objects); deeper is `json_invalid`.
pub const MAX_JSON_DEPTH: usize = 1497;

/// How deep a free-form value may nest below a `dict[str, JsonValue]` key in
/// the reference (pydantic-core's recursion guard): a value inside more than
/// 254 containers is refused.
pub const MAX_FREE_FORM_DEPTH: usize = 254;

/// The most problems one validation keeps: the first ones, in the order
/// (and with the content) the reference reports them. Further problems are
/// counted (the error's `omitted` count) but not kept, so that
/// a hostile document (`[0, 0, ...]` where objects belong) cannot make its
/// error list, or a `422` body, grow with its length.
pub const MAX_REPORTED_ERRORS: usize = 100;

/// What every reading of a document applies.
pub(crate) const READ: Limits = Limits {
    depth: MAX_JSON_DEPTH,
    free_form_depth: MAX_FREE_FORM_DEPTH,
};

#[cfg(test)]
mod tests {
    #[test]
    fn the_json_layer_tests_use_these_limits() {
        assert_eq!(crate::json::TEST_LIMITS, super::READ);
    }
}
