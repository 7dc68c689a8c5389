//! Values that can only ever be an error's `input`, kept as text.
//!
//! The value of a key a strict model does not declare is refused whatever
//! it is (`extra_forbidden`), and the reference echoes it whole as that
//! error's `input`, and again inside the object each `missing` error of the
//! same object echoes. Built as a tree, a 16 MiB `[0, 0, ...]` there costs
//! about 40 bytes an element, and each copy as much again. The parser reads
//! such a value once, writing its compact text (exactly what the writer
//! gives for the tree the parser would have built) into one shared
//! [`Arc<String>`]; the tree holds an empty array or object in its place
//! and the [`KeptInputs`] of the document say, by location, which text
//! stands there. Validation puts the text back as the input of the errors
//! at that location and in the objects the `missing` errors echo. The same
//! holds for an array or an object where a model's field is a scalar
//! (`Shape::Scalar`): refused whatever it holds.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::key_set::KeySet;
use super::lex::{PResult, plain_run_end};
use super::parse::Parser;
use super::path::{Location, Segment};
use super::write::{WriteJson, write_str};
use super::{Json, Object};

/// A value with a repeated key or a non-finite number inside is written
/// differently from the tree the parser builds (the tree keeps the last of
/// the repeated values, at the first one's place; a non-finite number reads
/// back as a string). Up to this size such a value is built as a tree, as
/// before; beyond it, it is kept as written (see `docs/conformance.md`).
pub(crate) const EXACT_FALLBACK_BYTES: usize = 64 * 1024;

/// The values of a document kept as text, by location. Empty for almost
/// every document: only a model object with an undeclared key (or a
/// scalar field) holding an array or an object has one.
#[derive(Debug, Default, Clone)]
pub(crate) struct KeptInputs {
    at: HashMap<Location, Arc<String>>,
}

/// Compact JSON text in parts: written pieces and kept texts, shared. The
/// `input` of a `missing` error is its object, whose text holds the kept
/// texts of its members: in parts, it costs what was written around them.
#[derive(Debug, Default)]
pub(crate) struct Parts {
    parts: Vec<Part>,
}

#[derive(Debug)]
enum Part {
    Written(String),
    Kept(Arc<String>),
}

impl Part {
    fn as_str(&self) -> &str {
        match self {
            Part::Written(s) => s,
            Part::Kept(s) => s,
        }
    }
}

impl Parts {
    /// One kept text.
    pub(crate) fn kept(text: Arc<String>) -> Parts {
        Parts {
            parts: vec![Part::Kept(text)],
        }
    }

    /// The length of the whole text.
    pub(crate) fn len(&self) -> usize {
        self.parts.iter().map(|p| p.as_str().len()).sum()
    }

    /// Appends the whole text to `out`.
    pub(crate) fn write(&self, out: &mut String) {
        for part in &self.parts {
            out.push_str(part.as_str());
        }
    }

    /// The first `max_chars` characters of the text (all of it when
    /// shorter), read from the parts that hold them.
    pub(crate) fn head(&self, max_chars: usize) -> String {
        let mut out = String::new();
        let mut left = max_chars;
        for part in &self.parts {
            let text = part.as_str();
            match text.char_indices().nth(left) {
                Some((at, _)) => {
                    out.push_str(&text[..at]);
                    return out;
                }
                None => {
                    out.push_str(text);
                    left -= text.chars().count();
                }
            }
        }
        out
    }

    /// The whole text, borrowed when it is one part.
    pub(crate) fn text(&self) -> Cow<'_, str> {
        match self.parts.as_slice() {
            [] => Cow::Borrowed(""),
            [one] => Cow::Borrowed(one.as_str()),
            _ => {
                let mut out = String::with_capacity(self.len());
                self.write(&mut out);
                Cow::Owned(out)
            }
        }
    }
}

/// Builds [`Parts`]: written text goes to `current`, a kept text ends it.
#[derive(Default)]
struct PartsWriter {
    parts: Vec<Part>,
    current: String,
}

impl PartsWriter {
    fn kept(&mut self, text: &Arc<String>) {
        if !self.current.is_empty() {
            let written = std::mem::take(&mut self.current);
            self.parts.push(Part::Written(written));
        }
        self.parts.push(Part::Kept(Arc::clone(text)));
    }

    fn finish(mut self) -> Parts {
        if !self.current.is_empty() {
            self.parts.push(Part::Written(self.current));
        }
        Parts { parts: self.parts }
    }
}

impl KeptInputs {
    pub(crate) fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// The text kept for the value at `loc`.
    pub(crate) fn get(&self, loc: &Location) -> Option<&Arc<String>> {
        self.at.get(loc)
    }

