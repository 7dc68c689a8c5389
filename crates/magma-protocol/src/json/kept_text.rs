//! Reading kept text: validated text that a free-form [`Object`] holds
//! instead of a tree, read one level deep, one value at a time, or one
//! member found by its key, without checking it again.
//!
//! The text was checked when it was kept (by the scan, `scan.rs`, or as
//! normal text, `normal.rs`), so these readers only walk it: scalars and
//! lists of scalars directly, anything else through the parser without
//! limits ([`validated_value`]).

use std::borrow::Cow;

use super::lex::{
    escaped_string_end, number_end, plain_run_end, plain_string, skip_validated_value, ws_end,
};
use super::parse::{validated_object_one_level, validated_value};
use super::{Json, Map, Number};

/// The entries of an object kept as validated text, one level deep: the
/// objects among the values stay text, so reading one
/// key of a large object does not build the whole tree.
pub(super) fn read_kept_entries(text: &str) -> Option<Map<Json>> {
    match validated_object_one_level(text) {
        Some(Json::Object(o)) => Some(o.into_map()),
        _ => None,
    }
}

/// A value cut from validated text, its objects kept as text.
pub(crate) fn read_kept_value(text: &str) -> Option<Json> {
    // Scalars and lists of scalars directly: a tool's `name`, a counter, a
    // list of names.
    match text.as_bytes().first()? {
        b'[' => {
            if let Some(items) = plain_scalar_list(text) {
                return Some(Json::Array(items));
            }
        }
        _ => {
            if let Some(value) = plain_scalar(text) {
                return Some(value);
            }
        }
    }
    validated_value(text)
}

/// A scalar of validated text, alone in `text`, if it needs no decoding:
/// a string without escapes, a number or a literal.
fn plain_scalar(text: &str) -> Option<Json> {
    match text.as_bytes().first()? {
        b'"' => plain_string(text).map(|s| Json::String(s.to_owned())),
        b'-' | b'0'..=b'9' => Some(Json::Number(Number::from_parser(text))),
        b't' => Some(Json::Bool(true)),
        b'f' => Some(Json::Bool(false)),
        b'n' => Some(Json::Null),
        _ => None,
    }
}

/// The items of a validated array (`text` starts with `[`) if each is a
/// [`plain_scalar`]; `None` for anything else (nested values, escapes).
fn plain_scalar_list(text: &str) -> Option<Vec<Json>> {
    let b = text.as_bytes();
    let mut i = ws_end(b, 1);
    if b.get(i) == Some(&b']') {
        return Some(Vec::new());
    }
    // Room for a short list (robot names, a few objects) without regrowing.
    let mut items = Vec::with_capacity(4);
    loop {
        let (item, end) = match b.get(i)? {
            b'"' => {
                let end = plain_run_end(b, i + 1);
                if b.get(end) != Some(&b'"') {
                    return None;
                }
                (Json::String(text.get(i + 1..end)?.to_owned()), end + 1)
            }
            b'-' | b'0'..=b'9' => {
                let end = number_end(b, i)?;
                (Json::Number(Number::from_parser(text.get(i..end)?)), end)
            }
            b't' => (Json::Bool(true), i + 4),
            b'f' => (Json::Bool(false), i + 5),
            b'n' => (Json::Null, i + 4),
            _ => return None,
        };
        items.push(item);
        i = ws_end(b, end);
        match b.get(i)? {
            b',' => i = ws_end(b, i + 1),
            b']' => return Some(items),
            _ => return None,
        }
    }
}

/// A member of validated object text, by offsets into the text.
pub(crate) struct Member {
    /// Where the key starts (after its quote); for a key that needs no
    /// escape, as long as the key looked up.
    pub(crate) key: usize,
    /// The value's text.
    pub(crate) value: std::ops::Range<usize>,
}

/// Where the value of the top-level member `key` of validated object text
/// lies (start and end offsets), without building anything. Validated text
/// writes each key as the writer does: as it is when it needs no escape
/// (the scan keeps no object with an escaped key), with the writer's
/// escapes otherwise (the normal text of `normal.rs`). One key has one
/// written form, so keys compare as bytes with the written form of `key`.
pub(crate) fn find_member(text: &str, key: &str) -> Option<Member> {
    let (key_at, start) = find_value(text, key)?;
    let end = skip_validated_value(text.as_bytes(), start)?;
    Some(Member {
        key: key_at,
        value: start..end,
    })
}

