//! The parser: reads documents the way the reference's `json.loads` does.
//!
//! The reference decodes bodies with CPython's `json.loads` on the decoded
//! text. This parser accepts and rejects the same texts, with three
//! documented differences (see `docs/conformance.md`): lone surrogate escapes
//! are rejected, integers have no digit limit, and invalid UTF-8 is rejected.
//!
//! It never recurses: nesting is tracked on an explicit stack, so no input can
//! overflow the thread's stack. Documents nested deeper than the caller's
//! [`Limits::depth`] are rejected like CPython rejects them.
//!
//! A [`Shape`] tells the parser where a document holds free-form objects, so
//! that clean ones are kept as validated text instead of trees; the shapes
//! themselves belong to the documents that declare them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use super::kept::{EXACT_FALLBACK_BYTES, KeptInputs};
use super::key_set::{KeySet, count_distinct, keep_repeats, key_text, offsets_fit};
use super::lex::{
    Limits, PResult, escaped_string_end, hex4, number_end, plain_run_end, short_escape,
    skip_validated_value, surrogate_pair, ws_end,
};
use super::normal::normalize_free_object;
use super::path::{Location, Segment};
use super::scan::{ScanBuffers, scan_free_object};
use super::{Json, KeyFilter, Map, Number, Object};

/// Objects with more keys than this get a hash index for duplicate checks.
const LINEAR_KEY_LIMIT: usize = 12;

/// A position in the input, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Byte offset from the start.
    pub offset: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// 0-based character offset (what Python's `json` reports as `pos`).
    pub char_offset: usize,
}

impl Position {
    pub(crate) fn locate(src: &[u8], offset: usize) -> Position {
        let offset = offset.min(src.len());
        let before = &src[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let chars = |bytes: &[u8]| bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count();
        Position {
            offset,
            line,
            column: chars(&before[line_start..]) + 1,
            char_offset: chars(before),
        }
    }
}

/// Text that is not one JSON document: where, and what is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    /// Where the problem is.
    pub(crate) position: Position,
    /// What is wrong, in a few words.
    pub(crate) detail: &'static str,
}

impl SyntaxError {
    fn at(src: &[u8], offset: usize, detail: &'static str) -> SyntaxError {
        SyntaxError {
            position: Position::locate(src, offset),
            detail,
        }
    }
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {} column {}: {}",
            self.position.line, self.position.column, self.detail
        )
    }
}

/// What a document looks like, as far as reading it is concerned: where
/// its free-form objects are. A document type declares its shape as a
/// constant; the parser follows it.
#[derive(Debug)]
pub(crate) enum Shape {
    /// Anything: built as a tree.
    Any,
    /// An object whose listed members have their own shapes; the others
    /// are [`Shape::Any`].
    Fields(&'static [(&'static str, Shape)]),
    /// An object that is a strict model: `declared` are all its fields
    /// (any other key is an `extra_forbidden` error), `fields` the shapes of
    /// some of them as in [`Shape::Fields`]. [`parse_shaped_counted`] builds
    /// the values of its first unknown keys (each an error, whose input is
    /// the value) and only counts the distinct ones past the error cap,
    /// from a list of their offsets: a hostile object of millions of keys
    /// costs four bytes per key, not a tree.
    Model {
        declared: &'static [&'static str],
        fields: &'static [(&'static str, Shape)],
    },
    /// An array whose elements have a shape. When that shape is
    /// [`Shape::Fields`] or [`Shape::FreeObject`], every element must be an
    /// object: [`parse_shaped_counted`] keeps the first scalars there (each
    /// an error) and only counts the ones past the error cap.
    List(&'static Shape),
    /// A field of a [`Shape::Model`] whose type is a scalar (a string, a
    /// number, a boolean, a literal): an array or an object there is an
    /// error whatever it holds, and only that error's input, so
    /// [`parse_shaped_counted`] reads it as text, as an undeclared key's
    /// value.
    Scalar,
    /// A `dict[str, JsonValue]` position: keep the object as validated text
    /// when it is clean, as its normal text (what its tree writes, see
    /// `normal.rs`) when its keys repeat or are escaped; an error to report
    /// falls back to a tree, which validation then examines in full.
    FreeObject,
}

/// How the parser reads the value in front of it: by the shape of a
/// document, or as a part of text that was validated before it was kept.
#[derive(Clone, Copy)]
enum Mode {
    /// A document following its shape.
    Shaped(&'static Shape),
    /// The top level of an object kept as validated text: its entries are
    /// read, the objects among their values stay text ([`Mode::InKeptText`]).
    KeptTop,
    /// Inside [`Mode::KeptTop`]: objects are kept as text, arrays are read
    /// with their elements in this mode too.
    InKeptText,
}

const ANY: Mode = Mode::Shaped(&Shape::Any);

impl Mode {
    fn field(self, key: &str) -> Mode {
        match self {
            Mode::Shaped(Shape::Fields(fields) | Shape::Model { fields, .. }) => fields
                .iter()
                .find(|(k, _)| *k == key)
                .map_or(ANY, |(_, s)| Mode::Shaped(s)),
            Mode::KeptTop | Mode::InKeptText => Mode::InKeptText,
            Mode::Shaped(_) => ANY,
        }
    }

    fn element(self) -> Mode {
        match self {
            Mode::Shaped(Shape::List(s)) => Mode::Shaped(s),
            Mode::KeptTop | Mode::InKeptText => Mode::InKeptText,
            Mode::Shaped(_) => ANY,
        }
    }
}

enum Frame {
    Array {
        items: Vec<Json>,
        mode: Mode,
        /// Scalars kept where objects belong.
        scalars: usize,
    },
    Object {
        map: Map<Json>,
        key: String,
        mode: Mode,
        /// Key -> index, built once the object grows past `LINEAR_KEY_LIMIT`.
        index: Option<HashMap<String, usize>>,
        /// Distinct unknown keys of a [`Shape::Model`] built so far.
        unknown: usize,
        /// The offsets of the unknown keys past those, counted only (their
        /// distinct keys, once the object is read).
        dropped: Vec<u32>,
    },
}

/// The parser's state over one input. Readers outside this file use it
/// through [`super::Cursor`].
pub(super) struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    pos: usize,
    limits: Limits,
    scratch: ScanBuffers,
    /// How many scalars to keep per array whose elements must be objects,
    /// when the caller counts the rest instead ([`parse_shaped_counted`]).
    keep_scalars: Option<usize>,
    /// Scalars not kept.
    dropped: usize,
    /// Values of undeclared keys of models, kept as text
    /// ([`parse_shaped_counted`]).
    kept: KeptInputs,
}

