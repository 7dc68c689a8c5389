//! Finding keys that appear twice in one JSON object.
//!
//! magma-protocol, like the reference's `json.loads`, keeps the last value
//! of a repeated key without a word. This scan sees every entry of every
//! object through a serde `Visitor`. It descends at most [`MAX_DEPTH`]
//! levels (deeper values are skipped by serde_json's iterative skipper), so
//! no document can exhaust the stack; it stops at the first syntax error
//! and keeps what it found before.

use std::collections::HashMap;
use std::fmt;

use magma_protocol::{Location, Segment};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Containers deeper than this are not searched for duplicate keys.
pub const MAX_DEPTH: usize = 100;

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
    /// Repeated keys, in document order of their second occurrence.
    pub duplicates: Vec<DuplicateKey>,
    /// `true` if part of the document was not searched (deeper than
    /// [`MAX_DEPTH`], or after something serde_json cannot read, such as
    /// `NaN`).
    pub incomplete: bool,
}

/// Scans a document for repeated keys.
pub fn find_duplicate_keys(bytes: &[u8]) -> DuplicateScan {
    let mut state = State::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let outcome = Scan { st: &mut state }.deserialize(&mut de);
    let mut scan = DuplicateScan {
        duplicates: Vec::new(),
        incomplete: outcome.is_err() || state.skipped,
    };
    // Report each (object, key) once, with its count.
    for (object, key, count) in state.found {
        scan.duplicates.push(DuplicateKey {
            object: Location::from(object),
            key,
            count,
        });
    }
    scan
}

#[derive(Default)]
struct State {
    path: Vec<Segment>,
    /// (object path, key, count), count updated in place.
    found: Vec<(Vec<Segment>, String, usize)>,
    skipped: bool,
}

struct Scan<'s> {
    st: &'s mut State,
}

impl<'de> DeserializeSeed<'de> for Scan<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.st.path.len() >= MAX_DEPTH {
            self.st.skipped = true;
            d.deserialize_ignored_any(IgnoredAny)?;
            return Ok(());
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        loop {
            self.st.path.push(Segment::Index(index));
            let next = seq.next_element_seed(Scan { st: self.st });
            self.st.path.pop();
            match next? {
                Some(()) => index += 1,
                None => return Ok(()),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // key -> index into `found` once repeated (usize::MAX while seen once).
        let mut seen: HashMap<String, usize> = HashMap::new();
        while let Some(key) = map.next_key::<String>()? {
            match seen.get_mut(&key) {
                None => {
                    self.st.path.push(Segment::Key(key.clone()));
                    seen.insert(key, usize::MAX);
                }
                Some(slot) if *slot == usize::MAX => {
                    *slot = self.st.found.len();
                    self.st.found.push((self.st.path.clone(), key.clone(), 2));
                    self.st.path.push(Segment::Key(key));
                }
                Some(slot) => {
                    self.st.found[*slot].2 += 1;
                    self.st.path.push(Segment::Key(key));
                }
            }
            let value = map.next_value_seed(Scan { st: self.st });
            self.st.path.pop();
            value?;
        }
        Ok(())
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
    fn deep_documents_are_skipped_not_overflowed() {
        let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        let scan = find_duplicate_keys(deep.as_bytes());
        assert!(scan.duplicates.is_empty() && scan.incomplete);
        let deep_obj = format!(
            r#"{{"k":1,"k":2,"d":{}{}}}"#,
            r#"{"a":"#.repeat(5000),
            "}".repeat(5000).replacen('}', "1}", 1)
        );
        let scan = find_duplicate_keys(deep_obj.as_bytes());
        assert_eq!(scan.duplicates.len(), 1);
        assert!(scan.incomplete);
    }

    #[test]
    fn stops_at_what_serde_json_cannot_read_keeping_earlier_finds() {
        let scan = find_duplicate_keys(br#"{"a":1,"a":2,"m":NaN,"b":1,"b":2}"#);
        assert_eq!(scan.duplicates.len(), 1);
        assert!(scan.incomplete);
    }
}