/// Where the key `key` of validated object text starts (after its quote)
/// and where its value starts: [`find_member`] without skipping the value
/// found, for readers that look at its first bytes only.
pub(crate) fn find_value(text: &str, key: &str) -> Option<(usize, usize)> {
    let src = text.as_bytes();
    let written: Cow<'_, str> = if plain_run_end(key.as_bytes(), 0) == key.len() {
        Cow::Borrowed(key)
    } else {
        let mut quoted = String::with_capacity(key.len() + 8);
        super::write::write_str(&mut quoted, key);
        Cow::Owned(quoted[1..quoted.len() - 1].to_owned())
    };
    let written = written.as_bytes();
    let mut i = 1;
    loop {
        i = ws_end(src, i);
        if src.get(i) != Some(&b'"') {
            // `}` of an empty object (or of text that is not what it should be).
            return None;
        }
        let start = i + 1;
        // The key looked up is recognised by its bytes and the quote after
        // them (no key holds an unescaped quote), before any scan of it.
        let after = start + written.len();
        let end = if src.get(start..after) == Some(written) && src.get(after) == Some(&b'"') {
            i = ws_end(src, after + 1);
            if src.get(i) != Some(&b':') {
                return None;
            }
            return Some((start, ws_end(src, i + 1)));
        } else {
            escaped_string_end(src, start)
        };
        i = ws_end(src, end + 1);
        if src.get(i) != Some(&b':') {
            return None;
        }
        i = ws_end(src, i + 1);
        i = skip_validated_value(src, i)?;
        i = ws_end(src, i);
        if src.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
    }
}

/// The content of the string that starts at `at` (its opening quote) in
/// validated text, borrowed, when it has no escape; `None` for any other
/// value, and for a string with escapes (which needs decoding).
#[inline]
pub(crate) fn plain_string_at(text: &str, at: usize) -> Option<&str> {
    let src = text.as_bytes();
    if src.get(at) != Some(&b'"') {
        return None;
    }
    let end = plain_run_end(src, at + 1);
    (src.get(end) == Some(&b'"')).then(|| text.get(at + 1..end))?
}

/// What the item `index` of the array that starts at `at` (its `[`) in
/// validated text is, without reading the items before it.
pub(crate) enum Item<'a> {
    /// A string without escapes, borrowed.
    Plain(&'a str),
    /// A string with escapes: decoding it is the caller's.
    Escaped,
    /// Not a string, or no such item, or `at` is not an array.
    Other,
}

/// The item `index` of the array at `at` of validated text (see [`Item`]).
pub(crate) fn array_item(text: &str, at: usize, index: usize) -> Item<'_> {
    let src = text.as_bytes();
    if src.get(at) != Some(&b'[') {
        return Item::Other;
    }
    let mut i = ws_end(src, at + 1);
    if src.get(i) == Some(&b']') {
        return Item::Other;
    }
    for _ in 0..index {
        let Some(end) = skip_validated_value(src, i) else {
            return Item::Other;
        };
        i = ws_end(src, end);
        if src.get(i) != Some(&b',') {
            return Item::Other;
        }
        i = ws_end(src, i + 1);
    }
    match src.get(i) {
        Some(b'"') => match plain_string_at(text, i) {
            Some(s) => Item::Plain(s),
            None => Item::Escaped,
        },
        _ => Item::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::super::TEST_LIMITS;
    use super::super::parse::{parse, tricky_text};
    use super::super::scan::{ScanBuffers, scan_free_object};
    use super::*;
    use crate::json::Object;

    proptest::proptest! {
        /// The shortcuts for one value of kept text read it as the parser
        /// does, and the key filter of a kept object admits all its keys.
        #[test]
        fn kept_values_and_key_filters_agree_with_the_parser(value in tricky_text()) {
            let doc = format!("{{\"k\": {value}}}");
            let mut sc = ScanBuffers::with_room();
            if scan_free_object(doc.as_bytes(), 0, 0, TEST_LIMITS, &mut sc).is_some() {
                proptest::prop_assert_eq!(
                    read_kept_value(&value),
                    validated_value(&value)
                );
            }
            if let Some((end, keys)) = scan_free_object(value.as_bytes(), 0, 0, TEST_LIMITS, &mut sc) {
                proptest::prop_assert_eq!(end, value.len());
                let parsed = parse(value.as_bytes(), TEST_LIMITS).unwrap();
                let object = parsed.as_object().unwrap();
                for key in object.keys() {
                    proptest::prop_assert!(keys.may_contain(key), "{key} in {value}");
                }
                // `get_str` borrows from the text what `get` would build, and
                // `get_cloned` copies it: on unread text, after one lookup,
                // and once read whole.
                for key in object.keys().chain(["", "k", "missing"]) {
                    let want = object.get(key).and_then(Json::as_str);
                    let copy = object.get(key).cloned();
                    let fresh = Object::from_validated_text(&value, keys);
                    proptest::prop_assert_eq!(fresh.get_str(key), want, "{} in {}", key, value);
                    proptest::prop_assert_eq!(&fresh.get_cloned(key), &copy);
                    let looked_up = Object::from_validated_text(&value, keys);
                    let _ = looked_up.get(key);
                    proptest::prop_assert_eq!(looked_up.get_str(key), want);
                    proptest::prop_assert_eq!(&looked_up.get_cloned(key), &copy);
                    let read = Object::from_validated_text(&value, keys);
                    let _ = read.len();
                    proptest::prop_assert_eq!(read.get_str(key), want);
                    proptest::prop_assert_eq!(&read.get_cloned(key), &copy);
                }
            }
        }
    }
}