impl<'a> Parser<'a> {
    /// A parser at the start of `src` (`text` is the same bytes as `str`).
    pub(super) fn new(src: &'a [u8], text: &'a str, limits: Limits) -> Parser<'a> {
        Parser {
            src,
            text,
            pos: 0,
            limits,
            scratch: ScanBuffers::default(),
            keep_scalars: None,
            dropped: 0,
            kept: KeptInputs::default(),
        }
    }

    pub(super) fn src(&self) -> &'a [u8] {
        self.src
    }

    pub(super) fn text(&self) -> &'a str {
        self.text
    }

    pub(super) fn limits(&self) -> Limits {
        self.limits
    }

    /// The offset of the next byte.
    #[inline]
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// Moves to `pos`, which the caller found by reading `src` from here.
    #[inline]
    pub(super) fn set_pos(&mut self, pos: usize) {
        self.pos = pos;
    }
}

/// Repeated keys of a document found by [`duplicate_keys`]: the first
/// `keep` locations, and how many more there were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Duplicates {
    /// The locations of the later occurrences, in document order.
    pub(crate) found: Vec<Location>,
    /// Repeats past the first `keep`, counted only.
    pub(crate) omitted: usize,
}

/// Every repeated key in a document, at the location of each later
/// occurrence (the value that wins), in document order: the first `keep`
/// of them, the others counted. The reference's `json.loads` keeps the last
/// value without a word; validators and lints use this to say so.
///
/// The document is read as the parser reads it (the same texts are
/// refused, with the same messages) but no value is built: what is held is
/// the keys of the objects open at a time (a [`KeySet`] of offsets into
/// `src`, a few bytes per key) and the locations kept, so a document of
/// millions of values or keys costs its scan, not a tree.
pub(crate) fn duplicate_keys(
    src: &[u8],
    limits: Limits,
    keep: usize,
) -> Result<Duplicates, SyntaxError> {
    let text = std::str::from_utf8(src)
        .map_err(|e| SyntaxError::at(src, e.valid_up_to(), "invalid UTF-8 in the body"))?;
    let mut p = Parser::new(src, text, limits);
    p.scan_duplicates(keep)
        .map_err(|(at, msg)| SyntaxError::at(src, at, msg))
}

/// A container open during [`duplicate_keys`].
enum KeyFrame<'a> {
    /// An array, at the element `index`.
    Array { index: usize },
    /// An object, at the member `key` (`repeated` when an earlier member
    /// has the same key), with the keys read so far.
    Object {
        key: Cow<'a, str>,
        keys: Keys,
        repeated: bool,
    },
}

/// Objects with more keys than this keep them in a sorted list (four bytes
/// a key) and have their repeats found when they close.
const LARGE_OBJECT: usize = 4096;

/// The keys read so far in an object open during [`duplicate_keys`].
enum Keys {
    /// A set: each repeat is found as it is read.
    Table(KeySet),
    /// Past [`LARGE_OBJECT`] keys, the offsets of the distinct keys read
    /// until then and of every key since: repeats are found by sorting
    /// when the object closes ([`keep_repeats`]).
    Sorted(Vec<u32>),
}

impl Keys {
    /// Adds the key at `at`: `true` when it is known to repeat one.
    fn insert(&mut self, src: &[u8], text: &str, at: usize) -> bool {
        match self {
            Keys::Table(set) => {
                let repeated = !set.insert(src, text, at);
                if set.len() >= LARGE_OBJECT && offsets_fit(src) {
                    let set = std::mem::replace(set, KeySet::new(&[]));
                    if let Some(offsets) = set.into_offsets() {
                        *self = Keys::Sorted(offsets);
                    }
                }
                repeated
            }
            Keys::Sorted(offsets) => {
                // Fits: checked before the switch.
                offsets.push(at as u32);
                false
            }
        }
    }
}

/// Repeats found so far: the first `keep` by position (the end of the
/// repeated member's value, where the parser replaces the earlier value),
/// and how many there were in all.
struct Found {
    kept: Vec<(usize, Location)>,
    total: usize,
    keep: usize,
}

impl Found {
    /// Counts a repeat at `pos`; keeps it (its location made by `loc`)
    /// when it is among the first `keep` by position. `false` when it was
    /// only counted.
    fn add(&mut self, pos: usize, loc: impl FnOnce() -> Location) -> bool {
        self.total += 1;
        if self.kept.len() >= self.keep && self.kept.last().is_none_or(|(p, _)| *p < pos) {
            return false;
        }
        let at = self.kept.partition_point(|(p, _)| *p < pos);
        self.kept.insert(at, (pos, loc()));
        self.kept.truncate(self.keep);
        true
    }
}