    pub(super) fn insert(&mut self, loc: Location, text: Arc<String>) {
        self.at.insert(loc, text);
    }

    pub(super) fn remove(&mut self, loc: &Location) {
        self.at.remove(loc);
    }

    /// The compact text of the object `value`, found at `loc` of the
    /// document, with the kept texts below `loc` in place of the empty
    /// values that hold their places; `None` when nothing below `loc` was kept
    /// (the object's own text is then the same).
    pub(crate) fn text_of(&self, loc: &Location, value: &Object) -> Option<Parts> {
        let depth = loc.segments().len();
        let below: Vec<(&[Segment], &Arc<String>)> = self
            .at
            .iter()
            .filter(|(l, _)| l.segments().len() > depth && l.segments()[..depth] == *loc.segments())
            .map(|(l, t)| (&l.segments()[depth..], t))
            .collect();
        if below.is_empty() {
            return None;
        }
        let mut out = PartsWriter::default();
        write_object_with(value, &below, &mut out);
        Some(out.finish())
    }
}

/// The kept texts of `kept` (by location relative to a value), grouped
/// by the first segment of their location, that segment removed.
type Kept<'k> = [KeptAt<'k>];

/// A kept text and its location, relative to a value.
type KeptAt<'k> = (&'k [Segment], &'k Arc<String>);

fn group<'k, K: Eq + std::hash::Hash>(
    kept: &Kept<'k>,
    key: impl Fn(&'k Segment) -> Option<K>,
) -> HashMap<K, Vec<KeptAt<'k>>> {
    let mut by: HashMap<K, Vec<KeptAt<'k>>> = HashMap::new();
    for &(l, t) in kept {
        if let Some((first, rest)) = l.split_first() {
            if let Some(k) = key(first) {
                by.entry(k).or_default().push((rest, t));
            }
        }
    }
    by
}

/// Writes `value` with the texts of `kept` (by location relative to
/// `value`) in place. Recurses only along the paths to kept texts, which
/// lie in model objects: as deep as the document's shape, not its data.
fn write_with(value: &Json, kept: &Kept<'_>, out: &mut PartsWriter) {
    if let Some((_, text)) = kept.iter().find(|(l, _)| l.is_empty()) {
        out.kept(text);
        return;
    }
    match value {
        Json::Object(o) => write_object_with(o, kept, out),
        Json::Array(items) => {
            let by_index = group(kept, |s| match s {
                Segment::Index(i) => Some(*i),
                Segment::Key(_) => None,
            });
            out.current.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.current.push(',');
                }
                match by_index.get(&i) {
                    Some(here) => write_with(item, here, out),
                    None => item.write_json(&mut out.current),
                }
            }
            out.current.push(']');
        }
        other => other.write_json(&mut out.current),
    }
}

/// [`write_with`] for an object.
fn write_object_with(value: &Object, kept: &Kept<'_>, out: &mut PartsWriter) {
    if value.is_validated_text() {
        // Free-form text: nothing below it is kept.
        value.write_json(&mut out.current);
        return;
    }
    let by_key = group(kept, |s| match s {
        Segment::Key(k) => Some(k.as_str()),
        Segment::Index(_) => None,
    });
    out.current.push('{');
    for (i, (k, v)) in value.as_map().iter().enumerate() {
        if i > 0 {
            out.current.push(',');
        }
        write_str(&mut out.current, k);
        out.current.push(':');
        match by_key.get(k) {
            Some(here) => write_with(v, here, out),
            None => v.write_json(&mut out.current),
        }
    }
    out.current.push('}');
}

/// A container open while [`Parser::copy_value`] copies.
struct Open {
    /// `[` or `{`.
    kind: u8,
    /// An object's keys, to find a repeat.
    keys: Option<KeySet>,
}

