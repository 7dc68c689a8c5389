//! [`KeptText`]: the text an [`Object`](super::Object) keeps, and
//! [`TextChunks`]: how a direct reader shares one copy of a document's text
//! among the small free-form objects it keeps.
//!
//! A document of the usual shapes holds many small free-form objects: the
//! tools, attributes and `extra_keys` of every input, and in a coaching
//! trajectory the `arguments`, internal steps and `execution` of every step.
//! Copying each into an allocation of its own made allocation the largest
//! cost a coaching step adds to its input (a step's three small objects
//! were three allocations, where an input's large ones are few). Small
//! objects that lie close together in the document now share one copy of
//! the stretch of text that holds them.

use std::ops::Deref;
use std::sync::Arc;

use super::KeyFilter;
use super::key_filter::FoldedKeyFilter;

/// Validated text kept by an object: all of an `Arc<str>`, or a stretch of
/// a chunk of a document shared with the objects kept beside it; with the
/// filter of the object's top-level keys.
///
/// Three words, the filter folded to 32 bits beside the stretch's place:
/// with the box of what reading it built, an object kept as text is five,
/// as small as before chunks.
#[derive(Clone)]
pub(crate) struct KeptText {
    chunk: Arc<str>,
    /// The filter of the object's top-level keys.
    pub(crate) keys: FoldedKeyFilter,
    /// Where the text lies in `chunk`: its start in the high 16 bits, its
    /// length in the low 16, or [`WHOLE`] for all of `chunk` (which may be
    /// longer than that can say). Chunks are short (see [`SMALL`] and
    /// [`REACH`]).
    at: u32,
}

/// [`KeptText::at`] for text that is all of its chunk.
const WHOLE: u32 = u32::MAX;

impl KeptText {
    /// Text of its own.
    pub(crate) fn own(text: Arc<str>, keys: KeyFilter) -> KeptText {
        KeptText::own_folded(text, keys.folded())
    }

    /// Text of its own, its filter already folded.
    pub(crate) fn own_folded(text: Arc<str>, keys: FoldedKeyFilter) -> KeptText {
        KeptText {
            chunk: text,
            keys,
            at: WHOLE,
        }
    }

    /// The stretch `start..start + len` of `chunk`; `None` when it is not
    /// one (out of the chunk, not on character boundaries) or lies too far
    /// in for 16 bits.
    pub(crate) fn part(
        chunk: &Arc<str>,
        start: usize,
        len: usize,
        keys: KeyFilter,
    ) -> Option<KeptText> {
        let (start16, len16) = (u16::try_from(start).ok()?, u16::try_from(len).ok()?);
        let at = u32::from(start16) << 16 | u32::from(len16);
        if at == WHOLE {
            return None;
        }
        chunk.get(start..start + len)?;
        Some(KeptText {
            chunk: Arc::clone(chunk),
            keys: keys.folded(),
            at,
        })
    }
}

impl Deref for KeptText {
    type Target = str;

    #[inline]
    fn deref(&self) -> &str {
        if self.at == WHOLE {
            return &self.chunk;
        }
        let (start, len) = ((self.at >> 16) as usize, (self.at & 0xFFFF) as usize);
        // In bounds and on character boundaries, checked by `part`; the
        // chunk never changes.
        self.chunk.get(start..start + len).unwrap_or_default()
    }
}

/// The longest free-form object a chunk holds; longer ones get a copy of
/// their own (a chunk pays off where allocations cost more than copies).
const SMALL: usize = 2 * 1024;

/// How far a new chunk reaches from the start of the object that starts it.
/// The small objects of a usual input (tools, attributes) or of what a
/// trajectory step adds to its input (`arguments`, internal steps,
/// `execution`, then the next input's tools) lie within about 2 KiB; a
/// longer reach copies more of what lies beyond them (a `memory` kept on
/// its own, say) and so meets the copy limit of [`TextChunks`] sooner
/// (a reach of 4 KiB ran into each input's `memory` and saved a coaching
/// parse a sixteenth of what 2 KiB saves).
const REACH: usize = 2 * 1024;

/// The chunks of one document, for a direct reader.
///
/// A small object starts a chunk (a copy of the document from its first
/// byte to [`REACH`] bytes on) unless it lies within the last one. What the
/// chunks copy is kept to at most twice the small objects they hold plus
/// one chunk: once past that, small objects are copied alone, so a document
/// whose small objects lie far apart costs no more memory than before.
#[derive(Default)]
pub(crate) struct TextChunks {
    /// The last chunk, and where it starts in the document.
    last: Option<(Arc<str>, usize)>,
    /// Bytes of the small objects kept so far.
    kept: usize,
    /// Bytes the chunks copied so far.
    copied: usize,
}