impl<'a> Parser<'a> {
    fn scan_duplicates(&mut self, keep: usize) -> PResult<Duplicates> {
        if self.src.starts_with("\u{feff}".as_bytes()) {
            return Err((0, "unexpected byte order mark (U+FEFF) before the document"));
        }
        let mut out = Found {
            kept: Vec::new(),
            total: 0,
            keep,
        };
        let mut stack: Vec<KeyFrame<'a>> = Vec::new();
        'value: loop {
            self.skip_ws();
            match self.peek() {
                Some(open @ (b'[' | b'{')) => {
                    if stack.len() >= self.limits.depth {
                        return Err((self.pos, "maximum nesting depth exceeded"));
                    }
                    self.pos += 1;
                    self.skip_ws();
                    let close = if open == b'[' { b']' } else { b'}' };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                    } else if open == b'[' {
                        stack.push(KeyFrame::Array { index: 0 });
                        continue 'value;
                    } else {
                        let at = self.pos;
                        let key = self.borrowed_key()?;
                        let mut keys = Keys::Table(KeySet::new(self.src));
                        keys.insert(self.src, self.text, at);
                        stack.push(KeyFrame::Object {
                            key,
                            keys,
                            repeated: false,
                        });
                        continue 'value;
                    }
                }
                _ => self.skip_scalar()?,
            }
            // A value is complete: a repeated key is counted once its value
            // is read (where the parser replaces the earlier value), then
            // the enclosing container moves on.
            loop {
                if let Some(KeyFrame::Object { repeated, .. }) = stack.last_mut() {
                    if std::mem::take(repeated) {
                        out.add(self.pos, || key_path(&stack, None));
                    }
                }
                let Some(top) = stack.last_mut() else {
                    break 'value;
                };
                self.skip_ws();
                match (top, self.peek()) {
                    (KeyFrame::Array { index }, Some(b',')) => {
                        self.pos += 1;
                        *index += 1;
                        continue 'value;
                    }
                    (
                        KeyFrame::Object {
                            key,
                            keys,
                            repeated,
                        },
                        Some(b','),
                    ) => {
                        self.pos += 1;
                        self.skip_ws();
                        let at = self.pos;
                        let next = self.borrowed_key()?;
                        *repeated = keys.insert(self.src, self.text, at);
                        *key = next;
                        continue 'value;
                    }
                    (KeyFrame::Array { .. }, Some(b']'))
                    | (KeyFrame::Object { .. }, Some(b'}')) => {
                        self.pos += 1;
                        if let Some(KeyFrame::Object {
                            keys: Keys::Sorted(mut offsets),
                            ..
                        }) = stack.pop()
                        {
                            self.large_object_repeats(&mut offsets, &stack, &mut out);
                        }
                    }
                    (KeyFrame::Array { .. }, _) => {
                        return Err((self.pos, "expected ',' or ']' in an array"));
                    }
                    (KeyFrame::Object { .. }, _) => {
                        return Err((self.pos, "expected ',' or '}' in an object"));
                    }
                }
            }
        }
        self.skip_ws();
        if self.pos != self.src.len() {
            return Err((self.pos, "extra data after the document"));
        }
        Ok(Duplicates {
            omitted: out.total - out.kept.len(),
            found: out.kept.into_iter().map(|(_, loc)| loc).collect(),
        })
    }

    /// The repeats of a large object that just closed, its keys' offsets
    /// in `offsets`, `stack` its enclosing containers: each at the end of
    /// its value, as the scan of a small object finds them.
    fn large_object_repeats(
        &self,
        offsets: &mut Vec<u32>,
        stack: &[KeyFrame<'_>],
        out: &mut Found,
    ) {
        keep_repeats(offsets, self.src, self.text);
        for (n, &at) in offsets.iter().enumerate() {
            let at = at as usize;
            // The member was read without error: its key, `:` and value.
            let colon = ws_end(self.src, escaped_string_end(self.src, at + 1) + 1);
            let value = ws_end(self.src, colon + 1);
            let end = skip_validated_value(self.src, value).unwrap_or(value);
            let key = || Segment::Key(key_text(self.src, self.text, at).into_owned());
            if !out.add(end, || key_path(stack, Some(key()))) {
                // Later repeats of this object end later: counted only.
                out.total += offsets.len() - n - 1;
                break;
            }
        }
    }

    /// Reads (and checks) a scalar as [`Parser::scalar`] does, without
    /// building it when it is a string without escapes or a number.
    fn skip_scalar(&mut self) -> PResult<()> {
        match self.peek() {
            Some(b'"') => {
                let end = plain_run_end(self.src, self.pos + 1);
                if self.src.get(end) == Some(&b'"') {
                    self.pos = end + 1;
                    return Ok(());
                }
            }
            Some(b'-' | b'0'..=b'9') if !self.src[self.pos..].starts_with(b"-Infinity") => {
                let end = number_end(self.src, self.pos).ok_or((self.pos, "invalid number"))?;
                self.pos = end;
                return Ok(());
            }
            _ => {}
        }
        self.scalar().map(drop)
    }

    /// [`Parser::object_key`], borrowing the key from the input when it has
    /// no escapes.
    pub(super) fn borrowed_key(&mut self) -> PResult<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            return Err((self.pos, "expected a property name in double quotes"));
        }
        let start = self.pos + 1;
        let end = plain_run_end(self.src, start);
        let key = if self.src.get(end) == Some(&b'"') {
            self.pos = end + 1;
            Cow::Borrowed(&self.text[start..end])
        } else {
            Cow::Owned(self.string()?)
        };
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err((self.pos, "expected ':' after a property name"));
        }
        self.pos += 1;
        Ok(key)
    }
}

