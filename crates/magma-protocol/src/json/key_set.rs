//! The keys of one object, held as offsets into the document: a set that
//! costs a few bytes per key whatever the keys' length, for objects a
//! hostile document makes millions of keys long.

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

use super::lex::{Limits, plain_run_end};
use super::parse::Parser;

/// Distinct keys of one object of a document, by value (escaped keys are
/// compared decoded, as the parser compares them).
///
/// Each key is one `u32` (the offset of its opening quote, plus one; `0`
/// marks an empty slot) in an open-addressing table at most three quarters
/// full: 5 to 11 bytes per key, the key's text staying in the document.
/// The hash is seeded per set ([`RandomState`]), so a document cannot be
/// made of colliding keys. Documents of 4 GiB or more, whose offsets do not
/// fit, fall back to owned keys.
pub(crate) struct KeySet {
    slots: Vec<u32>,
    len: usize,
    hasher: RandomState,
    /// Owned keys, for documents too long for `u32` offsets.
    owned: Option<HashSet<Box<str>>>,
}

impl KeySet {
    pub(crate) fn new(src: &[u8]) -> KeySet {
        let fits = u32::try_from(src.len()).is_ok_and(|n| n < u32::MAX);
        KeySet {
            slots: if fits { vec![0; 8] } else { Vec::new() },
            len: 0,
            hasher: RandomState::new(),
            owned: (!fits).then(HashSet::new),
        }
    }

    /// Adds the key whose opening quote is at `at` (a key the parser has
    /// already read without error); `true` when no equal key was there.
    pub(crate) fn insert(&mut self, src: &[u8], text: &str, at: usize) -> bool {
        if let Some(owned) = &mut self.owned {
            let key = key_text(src, text, at);
            return owned.insert(key.into_owned().into_boxed_str());
        }
        self.first_of(src, text, at).is_none()
    }

    /// [`insert`](KeySet::insert) that names the key already there: the
    /// offset of the opening quote of the equal key added before (the key
    /// at `at` is then not added), `None` when the key was new and added.
    /// Only for a set of offsets: the caller checked [`offsets_fit`] (a set
    /// of owned keys answers `None`, as if each key were new).
    pub(crate) fn first_of(&mut self, src: &[u8], text: &str, at: usize) -> Option<usize> {
        if self.owned.is_some() {
            debug_assert!(false, "first_of on a set of owned keys");
            return None;
        }
        self.insert_by(at, |at| match key_text(src, text, at) {
            Cow::Borrowed(k) => Cow::Borrowed(k.as_bytes()),
            Cow::Owned(k) => Cow::Owned(k.into_bytes()),
        })
    }

    /// [`insert`](KeySet::insert) for a key without escapes, compared as
    /// its bytes: the free-form scan's keys, which it has checked to be
    /// plain. `false` also for a document too long for offsets (the scan
    /// then leaves the object to the parser).
    pub(crate) fn insert_plain(&mut self, src: &[u8], at: usize) -> bool {
        if self.owned.is_some() {
            return false;
        }
        self.insert_by(at, |at| plain_key(src, at)).is_none()
    }