impl TextChunks {
    /// The text of the validated object at `range` of the document `doc`,
    /// whose top-level keys are behind `keys`.
    #[inline]
    pub(crate) fn keep(
        &mut self,
        doc: &str,
        range: std::ops::Range<usize>,
        keys: KeyFilter,
    ) -> Option<KeptText> {
        let text = doc.get(range.clone())?;
        if text.len() > SMALL {
            return Some(KeptText::own(text.into(), keys));
        }
        self.kept += text.len();
        if let Some((chunk, at)) = &self.last {
            if range.start >= *at && range.end <= at + chunk.len() {
                if let Some(part) = KeptText::part(chunk, range.start - at, text.len(), keys) {
                    return Some(part);
                }
            }
        }
        if self.copied > 2 * self.kept {
            return Some(KeptText::own(text.into(), keys));
        }
        let mut end = range.end.max(range.start + REACH).min(doc.len());
        while !doc.is_char_boundary(end) {
            end -= 1;
        }
        let chunk: Arc<str> = doc.get(range.start..end)?.into();
        self.copied += chunk.len();
        let part = KeptText::part(&chunk, 0, text.len(), keys);
        self.last = Some((chunk, range.start));
        part.or_else(|| Some(KeptText::own(text.into(), keys)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_close_together_share_one_chunk() {
        let doc = r#"[{"a":1},{"b":2},{"c":"é"}]"#;
        let mut chunks = TextChunks::default();
        let a = chunks.keep(doc, 1..8, KeyFilter::ANY).unwrap();
        let b = chunks.keep(doc, 9..16, KeyFilter::ANY).unwrap();
        let c = chunks.keep(doc, 17..27, KeyFilter::ANY).unwrap();
        assert_eq!(
            (&*a, &*b, &*c),
            (r#"{"a":1}"#, r#"{"b":2}"#, r#"{"c":"é"}"#)
        );
        assert!(Arc::ptr_eq(&a.chunk, &b.chunk) && Arc::ptr_eq(&b.chunk, &c.chunk));
        // The chunk ends with the document, on a character boundary.
        assert_eq!(&*a.chunk, &doc[1..]);
    }

    #[test]
    fn large_objects_and_far_apart_objects_are_copied_alone() {
        let big = format!(r#"{{"k":"{}"}}"#, "x".repeat(SMALL));
        let mut chunks = TextChunks::default();
        let t = chunks.keep(&big, 0..big.len(), KeyFilter::ANY).unwrap();
        assert_eq!(t.at, WHOLE);
        assert_eq!(&*t, big);

        // Small objects 10 KiB apart: the first starts a chunk, the next
        // ones would copy far more than they keep.
        let gap = " ".repeat(10 * 1024);
        let doc = format!(r#"[{{"a":1}},{gap}{{"b":2}},{gap}{{"c":3}}]"#);
        let mut chunks = TextChunks::default();
        let mut at = 0;
        let mut texts = Vec::new();
        for _ in 0..3 {
            let start = at + doc[at..].find('{').unwrap();
            let end = start + 7;
            texts.push(chunks.keep(&doc, start..end, KeyFilter::ANY).unwrap());
            at = end;
        }
        assert_eq!(
            texts.iter().map(|t| &**t).collect::<Vec<_>>(),
            [r#"{"a":1}"#, r#"{"b":2}"#, r#"{"c":3}"#]
        );
        assert_eq!(chunks.copied, REACH);
        assert_eq!(texts[1].at, WHOLE);
        assert_eq!(texts[2].at, WHOLE);
    }

    #[test]
    fn a_chunk_stops_before_a_character_it_would_cut() {
        // `REACH` bytes on from the object falls inside the three bytes of
        // `€`: the chunk stops before it.
        let pad = "a".repeat(REACH - 8);
        let doc = format!(r#"{{"a":1}}{pad}€€"#);
        let mut chunks = TextChunks::default();
        let t = chunks.keep(&doc, 0..7, KeyFilter::ANY).unwrap();
        assert_eq!(&*t, r#"{"a":1}"#);
        assert!(t.chunk.len() < REACH && t.chunk.ends_with('a'));
    }

    #[test]
    fn stretches_that_are_not_text_of_the_chunk_are_refused() {
        let chunk: Arc<str> = "{\"é\":1}".into();
        assert!(KeptText::part(&chunk, 0, 100, KeyFilter::ANY).is_none());
        assert!(KeptText::part(&chunk, 1 << 16, 1, KeyFilter::ANY).is_none());
        assert!(KeptText::part(&chunk, 3, 2, KeyFilter::ANY).is_none());
        assert_eq!(&*KeptText::part(&chunk, 0, 1, KeyFilter::ANY).unwrap(), "{");
    }
}