/// The location of the member or element each open container is at, and
/// then `last`.
fn key_path(stack: &[KeyFrame<'_>], last: Option<Segment>) -> Location {
    let segs: Vec<Segment> = stack
        .iter()
        .map(|f| match f {
            KeyFrame::Array { index } => Segment::Index(*index),
            KeyFrame::Object { key, .. } => Segment::Key(key.as_ref().to_owned()),
        })
        .chain(last)
        .collect();
    Location::from(segs)
}

/// Parses one document into a tree.
pub(crate) fn parse(src: &[u8], limits: Limits) -> Result<Json, SyntaxError> {
    parse_shaped(src, &Shape::Any, limits)
}

/// Parses one document of the given shape: its clean free-form objects are
/// kept as validated text.
pub(crate) fn parse_shaped(
    src: &[u8],
    shape: &'static Shape,
    limits: Limits,
) -> Result<Json, SyntaxError> {
    let text = match std::str::from_utf8(src) {
        Ok(t) => t,
        Err(e) => {
            return Err(SyntaxError::at(
                src,
                e.valid_up_to(),
                "invalid UTF-8 in the body",
            ));
        }
    };
    let mut p = Parser::new(src, text, limits);
    p.document(Mode::Shaped(shape))
        .map_err(|(at, msg)| SyntaxError::at(src, at, msg))
}

/// [`parse_shaped`], keeping at most `keep` scalars in each array whose
/// elements must be objects (see [`Shape::List`]): the others are errors
/// of the same kind, counted and returned with the value instead of built.
/// A hostile `[0, 0, ...]` where objects belong then costs its scan, not a
/// tree of millions of values.
///
/// The value of an undeclared key of a [`Shape::Model`] (or of a
/// [`Shape::Scalar`] field) that is an array or an object is an error
/// whatever it holds, and only ever that error's `input`: it is read as its
/// text ([`KeptInputs`]), with an empty array or object in its place in the
/// tree.
pub(crate) fn parse_shaped_counted(
    src: &[u8],
    shape: &'static Shape,
    limits: Limits,
    keep: usize,
) -> Result<(Json, Counted), SyntaxError> {
    let text = std::str::from_utf8(src)
        .map_err(|e| SyntaxError::at(src, e.valid_up_to(), "invalid UTF-8 in the body"))?;
    let mut p = Parser::new(src, text, limits);
    p.keep_scalars = Some(keep);
    let value = p
        .document(Mode::Shaped(shape))
        .map_err(|(at, msg)| SyntaxError::at(src, at, msg))?;
    Ok((
        value,
        Counted {
            dropped: p.dropped,
            kept: p.kept,
        },
    ))
}

/// What [`parse_shaped_counted`] read besides the tree.
#[derive(Debug, Default)]
pub(crate) struct Counted {
    /// Errors past the cap that were counted, not built.
    pub(crate) dropped: usize,
    /// Values that are only errors' inputs, kept as text.
    pub(crate) kept: KeptInputs,
}

/// How the parser reads the value of an object's member.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    /// As a tree.
    Build,
    /// Checked and counted, not kept ([`Parser::drop_member`]).
    Skip,
    /// An undeclared key of a model: a container is kept as text.
    Keep,
}

/// Elements in this mode must be objects (models or free-form objects).
fn objects_only(mode: Mode) -> bool {
    matches!(
        mode,
        Mode::Shaped(Shape::Fields(_) | Shape::Model { .. } | Shape::FreeObject)
    )
}

fn is_scalar(v: &Json) -> bool {
    matches!(
        v,
        Json::Null | Json::Bool(_) | Json::Number(_) | Json::String(_)
    )
}

impl<'a> Parser<'a> {
    pub(crate) fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    pub(crate) fn skip_ws(&mut self) {
        self.pos = ws_end(self.src, self.pos);
    }

    fn document(&mut self, mode: Mode) -> PResult<Json> {
        if self.src.starts_with("\u{feff}".as_bytes()) {
            return Err((0, "unexpected byte order mark (U+FEFF) before the document"));
        }
        self.skip_ws();
        let value = self.value_tree(mode)?;
        self.skip_ws();
        if self.pos != self.src.len() {
            return Err((self.pos, "extra data after the document"));
        }
        Ok(value)
    }