impl Parser<'_> {
    /// Reads the value in front of the cursor as [`Parser::skip_value`]
    /// does (the same texts refused with the same errors, `depth_before`
    /// containers already open), appending its compact text to `out`: the
    /// text the writer gives for the tree the parser builds, with a
    /// repeated key or a non-finite number written as they are. `false`
    /// when there was one of those (the text is then not the tree's).
    pub(super) fn copy_value(&mut self, depth_before: usize, out: &mut String) -> PResult<bool> {
        let mut exact = true;
        let mut open: Vec<Open> = Vec::new();
        'value: loop {
            self.skip_ws();
            match self.peek() {
                Some(c @ (b'[' | b'{')) => {
                    if depth_before + open.len() >= self.limits().depth {
                        return Err((self.pos(), "maximum nesting depth exceeded"));
                    }
                    self.set_pos(self.pos() + 1);
                    self.skip_ws();
                    let close = if c == b'[' { b']' } else { b'}' };
                    out.push(c as char);
                    if self.peek() == Some(close) {
                        self.set_pos(self.pos() + 1);
                        out.push(close as char);
                    } else {
                        let mut frame = Open {
                            kind: c,
                            keys: (c == b'{').then(|| KeySet::new(self.src())),
                        };
                        if let Some(keys) = &mut frame.keys {
                            exact &= self.copy_key(keys, out)?;
                        }
                        open.push(frame);
                        continue 'value;
                    }
                }
                _ => exact &= self.copy_scalar(out)?,
            }
            loop {
                let Some(top) = open.last_mut() else {
                    return Ok(exact);
                };
                self.skip_ws();
                match (top.kind, self.peek()) {
                    (b'[', Some(b',')) => {
                        self.set_pos(self.pos() + 1);
                        out.push(',');
                        continue 'value;
                    }
                    (_, Some(b',')) => {
                        self.set_pos(self.pos() + 1);
                        out.push(',');
                        self.skip_ws();
                        if let Some(keys) = &mut top.keys {
                            exact &= self.copy_key(keys, out)?;
                        }
                        continue 'value;
                    }
                    (b'[', Some(b']')) | (b'{', Some(b'}')) => {
                        out.push(if top.kind == b'[' { ']' } else { '}' });
                        self.set_pos(self.pos() + 1);
                        open.pop();
                    }
                    (b'[', _) => return Err((self.pos(), "expected ',' or ']' in an array")),
                    _ => return Err((self.pos(), "expected ',' or '}' in an object")),
                }
            }
        }
    }

    /// A key and its `:`, written; `false` when it repeats one of `keys`.
    fn copy_key(&mut self, keys: &mut KeySet, out: &mut String) -> PResult<bool> {
        let at = self.pos();
        let key = self.borrowed_key()?;
        write_str(out, &key);
        out.push(':');
        Ok(keys.insert(self.src(), self.text(), at))
    }

    /// A scalar, written; `false` when it is a non-finite number.
    fn copy_scalar(&mut self, out: &mut String) -> PResult<bool> {
        if self.peek() == Some(b'"') {
            // No escape: the writer writes these bytes as they are.
            let start = self.pos();
            let end = plain_run_end(self.src(), start + 1);
            if self.src().get(end) == Some(&b'"') {
                out.push_str(&self.text()[start..=end]);
                self.set_pos(end + 1);
                return Ok(true);
            }
        }
        let value = self.scalar()?;
        value.write_json(out);
        Ok(match &value {
            Json::Number(n) => n.is_finite(),
            _ => true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::TEST_LIMITS;
    use super::super::parse::{Parser, parse, tricky_text};
    use super::super::write::to_string;

    /// The text and whether it is the tree's, as `copy_value` gives them.
    fn copied(text: &str) -> Result<(String, bool), (usize, &'static str)> {
        let mut p = Parser::new(text.as_bytes(), text, TEST_LIMITS);
        let mut out = String::new();
        let exact = p.copy_value(0, &mut out)?;
        // One document, as `parse` reads it.
        p.skip_ws();
        if p.pos() != text.len() {
            return Err((p.pos(), "extra data after the document"));
        }
        Ok((out, exact))
    }

    #[test]
    fn repeats_and_non_finite_numbers_are_told() {
        for (text, written) in [
            (r#"{"a":1, "a":2}"#, r#"{"a":1,"a":2}"#),
            (r#"[{"x":{"b":1,"\u0062":2}}]"#, r#"[{"x":{"b":1,"b":2}}]"#),
            ("[NaN, -Infinity]", r#"["NaN","-Infinity"]"#),
            ("[1e400]", r#"["1e400"]"#),
        ] {
            assert_eq!(copied(text), Ok((written.to_owned(), false)), "{text}");
        }
        let (out, exact) = copied(r#"{"a":{"a":1},"b":[{"a":2}]}"#).unwrap();
        assert!(exact, "the same key in other objects is no repeat: {out}");
    }

    proptest::proptest! {
        /// Copied text is the writer's text of the tree the parser builds
        /// whenever it says so, and refused where the parser refuses.
        #[test]
        fn copied_text_is_the_trees_text(doc in tricky_text()) {
            match (copied(&doc), parse(doc.as_bytes(), TEST_LIMITS)) {
                (Ok((out, true)), Ok(tree)) => proptest::prop_assert_eq!(out, to_string(&tree)),
                (Ok((_, false)), Ok(_)) => {}
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a.0, b.position.offset),
                (a, b) => proptest::prop_assert!(false, "copied {a:?}, parsed {b:?}"),
            }
        }
    }
}
