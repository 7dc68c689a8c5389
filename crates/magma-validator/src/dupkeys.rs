//! Finding keys that appear twice in one JSON object.
//!
//! magma-protocol, like the reference's `json.loads`, keeps the last value
//! of a repeated key without a word. [`magma_protocol::duplicate_keys`]
//! reads the document the same way, without building it, and says where
//! each repeat is (the first [`magma_protocol::MAX_REPORTED_ERRORS`], the
//! others counted); this module groups them per object and key for the
//! `duplicate_key` lint.

use magma_protocol::{Location, Segment};

/// Documents nested deeper than this are not JSON to the consumers (CPython's
/// `json.loads` refuses them), so they are not searched.
pub const MAX_DEPTH: usize = magma_protocol::MAX_JSON_DEPTH;

/// A key that appears more than once in one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// The object that holds the key.
    pub object: Location,
    /// The key.
    pub key: String,
    /// How many times it appears.
    pub count: usize,
}

/// The result of a scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DuplicateScan {
    /// Repeated keys, in document order of their second occurrence, from
    /// the first [`magma_protocol::MAX_REPORTED_ERRORS`] repeats.
    pub duplicates: Vec<DuplicateKey>,
    /// Repeats past those, counted only (a hostile document can repeat a
    /// key millions of times).
    pub omitted: usize,
    /// `true` if the document could not be read as JSON (then nothing was
    /// searched).
    pub incomplete: bool,
}

/// Scans a document for repeated keys.
pub fn find_duplicate_keys(bytes: &[u8]) -> DuplicateScan {
    let Ok(repeats) = magma_protocol::duplicate_keys(bytes) else {
        return DuplicateScan {
            duplicates: Vec::new(),
            omitted: 0,
            incomplete: true,
        };
    };
    let mut duplicates: Vec<DuplicateKey> = Vec::new();
    for at in repeats.locations() {
        let mut segments = at.segments().to_vec();
        let Some(Segment::Key(key)) = segments.pop() else {
            continue;
        };
        let object = Location::from(segments);
        match duplicates
            .iter_mut()
            .find(|d| d.object == object && d.key == key)
        {
            Some(d) => d.count += 1,
            None => duplicates.push(DuplicateKey {
                object,
                key,
                count: 2,
            }),
        }
    }
    DuplicateScan {
        duplicates,
        omitted: repeats.omitted(),
        incomplete: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_repeated_keys_with_their_object_and_count() {
        let scan = find_duplicate_keys(
            br#"{"a":1,"b":{"x":1,"x":2,"\u0078":3},"inputs":[{"id":1,"id":2}],"a":2}"#,
        );
        let found: Vec<(String, &str, usize)> = scan
            .duplicates
            .iter()
            .map(|d| (d.object.to_string(), d.key.as_str(), d.count))
            .collect();
        assert_eq!(
            found,
            [
                ("b".to_owned(), "x", 3),
                ("inputs[0]".to_owned(), "id", 2),
                ("(root)".to_owned(), "a", 2)
            ]
        );
        assert!(!scan.incomplete);
    }

    #[test]
    fn documents_too_deep_for_json_loads_are_not_searched() {
        let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        let scan = find_duplicate_keys(deep.as_bytes());
        assert!(scan.duplicates.is_empty() && scan.incomplete);
        // Within the limit, any depth is searched.
        let deep_obj = format!(
            r#"{{"k":1,"k":2,"d":{}1{}}}"#,
            r#"{"a":1,"a":"#.repeat(1400),
            "}".repeat(1400)
        );
        let scan = find_duplicate_keys(deep_obj.as_bytes());
        assert_eq!(scan.duplicates.len(), 100);
        assert_eq!(scan.omitted, 1301);
        assert!(!scan.incomplete);
    }

    #[test]
    fn reads_past_nan_like_the_reference() {
        let scan = find_duplicate_keys(br#"{"a":1,"a":2,"m":NaN,"b":1,"b":2}"#);
        assert_eq!(scan.duplicates.len(), 2);
        assert!(!scan.incomplete);
        assert!(find_duplicate_keys(b"{\"a\":").incomplete);
    }
}