    /// Parses one value of any depth without recursion.
    fn value_tree(&mut self, root_mode: Mode) -> PResult<Json> {
        let mut stack: Vec<Frame> = Vec::new();
        let mut mode = root_mode;
        // How to read the next value when it is a member of an object:
        // an unknown member of a model past the error cap is read without
        // building it, one before it is kept as text when it is a container
        // ([`Parser::drop_member`]).
        let mut next = Read::Build;
        // The value just completed was skipped: nothing to insert.
        let mut skipped = false;
        'value: loop {
            // Start of a value.
            self.skip_ws();
            let read = std::mem::replace(&mut next, Read::Build);
            let mut done = if read == Read::Skip {
                self.skip_value(stack.len())?;
                skipped = true;
                Json::Null
            } else if let Some(place) = (read == Read::Keep)
                .then(|| self.keep_as_text(&stack))
                .transpose()?
                .flatten()
            {
                place
            } else {
                match self.peek() {
                    Some(b'{') if matches!(mode, Mode::InKeptText) => {
                        // Inside text that was validated as a whole: skipping is
                        // enough.
                        let start = self.pos;
                        let end = skip_validated_value(self.src, start)
                            .ok_or((start, "unterminated object in validated text"))?;
                        self.pos = end;
                        let text = &self.text[start..end];
                        Json::Object(Object::from_validated_text(text, KeyFilter::ANY))
                    }
                    Some(b'{') if matches!(mode, Mode::Shaped(Shape::FreeObject)) => {
                        let start = self.pos;
                        match scan_free_object(
                            self.src,
                            start,
                            stack.len(),
                            self.limits,
                            &mut self.scratch,
                        ) {
                            Some((end, keys)) => {
                                self.pos = end;
                                let text = &self.text[start..end];
                                Json::Object(Object::from_validated_text(text, keys))
                            }
                            // A repeated or escaped key: its normal text,
                            // what writing its tree would give. Anything
                            // else is an error to report: a tree.
                            None => match normalize_free_object(
                                self.src,
                                self.text,
                                start,
                                stack.len(),
                                self.limits,
                            ) {
                                Some((end, text, keys)) => {
                                    self.pos = end;
                                    Json::Object(Object::from_validated_text(&text, keys))
                                }
                                None => {
                                    mode = ANY;
                                    continue 'value;
                                }
                            },
                        }
                    }
                    Some(b'[') => {
                        if stack.len() >= self.limits.depth {
                            return Err((self.pos, "maximum nesting depth exceeded"));
                        }
                        self.pos += 1;
                        self.skip_ws();
                        if self.peek() == Some(b']') {
                            self.pos += 1;
                            Json::Array(Vec::new())
                        } else {
                            let element = mode.element();
                            stack.push(Frame::Array {
                                items: Vec::new(),
                                mode: element,
                                scalars: 0,
                            });
                            mode = element;
                            continue 'value;
                        }
                    }
                    Some(b'{') => {
                        if stack.len() >= self.limits.depth {
                            return Err((self.pos, "maximum nesting depth exceeded"));
                        }
                        self.pos += 1;
                        self.skip_ws();
                        if self.peek() == Some(b'}') {
                            self.pos += 1;
                            Json::Object(Object::new())
                        } else {
                            let at = self.pos;
                            let key = self.object_key()?;
                            let child = mode.field(&key);
                            let (mut unknown, mut dropped) = (0, Vec::new());
                            next = self.drop_member(
                                mode,
                                (&Map::new(), &None),
                                (&mut unknown, &mut dropped),
                                &key,
                                at,
                            );
                            stack.push(Frame::Object {
                                map: Map::new(),
                                key,
                                mode,
                                index: None,
                                unknown,
                                dropped,
                            });
                            mode = child;
                            continue 'value;
                        }
                    }
                    _ => self.scalar()?,
                }
            };
            // A value is complete: hand it to the enclosing container.
            loop {
                let Some(top) = stack.last_mut() else {
                    return Ok(done);
                };
                self.skip_ws();
                match top {
                    Frame::Array {
                        items,
                        mode: element,
                        scalars,
                    } => {
                        match self.keep_scalars {
                            Some(keep) if objects_only(*element) && is_scalar(&done) => {
                                if *scalars < keep {
                                    *scalars += 1;
                                    items.push(done);
                                } else {
                                    self.dropped += 1;
                                }
                            }
                            _ => items.push(done),
                        }
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                mode = *element;
                                continue 'value;
                            }
                            Some(b']') => {
                                self.pos += 1;
                                let Some(Frame::Array { items, .. }) = stack.pop() else {
                                    unreachable!("the top frame is an array")
                                };
                                done = Json::Array(items);
                            }
                            _ => return Err((self.pos, "expected ',' or ']' in an array")),
                        }
                    }
                    Frame::Object {
                        map,
                        key,
                        mode: object_mode,
                        index,
                        unknown,
                        dropped,
                    } => {
                        if !std::mem::take(&mut skipped) {
                            insert_last_wins(map, index, std::mem::take(key), done);
                        }
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                let at = self.pos;
                                *key = self.object_key()?;
                                mode = object_mode.field(key);
                                next = self.drop_member(
                                    *object_mode,
                                    (map, index),
                                    (unknown, dropped),
                                    key,
                                    at,
                                );
                                continue 'value;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                let Some(Frame::Object {
                                    map, mut dropped, ..
                                }) = stack.pop()
                                else {
                                    unreachable!("the top frame is an object")
                                };
                                if !dropped.is_empty() {
                                    self.dropped +=
                                        count_distinct(&mut dropped, self.src, self.text);
                                }
                                done = Json::Object(Object::from(map));
                            }
                            _ => return Err((self.pos, "expected ',' or '}' in an object")),
                        }
                    }
                }
            }
        }
    }

    /// `true` when the member `key` (its opening quote at `at`) of an
    /// object read in `mode` is to be skipped and counted: an unknown key of
    /// a [`Shape::Model`], not repeating one already built, once `keep`
    /// distinct unknown keys were built, when the caller counts errors past
    /// `keep` ([`parse_shaped_counted`]). Each distinct one is one
    /// `extra_forbidden` error whatever its value, so counting them (a
    /// repeat of a skipped key counts once) gives the errors of the whole
    /// tree; the kept ones take the last value of a repeated key, as the
    /// reference's dict does.
    #[inline]
    fn drop_member(
        &mut self,
        mode: Mode,
        (map, index): (&Map<Json>, &Option<HashMap<String, usize>>),
        (unknown, dropped): (&mut usize, &mut Vec<u32>),
        key: &str,
        at: usize,
    ) -> Read {
        let (Some(keep), Mode::Shaped(Shape::Model { declared, .. })) = (self.keep_scalars, mode)
        else {
            return Read::Build;
        };
        if declared.contains(&key) {
            return if matches!(mode.field(key), Mode::Shaped(Shape::Scalar)) {
                Read::Keep
            } else {
                Read::Build
            };
        }
        let built = match index {
            Some(idx) => idx.contains_key(key),
            None => map.contains_key(key),
        };
        if built {
            return Read::Keep;
        }
        if *unknown < keep || !offsets_fit(self.src) {
            *unknown += 1;
            return Read::Keep;
        }
        // Fits: checked just above.
        dropped.push(at as u32);
        Read::Skip
    }

    /// The value in front of the cursor is the current member of the object
    /// on top of `stack`, an undeclared key of a model or a
    /// [`Shape::Scalar`] field: when it is an array or an object, reads it
    /// as its text into [`Parser::kept`] and returns what holds its place
    /// in the tree (an empty array or object: validation refuses it as it
    /// would the value). `None` when it is to be built: a scalar (which
    /// also drops the text an earlier member of the same key left), or a
    /// small value whose text is not the tree's ([`EXACT_FALLBACK_BYTES`]);
    /// the cursor is then where it was.
    fn keep_as_text(&mut self, stack: &[Frame]) -> PResult<Option<Json>> {
        let loc = || {
            Location::from(
                stack
                    .iter()
                    .map(|f| match f {
                        Frame::Array { items, .. } => Segment::Index(items.len()),
                        Frame::Object { key, .. } => Segment::Key(key.clone()),
                    })
                    .collect::<Vec<_>>(),
            )
        };
        let place = match self.peek() {
            Some(b'[') => Json::Array(Vec::new()),
            Some(b'{') => Json::Object(Object::new()),
            _ => {
                if !self.kept.is_empty() {
                    self.kept.remove(&loc());
                }
                return Ok(None);
            }
        };
        let start = self.pos;
        // Checked first (the same errors), so that the text is sized once:
        // it is never longer than its source but for the two quotes of a
        // non-finite number.
        self.skip_value(stack.len())?;
        let mut text = String::with_capacity(self.pos - start + 2);
        self.pos = start;
        let exact = self.copy_value(stack.len(), &mut text)?;
        if !exact && self.pos - start <= EXACT_FALLBACK_BYTES {
            self.pos = start;
            if !self.kept.is_empty() {
                self.kept.remove(&loc());
            }
            return Ok(None);
        }
        self.kept.insert(loc(), std::sync::Arc::new(text));
        Ok(Some(place))
    }

    /// Reads the value in front of the cursor as [`Parser::value_tree`]
    /// does in [`ANY`] mode (the same texts refused with the same errors,
    /// `depth_before` containers already open) without building it.
    pub(super) fn skip_value(&mut self, depth_before: usize) -> PResult<()> {
        let mut open: Vec<u8> = Vec::new();
        'value: loop {
            self.skip_ws();
            match self.peek() {
                Some(c @ (b'[' | b'{')) => {
                    if depth_before + open.len() >= self.limits.depth {
                        return Err((self.pos, "maximum nesting depth exceeded"));
                    }
                    self.pos += 1;
                    self.skip_ws();
                    let close = if c == b'[' { b']' } else { b'}' };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                    } else {
                        open.push(c);
                        if c == b'{' {
                            self.borrowed_key()?;
                        }
                        continue 'value;
                    }
                }
                _ => self.skip_scalar()?,
            }
            loop {
                let Some(&top) = open.last() else {
                    return Ok(());
                };
                self.skip_ws();
                match (top, self.peek()) {
                    (b'[', Some(b',')) => {
                        self.pos += 1;
                        continue 'value;
                    }
                    (_, Some(b',')) => {
                        self.pos += 1;
                        self.skip_ws();
                        self.borrowed_key()?;
                        continue 'value;
                    }
                    (b'[', Some(b']')) | (b'{', Some(b'}')) => {
                        self.pos += 1;
                        open.pop();
                    }
                    (b'[', _) => return Err((self.pos, "expected ',' or ']' in an array")),
                    _ => return Err((self.pos, "expected ',' or '}' in an object")),
                }
            }
        }
    }

    /// `"key"` then `:`; leaves the cursor at the value.
    fn object_key(&mut self) -> PResult<String> {
        if self.peek() != Some(b'"') {
            return Err((self.pos, "expected a property name in double quotes"));
        }
        let key = self.string()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err((self.pos, "expected ':' after a property name"));
        }
        self.pos += 1;
        Ok(key)
    }

    pub(super) fn scalar(&mut self) -> PResult<Json> {
        let start = self.pos;
        match self.peek() {
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => {
                if self.src[self.pos..].starts_with(b"-Infinity") {
                    self.pos += "-Infinity".len();
                    return Ok(Json::Number(Number::from_parser("-Infinity")));
                }
                let end = number_end(self.src, self.pos).ok_or((start, "invalid number"))?;
                self.pos = end;
                Ok(Json::Number(Number::from_parser(&self.text[start..end])))
            }
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'N') => self.literal("NaN", Json::Number(Number::from_parser("NaN"))),
            Some(b'I') => self.literal("Infinity", Json::Number(Number::from_parser("Infinity"))),
            None => Err((start, "expected a value, found the end of the input")),
            _ => Err((start, "expected a value")),
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> PResult<Json> {
        if self.src[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err((self.pos, "expected a value"))
        }
    }

    /// A string starting at the opening quote, owned.
    pub(crate) fn string(&mut self) -> PResult<String> {
        self.string_cow().map(Cow::into_owned)
    }

    /// A string starting at the opening quote: borrowed from the document
    /// when it holds no escape (it reads as it is written), decoded
    /// otherwise.
    ///
    /// Inlined: most strings hold no escape, and a borrowed string handed
    /// back in registers is not written to memory and read back by the
    /// caller; the rest is [`Parser::escaped_string`].
    #[inline(always)]
    pub(crate) fn string_cow(&mut self) -> PResult<Cow<'a, str>> {
        let open = self.pos;
        self.pos += 1;
        let start = self.pos;
        self.pos = plain_run_end(self.src, self.pos);
        if self.peek() == Some(b'"') {
            let s = &self.text[start..self.pos];
            self.pos += 1;
            return Ok(Cow::Borrowed(s));
        }
        self.escaped_string(open, start).map(Cow::Owned)
    }

    /// The rest of [`Parser::string_cow`] for a string opened at `open`
    /// whose text from `start` stops before its closing quote: at an
    /// escape, at a control character or at the end of the document.
    #[inline(never)]
    fn escaped_string(&mut self, open: usize, start: usize) -> PResult<String> {
        match self.peek() {
            None => return Err((open, "unterminated string")),
            Some(b'\\') => {}
            Some(_) => return Err((self.pos, "raw control character in a string")),
        }
        let (src, text) = (self.src, self.text);
        // Sized once: the escaped text is never shorter than what it decodes
        // to, so the distance to the closing quote is enough.
        let mut out = String::with_capacity(escaped_string_end(src, self.pos) - start);
        out.push_str(text.get(start..self.pos).unwrap_or_default());
        // The position is kept in a local between escapes: the loop reads
        // and writes it at every step.
        let mut pos = self.pos;
        loop {
            // At a backslash. A one-letter escape (the usual kind: quotes
            // and line ends of embedded JSON and text) is decoded here, a
            // `\u` escape by `escape`.
            match src.get(pos + 1).copied().and_then(short_escape) {
                Some(ch) => {
                    out.push(ch);
                    pos += 2;
                }
                None => {
                    self.pos = pos;
                    self.escape(&mut out)?;
                    pos = self.pos;
                }
            }
            let run_end = plain_run_end(src, pos);
            if run_end > pos {
                // Runs end before an ASCII byte or at the end: always on a
                // character boundary.
                out.push_str(text.get(pos..run_end).unwrap_or_default());
                pos = run_end;
            }
            match src.get(pos) {
                Some(b'\\') => {}
                Some(b'"') => {
                    self.pos = pos + 1;
                    return Ok(out);
                }
                None => {
                    self.pos = pos;
                    return Err((open, "unterminated string"));
                }
                Some(_) => {
                    self.pos = pos;
                    return Err((pos, "raw control character in a string"));
                }
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> PResult<()> {
        let at = self.pos;
        let c = self
            .src
            .get(self.pos + 1)
            .copied()
            .ok_or((at, "unterminated string"))?;
        self.pos += 2;
        let ch = match c {
            b'u' => {
                let hi = self.hex4().ok_or((at, "invalid \\uXXXX escape"))?;
                if (0xD800..0xDC00).contains(&hi) {
                    // A high surrogate must be followed by an escaped low one.
                    let pair = self.src.get(self.pos..self.pos + 2) == Some(b"\\u");
                    if pair {
                        let save = self.pos;
                        self.pos += 2;
                        match self.hex4() {
                            Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                surrogate_pair(hi, lo).ok_or((at, "invalid surrogate pair"))?
                            }
                            _ => {
                                self.pos = save;
                                return Err((at, LONE_SURROGATE));
                            }
                        }
                    } else {
                        return Err((at, LONE_SURROGATE));
                    }
                } else if (0xDC00..0xE000).contains(&hi) {
                    return Err((at, LONE_SURROGATE));
                } else {
                    char::from_u32(hi).ok_or((at, "invalid \\uXXXX escape"))?
                }
            }
            b => short_escape(b).ok_or((at, "invalid escape in a string"))?,
        };
        out.push(ch);
        Ok(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let v = hex4(self.src, self.pos)?;
        self.pos += 4;
        Some(v)
    }
}

pub(super) const LONE_SURROGATE: &str =
    "lone surrogate escape: a UTF-16 surrogate without its pair is not a Unicode character";

/// Inserts like a Python dict: a repeated key keeps its first position and
/// takes the last value.
fn insert_last_wins(
    map: &mut Map<Json>,
    index: &mut Option<HashMap<String, usize>>,
    key: String,
    value: Json,
) {
    if let Some(idx) = index {
        if let Some(&i) = idx.get(&key) {
            map.replace_at(i, value);
            return;
        }
        idx.insert(key.clone(), map.len());
        map.push_unique(key, value);
        return;
    }
    if let Some(i) = map.entries().iter().position(|(k, _)| *k == key) {
        map.replace_at(i, value);
        return;
    }
    map.push_unique(key, value);
    if map.len() > LINEAR_KEY_LIMIT {
        let idx = map
            .entries()
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (k.clone(), i))
            .collect();
        *index = Some(idx);
    }
}

/// Parses text that is already known to be UTF-8 and valid JSON.
fn parse_validated_text(text: &str, mode: Mode) -> Option<Json> {
    let mut p = Parser::new(text.as_bytes(), text, Limits::NONE);
    p.document(mode).ok()
}

/// Validated object text read one level deep: the objects among its values
/// stay text ([`Mode::KeptTop`]). For `kept_text.rs`.
pub(super) fn validated_object_one_level(text: &str) -> Option<Json> {
    parse_validated_text(text, Mode::KeptTop)
}

/// A validated value read with its objects kept as text
/// ([`Mode::InKeptText`]). For `kept_text.rs`.
pub(super) fn validated_value(text: &str) -> Option<Json> {
    parse_validated_text(text, Mode::InKeptText)
}

/// Test support: JSON-ish text that nests `leaf` tokens in arrays and in
/// objects keyed by `key` tokens (`{key}{colon}{value}`), for the property
/// tests of the readers and of the writer.
#[cfg(test)]
pub(crate) fn nested_text(
    leaf: impl proptest::strategy::Strategy<Value = String> + 'static,
    key: impl proptest::strategy::Strategy<Value = String> + Clone + 'static,
    colon: &'static str,
) -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    leaf.prop_recursive(5, 48, 5, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4)
                .prop_map(|v| format!("[{}]", v.join(" , "))),
            proptest::collection::vec((key.clone(), inner), 0..5).prop_map(move |kv| {
                let body: Vec<String> = kv
                    .into_iter()
                    .map(|(k, v)| format!("{k}{colon}{v}"))
                    .collect();
                format!("{{{}}}", body.join(","))
            }),
        ]
    })
}