    /// Adds the key at `at`, the keys read by `key_of`; the offset of the
    /// equal key already there instead, if any.
    fn insert_by<K>(&mut self, at: usize, key_of: impl Fn(usize) -> K) -> Option<usize>
    where
        K: AsRef<[u8]> + PartialEq,
    {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow(&key_of);
        }
        let key = key_of(at);
        let mask = self.slots.len() - 1;
        let mut i = (self.hasher.hash_one(key.as_ref()) as usize) & mask;
        loop {
            match self.slots[i] {
                0 => {
                    // `at` < `src.len()` < `u32::MAX`: checked in `new`.
                    self.slots[i] = at as u32 + 1;
                    self.len += 1;
                    return None;
                }
                slot => {
                    if key_of(slot as usize - 1) == key {
                        return Some(slot as usize - 1);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    fn grow<K: AsRef<[u8]>>(&mut self, key_of: &impl Fn(usize) -> K) {
        let doubled = vec![0; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        let mask = self.slots.len() - 1;
        for slot in old.into_iter().filter(|&s| s != 0) {
            let key = key_of(slot as usize - 1);
            let mut i = (self.hasher.hash_one(key.as_ref()) as usize) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
    }
}

/// The bytes of the plain key whose opening quote is at `at`.
fn plain_key(src: &[u8], at: usize) -> &[u8] {
    let start = at + 1;
    &src[start..plain_run_end(src, start)]
}

impl KeySet {
    /// How many keys it holds.
    pub(crate) fn len(&self) -> usize {
        self.owned.as_ref().map_or(self.len, HashSet::len)
    }

    /// The offsets of its keys' opening quotes, in no order; `None` for a
    /// document whose offsets do not fit in `u32`.
    pub(crate) fn into_offsets(self) -> Option<Vec<u32>> {
        if self.owned.is_some() {
            return None;
        }
        Some(
            self.slots
                .into_iter()
                .filter(|&s| s != 0)
                .map(|s| s - 1)
                .collect(),
        )
    }
}

/// `true` when offsets of `src` fit in `u32`: [`KeySet`] and the sorted
/// key lists of [`count_distinct`] and [`keep_repeats`] need it.
pub(crate) fn offsets_fit(src: &[u8]) -> bool {
    u32::try_from(src.len()).is_ok_and(|n| n < u32::MAX)
}

/// Sorts the offsets of keys (of their opening quotes) by key, decoded,
/// then by offset; sorting in place costs no memory beyond the list's own
/// four bytes per key.
fn sort_by_key(keys: &mut [u32], src: &[u8], text: &str) {
    keys.sort_unstable_by(|&a, &b| {
        key_text(src, text, a as usize)
            .cmp(&key_text(src, text, b as usize))
            .then(a.cmp(&b))
    });
}

/// How many distinct keys the offsets point at.
pub(crate) fn count_distinct(keys: &mut [u32], src: &[u8], text: &str) -> usize {
    if keys.is_empty() {
        return 0;
    }
    sort_by_key(keys, src, text);
    1 + keys
        .windows(2)
        .filter(|w| key_text(src, text, w[0] as usize) != key_text(src, text, w[1] as usize))
        .count()
}

/// Keeps, of the offsets of one object's keys, those of repeats (every
/// occurrence of a key but its first), in document order.
pub(crate) fn keep_repeats(keys: &mut Vec<u32>, src: &[u8], text: &str) {
    sort_by_key(keys, src, text);
    let mut kept = 0;
    for i in 1..keys.len() {
        if key_text(src, text, keys[i - 1] as usize) == key_text(src, text, keys[i] as usize) {
            keys[kept] = keys[i];
            kept += 1;
        }
    }
    keys.truncate(kept);
    keys.sort_unstable();
}

/// The key whose opening quote is at `at`, decoded when it has escapes.
pub(crate) fn key_text<'a>(src: &'a [u8], text: &'a str, at: usize) -> Cow<'a, str> {
    let start = at + 1;
    let end = plain_run_end(src, start);
    if src.get(end) == Some(&b'"') {
        return Cow::Borrowed(&text[start..end]);
    }
    let mut p = Parser::new(src, text, Limits::NONE);
    p.set_pos(at);
    // The parser read this key before it was added: it decodes again.
    Cow::Owned(p.string().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_lists_count_keys_and_find_repeats() {
        let doc = r#"{"b":0,"a":1,"\u0062":2,"c":3,"b":4,"a":5}"#;
        // The opening quotes of the keys: after `{` or `,`.
        let mut keys: Vec<u32> = (1..doc.len())
            .filter(|&i| doc.as_bytes()[i] == b'"' && matches!(doc.as_bytes()[i - 1], b'{' | b','))
            .map(|i| i as u32)
            .collect();
        assert_eq!(keys, vec![1, 7, 13, 24, 30, 36]);
        assert_eq!(count_distinct(&mut keys, doc.as_bytes(), doc), 3);
        keep_repeats(&mut keys, doc.as_bytes(), doc);
        assert_eq!(keys, vec![13, 30, 36]);
    }

    #[test]
    fn keys_compare_by_value_and_the_table_grows() {
        let mut doc = String::from("{");
        let mut at = Vec::new();
        for i in 0..1000 {
            at.push(doc.len());
            doc.push_str(&format!("\"k{i}\":0,"));
        }
        // `\u0041` is `A`: the same key as `"A"`.
        at.push(doc.len());
        doc.push_str("\"A\":0,");
        at.push(doc.len());
        doc.push_str("\"\\u0041\":0,");
        at.push(doc.len());
        doc.push_str("\"k7\":0}");
        let mut set = KeySet::new(doc.as_bytes());
        let new: Vec<bool> = at
            .iter()
            .map(|&a| set.insert(doc.as_bytes(), &doc, a))
            .collect();
        assert!(new[..1001].iter().all(|&n| n));
        assert_eq!(&new[1001..], &[false, false]);
        assert_eq!(set.len, 1001);
        assert!(set.slots.len() >= 1001 * 4 / 3 && set.slots.len() <= 4096);
    }
}