/// Test support: JSON-ish text built from tricky tokens: duplicate and
/// escaped keys, non-finite numbers, surrogates, control characters, odd
/// whitespace.
#[cfg(test)]
pub(crate) fn tricky_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("NaN".to_owned()),
        Just("-Infinity".to_owned()),
        Just("1e400".to_owned()),
        Just("-0".to_owned()),
        Just("123456789012345678901234567890".to_owned()),
        Just("1.5E-3".to_owned()),
        Just("01".to_owned()),
        Just(r#""\ud83d\ude00""#.to_owned()),
        Just(r#""\ud800""#.to_owned()),
        Just("\"tab\there\"".to_owned()),
        Just("\"ok \\n\"".to_owned()),
        Just("[]".to_owned()),
        Just("{}".to_owned()),
    ];
    let key = prop_oneof![
        Just(r#""a""#),
        Just(r#""b""#),
        Just(r#""\u0061""#),
        Just(r#""a b""#),
    ]
    .prop_map(str::to_owned);
    nested_text(leaf, key, ":\n")
}

#[cfg(test)]
mod tests {
    use super::super::TEST_LIMITS;
    use super::super::lex::plain_run_end;
    use super::super::scan::{ScanBuffers, scan_free_object};
    use super::*;

    #[test]
    fn large_objects_report_their_repeats_like_small_ones() {
        // The same repeats after a few or thousands of distinct keys: the
        // small object finds them as it reads, the large one when it
        // closes; both in the order of their values' ends.
        for n in [10, LARGE_OBJECT + 10] {
            let keys: Vec<String> = (0..n).map(|i| format!(r#""k{i}":0"#)).collect();
            let doc = format!(
                r#"[{{{},"k1":{{"x":1,"\u0078":2}},"k2":[3],"k\u0031":4,"z":{{"y":1,"y":2}}}}]"#,
                keys.join(",")
            );
            let found = duplicate_keys(doc.as_bytes(), TEST_LIMITS, usize::MAX).unwrap();
            let shown: Vec<String> = found.found.iter().map(ToString::to_string).collect();
            assert_eq!(
                shown,
                ["[0].k1.x", "[0].k1", "[0].k2", "[0].k1", "[0].z.y"],
                "{n}"
            );
            let capped = duplicate_keys(doc.as_bytes(), TEST_LIMITS, 2).unwrap();
            let shown: Vec<String> = capped.found.iter().map(ToString::to_string).collect();
            assert_eq!(
                (shown, capped.omitted),
                (vec!["[0].k1.x".to_owned(), "[0].k1".to_owned()], 3),
                "{n}"
            );
        }
    }

    #[test]
    fn duplicate_keys_are_located() {
        let doc = br#"{"a":1,"b":[{"x":1},{"x":2,"x":3,"\u0078":4}],"a":{"c":1,"c":2}}"#;
        let found = duplicate_keys(doc, TEST_LIMITS, usize::MAX).unwrap();
        let shown: Vec<String> = found.found.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["b[1].x", "b[1].x", "a.c", "a"]);
        assert_eq!(found.omitted, 0);
        // The first `keep` are kept, the rest counted.
        let capped = duplicate_keys(doc, TEST_LIMITS, 1).unwrap();
        assert_eq!((capped.found.len(), capped.omitted), (1, 3));
        assert_eq!(capped.found[0].to_string(), "b[1].x");
        assert!(duplicate_keys(b"{\"a\":1,}", TEST_LIMITS, 10).is_err());
        assert_eq!(
            duplicate_keys(b"[NaN, {\"k\": Infinity}]", TEST_LIMITS, 10).unwrap(),
            Duplicates::default()
        );
    }

    proptest::proptest! {
        /// The scan refuses exactly what the parser refuses, at the same
        /// place, and accepts the rest.
        #[test]
        fn duplicate_scan_reads_as_the_parser_does(doc in tricky_text()) {
            let scan = duplicate_keys(doc.as_bytes(), TEST_LIMITS, 5);
            let tree = parse(doc.as_bytes(), TEST_LIMITS);
            match (scan, tree) {
                (Ok(_), Ok(_)) => {}
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a, b),
                (a, b) => proptest::prop_assert!(false, "scan {a:?}, parser {b:?}"),
            }
        }

        /// Mangled documents too: cut, with a byte changed.
        #[test]
        fn duplicate_scan_refuses_what_the_parser_refuses(
            doc in tricky_text(),
            cut in 0usize..64,
            byte in proptest::prelude::any::<u8>(),
        ) {
            let mut bytes = doc.into_bytes();
            let at = cut.min(bytes.len());
            bytes.truncate(bytes.len() - at);
            if let Some(b) = bytes.get_mut(at) {
                *b = byte;
            }
            let scan = duplicate_keys(&bytes, TEST_LIMITS, 5).map(|_| ());
            let tree = parse(&bytes, TEST_LIMITS).map(|_| ());
            proptest::prop_assert_eq!(scan, tree);
        }
    }

    fn plain_run_end_bytewise(src: &[u8], i: usize) -> usize {
        (i..src.len())
            .find(|&j| matches!(src[j], b'"' | b'\\' | 0..=0x1f))
            .unwrap_or(src.len().max(i))
    }

    #[test]
    fn keys_that_share_filter_bits_are_told_apart_and_repeats_are_caught() {
        // Same length, first and last byte: the same filter bits, so the scan
        // must compare them, and find them different.
        assert_eq!(KeyFilter::of(b"ab1c"), KeyFilter::of(b"ab2c"));
        let scan = |text: &str| {
            scan_free_object(
                text.as_bytes(),
                0,
                0,
                TEST_LIMITS,
                &mut ScanBuffers::with_room(),
            )
        };
        let two = r#"{"ab1c": 1, "ab2c": {"ab1c": 2, "ab2c": 3}}"#;
        let (end, keys) = scan(two).unwrap();
        assert_eq!(end, two.len());
        assert!(keys.may_contain("ab1c") && keys.may_contain("ab2c"));
        assert!(scan(r#"{"ab1c": 1, "ab2c": 2, "ab1c": 3}"#).is_none());
        assert!(scan(r#"{"x": {"ab1c": 1, "ab2c": 2, "ab2c": 3}}"#).is_none());
        // Sixty distinct keys fill the filter; only a real repeat is refused,
        // in the object itself or in one nested at any point.
        let many: Vec<String> = (0..60).map(|i| format!(r#""k{i}": {i}"#)).collect();
        let text = format!("{{{}}}", many.join(", "));
        let (_, keys) = scan(&text).unwrap();
        assert!((0..60).all(|i| keys.may_contain(&format!("k{i}"))));
        assert!(scan(&format!("{{{}, \"k17\": 0}}", many.join(", "))).is_none());
        let nested = format!(r#"{{"a": {{{}}}, "k17": 0}}"#, many.join(", "));
        assert!(
            scan(&nested).is_some(),
            "a key of a nested object is not a sibling"
        );
        // Kept objects answer lookups and inserts through the filter.
        let mut object = Object::from_validated_text(&text, keys);
        assert_eq!(object.get("k59"), Some(&Json::from(59)));
        assert_eq!(object.get("k60"), None);
        assert_eq!(object.insert("k60", Json::from(60)), None);
        assert_eq!(object.get("k60"), Some(&Json::from(60)));
        assert_eq!(object.insert("k60", Json::from(61)), Some(Json::from(60)));
        assert_eq!(object.len(), 61);
    }

    #[test]
    fn plain_runs_end_at_every_special_byte_in_every_lane() {
        for special in (0u8..0x20).chain([b'"', b'\\']) {
            for filler in [b'a', 0x7f, 0x80, 0xff, 0x21, 0x23, 0x5b, 0x5d] {
                for at in 0..20 {
                    let mut src = vec![filler; 20];
                    src[at] = special;
                    for from in 0..=at {
                        assert_eq!(
                            plain_run_end(&src, from),
                            at,
                            "{special:#x} {filler:#x} {at}"
                        );
                    }
                    assert_eq!(plain_run_end(&src, at + 1), 20);
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn plain_run_end_agrees_with_a_bytewise_scan(
            src in proptest::collection::vec(proptest::prop_oneof![
                proptest::prelude::any::<u8>(),
                proptest::prelude::Just(b'"'),
                proptest::prelude::Just(b'\\'),
                proptest::prelude::Just(b'a'),
            ], 0..40),
            from in 0usize..41,
        ) {
            let from = from.min(src.len());
            proptest::prop_assert_eq!(plain_run_end(&src, from), plain_run_end_bytewise(&src, from));
        }

    }
}
