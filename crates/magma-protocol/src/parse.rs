//! A JSON parser that reads documents the way the reference does.
//!
//! The reference decodes bodies with CPython's `json.loads` on the decoded
//! text. This parser accepts and rejects the same texts, with three
//! documented differences (see `docs/conformance.md`): lone surrogate escapes
//! are rejected, integers have no digit limit, and invalid UTF-8 is rejected.
//!
//! It never recurses: nesting is tracked on an explicit stack, so no input can
//! overflow the thread's stack. Documents nested deeper than CPython's limit
//! ([`MAX_JSON_DEPTH`]) are rejected like CPython rejects them.

use std::collections::HashMap;

use crate::error::{Error, Issue, Location, Segment};
use crate::json::{Json, Map, Number, Object};

/// The deepest container nesting `json.loads` accepts in the reference
/// (CPython 3.12: 1497 nested arrays or objects); deeper is `json_invalid`.
pub const MAX_JSON_DEPTH: usize = 1497;

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

/// What the parser knows about the value it is reading, so that free-form
/// objects can be kept as validated text instead of trees.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Build the value as a tree.
    Generic,
    /// A model object: its listed fields have their own plans.
    Typed(&'static [(&'static str, Plan)]),
    /// An array whose elements follow a plan.
    List(&'static Plan),
    /// A `dict[str, JsonValue]` position: keep the object as validated text
    /// when it is clean; anything unusual (an error to report, a duplicate
    /// key, an escaped key) falls back to a tree, which validation then
    /// examines in full.
    FreeObject,
    /// The top level of an object whose text was already validated: its
    /// entries are read, the objects among their values are kept as text
    /// ([`Plan::Nested`]).
    Shallow,
    /// Inside [`Plan::Shallow`]: objects are kept as text, arrays are read
    /// with their elements [`Plan::Nested`] too.
    Nested,
}

const FREE_LIST: Plan = Plan::List(&Plan::FreeObject);
const INPUT: Plan = Plan::Typed(&[
    ("tools", FREE_LIST),
    ("attributes", Plan::FreeObject),
    ("memory", Plan::FreeObject),
    ("extra_keys", Plan::FreeObject),
]);
/// How to read an `AgentRequest`.
pub(crate) const REQUEST: Plan = Plan::Typed(&[("inputs", Plan::List(&INPUT))]);
const TOOL_CALL: Plan = Plan::Typed(&[("arguments", Plan::FreeObject)]);
const DECISION: Plan = Plan::Typed(&[("tool_calls", Plan::List(&TOOL_CALL))]);
const OUTPUT: Plan = Plan::Typed(&[
    ("memory", Plan::FreeObject),
    ("internal_steps", FREE_LIST),
    ("output", DECISION),
]);
/// How to read an `AgentResponse`.
pub(crate) const RESPONSE: Plan = Plan::List(&OUTPUT);

impl Plan {
    fn field(&self, key: &str) -> &'static Plan {
        match self {
            Plan::Typed(fields) => fields
                .iter()
                .find(|(k, _)| *k == key)
                .map_or(&Plan::Generic, |(_, p)| p),
            Plan::Shallow => &Plan::Nested,
            _ => &Plan::Generic,
        }
    }

    fn element(&self) -> &'static Plan {
        match self {
            Plan::List(p) => p,
            Plan::Shallow | Plan::Nested => &Plan::Nested,
            _ => &Plan::Generic,
        }
    }
}

enum Frame {
    Array {
        items: Vec<Json>,
        plan: &'static Plan,
    },
    Object {
        map: Map<Json>,
        key: String,
        plan: &'static Plan,
        /// Key -> index, built once the object grows past `LINEAR_KEY_LIMIT`.
        index: Option<HashMap<String, usize>>,
    },
}

pub(crate) struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    pub(crate) pos: usize,
    scratch: Scratch,
    /// Where repeated keys were seen, when the caller asked.
    duplicates: Option<Vec<Location>>,
}

impl<'a> Parser<'a> {
    /// A parser at the start of `src` (`text` is the same bytes as `str`),
    /// for readers that use its pieces (`fast`).
    pub(crate) fn new(src: &'a [u8], text: &'a str) -> Parser<'a> {
        Parser {
            src,
            text,
            pos: 0,
            scratch: Scratch::default(),
            duplicates: None,
        }
    }
}

/// The location of `key` in the object on top of `below`'s frames.
fn location_in(below: &[Frame], key: String) -> Location {
    let mut segs: Vec<Segment> = below
        .iter()
        .map(|f| match f {
            Frame::Array { items, .. } => Segment::Index(items.len()),
            Frame::Object { key, .. } => Segment::Key(key.clone()),
        })
        .collect();
    segs.push(Segment::Key(key));
    Location::from(segs)
}

/// Every repeated key in a document, at the location of each later
/// occurrence (the value that wins), in document order. The reference's
/// `json.loads` keeps the last value without a word; validators and lints
/// use this to say so. Errors are the parser's, for text that is not JSON.
pub fn duplicate_keys(src: &[u8]) -> Result<Vec<Location>, Error> {
    let text = std::str::from_utf8(src)
        .map_err(|e| json_error(src, e.valid_up_to(), "invalid UTF-8 in the body"))?;
    let mut p = Parser {
        src,
        text,
        pos: 0,
        scratch: Scratch::default(),
        duplicates: Some(Vec::new()),
    };
    p.document(&Plan::Generic)
        .map_err(|(at, msg)| json_error(src, at, msg))?;
    Ok(p.duplicates.unwrap_or_default())
}

type PResult<T> = Result<T, (usize, &'static str)>;

/// Parses one document into a tree. Errors are `json_invalid` issues with a
/// position.
pub(crate) fn parse(src: &[u8]) -> Result<Json, Error> {
    parse_with(src, &Plan::Generic)
}

/// Parses one document following `plan`.
pub(crate) fn parse_with(src: &[u8], plan: &'static Plan) -> Result<Json, Error> {
    let text = match std::str::from_utf8(src) {
        Ok(t) => t,
        Err(e) => {
            return Err(json_error(
                src,
                e.valid_up_to(),
                "invalid UTF-8 in the body",
            ));
        }
    };
    let mut p = Parser {
        src,
        text,
        pos: 0,
        scratch: Scratch::default(),
        duplicates: None,
    };
    p.document(plan)
        .map_err(|(at, msg)| json_error(src, at, msg))
}

fn json_error(src: &[u8], at: usize, msg: &'static str) -> Error {
    let position = Position::locate(src, at);
    Error::from_issue(Issue::json_invalid(msg, position))
}

impl Parser<'_> {
    pub(crate) fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    pub(crate) fn skip_ws(&mut self) {
        self.pos = ws_end(self.src, self.pos);
    }

    fn document(&mut self, plan: &'static Plan) -> PResult<Json> {
        if self.src.starts_with("\u{feff}".as_bytes()) {
            return Err((0, "unexpected byte order mark (U+FEFF) before the document"));
        }
        self.skip_ws();
        let value = self.value_tree(plan)?;
        self.skip_ws();
        if self.pos != self.src.len() {
            return Err((self.pos, "extra data after the document"));
        }
        Ok(value)
    }

    /// Parses one value of any depth without recursion.
    fn value_tree(&mut self, root_plan: &'static Plan) -> PResult<Json> {
        let mut stack: Vec<Frame> = Vec::new();
        let mut plan = root_plan;
        'value: loop {
            // Start of a value.
            self.skip_ws();
            let mut done = match self.peek() {
                Some(b'{') if matches!(plan, Plan::Nested) => {
                    // Inside text that was validated as a whole: skipping is
                    // enough.
                    let start = self.pos;
                    let end = skip_validated_value(self.src, start)
                        .ok_or((start, "unterminated object in validated text"))?;
                    self.pos = end;
                    let text = &self.text[start..end];
                    Json::Object(Object::from_validated_text(text, ANY_KEY))
                }
                Some(b'{') if matches!(plan, Plan::FreeObject) => {
                    let start = self.pos;
                    match scan_free_object(self.src, start, stack.len(), &mut self.scratch) {
                        Some((end, keys)) => {
                            self.pos = end;
                            let text = &self.text[start..end];
                            Json::Object(Object::from_validated_text(text, keys))
                        }
                        None => {
                            plan = &Plan::Generic;
                            continue 'value;
                        }
                    }
                }
                Some(b'[') => {
                    if stack.len() >= MAX_JSON_DEPTH {
                        return Err((self.pos, "maximum nesting depth exceeded"));
                    }
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        Json::Array(Vec::new())
                    } else {
                        let element = plan.element();
                        stack.push(Frame::Array {
                            items: Vec::new(),
                            plan: element,
                        });
                        plan = element;
                        continue 'value;
                    }
                }
                Some(b'{') => {
                    if stack.len() >= MAX_JSON_DEPTH {
                        return Err((self.pos, "maximum nesting depth exceeded"));
                    }
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        Json::Object(Object::new())
                    } else {
                        let key = self.object_key()?;
                        let child = plan.field(&key);
                        stack.push(Frame::Object {
                            map: Map::new(),
                            key,
                            plan,
                            index: None,
                        });
                        plan = child;
                        continue 'value;
                    }
                }
                _ => self.scalar()?,
            };
            // A value is complete: hand it to the enclosing container.
            loop {
                let Some((top, below)) = stack.split_last_mut() else {
                    return Ok(done);
                };
                self.skip_ws();
                match top {
                    Frame::Array {
                        items,
                        plan: element,
                    } => {
                        items.push(done);
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                plan = element;
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
                        plan: object_plan,
                        index,
                    } => {
                        let dup = insert_last_wins(map, index, std::mem::take(key), done);
                        if let (Some(dup), Some(found)) = (dup, self.duplicates.as_mut()) {
                            found.push(location_in(below, dup));
                        }
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                *key = self.object_key()?;
                                plan = object_plan.field(key);
                                continue 'value;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                let Some(Frame::Object { map, .. }) = stack.pop() else {
                                    unreachable!("the top frame is an object")
                                };
                                done = Json::Object(Object::from(map));
                            }
                            _ => return Err((self.pos, "expected ',' or '}' in an object")),
                        }
                    }
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

    fn scalar(&mut self) -> PResult<Json> {
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

    /// A string starting at the opening quote.
    pub(crate) fn string(&mut self) -> PResult<String> {
        let open = self.pos;
        self.pos += 1;
        let start = self.pos;
        // Fast path: no escapes.
        self.pos = plain_run_end(self.src, self.pos);
        match self.peek() {
            None => return Err((open, "unterminated string")),
            Some(b'"') => {
                let s = self.text[start..self.pos].to_owned();
                self.pos += 1;
                return Ok(s);
            }
            Some(b'\\') => {}
            Some(_) => return Err((self.pos, "raw control character in a string")),
        }
        // Sized once: the escaped text is never shorter than what it decodes
        // to, so the distance to the closing quote is enough.
        let mut out = String::with_capacity(escaped_string_end(self.src, self.pos) - start);
        out.push_str(&self.text[start..self.pos]);
        loop {
            let run = self.pos;
            self.pos = plain_run_end(self.src, self.pos);
            out.push_str(&self.text[run..self.pos]);
            match self.peek() {
                None => return Err((open, "unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => self.escape(&mut out)?,
                Some(_) => return Err((self.pos, "raw control character in a string")),
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
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
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
                                let code = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                char::from_u32(code).ok_or((at, "invalid surrogate pair"))?
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
            _ => return Err((at, "invalid escape in a string")),
        };
        out.push(ch);
        Ok(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.src.get(self.pos..self.pos + 4)?;
        let mut v = 0u32;
        for &d in digits {
            v = v * 16 + (d as char).to_digit(16)?;
        }
        self.pos += 4;
        Some(v)
    }
}

const LONE_SURROGATE: &str =
    "lone surrogate escape: a UTF-16 surrogate without its pair is not a Unicode character";

/// Inserts like a Python dict; gives the key back when it was a duplicate.
fn insert_last_wins(
    map: &mut Map<Json>,
    index: &mut Option<HashMap<String, usize>>,
    key: String,
    value: Json,
) -> Option<String> {
    if let Some(idx) = index {
        if let Some(&i) = idx.get(&key) {
            map.replace_at(i, value);
            return Some(key);
        }
        idx.insert(key.clone(), map.len());
        map.push_unique(key, value);
        return None;
    }
    if let Some(i) = map.entries().iter().position(|(k, _)| *k == key) {
        map.replace_at(i, value);
        return Some(key);
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
    None
}

/// The end of the number lexeme starting at `start`, or `None` when the text
/// there is not a JSON number. Trailing characters are left to the caller,
/// as Python does (`01` reads `0` and then fails on `1`).
pub(crate) fn number_end(src: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    let digit = |i: usize| src.get(i).is_some_and(u8::is_ascii_digit);
    if src.get(i) == Some(&b'-') {
        i += 1;
    }
    match src.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while digit(i) {
                i += 1;
            }
        }
        _ => return None,
    }
    // A fraction or exponent counts only when complete, as in Python's regex.
    if src.get(i) == Some(&b'.') && digit(i + 1) {
        i += 1;
        while digit(i) {
            i += 1;
        }
    }
    if matches!(src.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(src.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if digit(j) {
            while digit(j) {
                j += 1;
            }
            i = j;
        }
    }
    Some(i)
}

/// `true` if `text` is exactly one JSON number lexeme.
pub(crate) fn is_number_lexeme(text: &[u8]) -> bool {
    number_end(text, 0) == Some(text.len())
}

/// Buffers reused across the free-form scans of one document.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The open containers around the innermost one, `{` or `[`: the
    /// innermost is kept in a local of the scan.
    containers: Vec<u8>,
    /// Spans of the keys of the open objects, for duplicate checks.
    keys: Vec<(usize, usize)>,
    /// The open objects around the innermost one: where their keys start in
    /// `keys`, and the [`key_bits`] of their keys or'ed, so that most keys
    /// need no comparison.
    frames: Vec<(usize, u64)>,
}

impl Scratch {
    /// Room for the usual free-form object (a few levels, a few dozen keys
    /// open at once), so that scanning one does not grow the buffers.
    pub(crate) fn with_room() -> Scratch {
        Scratch {
            containers: Vec::with_capacity(16),
            keys: Vec::with_capacity(64),
            frames: Vec::with_capacity(16),
        }
    }

    /// `false` once a large document grew the buffers past the usual size:
    /// they are then dropped instead of kept for the next document.
    pub(crate) fn worth_keeping(&self) -> bool {
        self.containers.capacity() <= 256
            && self.keys.capacity() <= 1024
            && self.frames.capacity() <= 256
    }
}

/// Keys per object checked for duplicates by the fast scan; larger objects
/// take the tree path.
const SCAN_KEY_LIMIT: usize = 64;

/// The object being read by [`scan_free_object`]: where its keys start in
/// [`Scratch::keys`], and the [`key_bits`] of its keys so far, or'ed.
struct ScanFrame {
    from: usize,
    seen: u64,
}

/// Scans the object at `start` (a `{`) without building anything. Returns the
/// end of the object, and the [`key_bits`] of its keys or'ed, when it is
/// valid JSON, holds only finite numbers, nests no deeper than a free-form
/// value may, has unique unescaped keys and no surrogate escapes: exactly the
/// objects that would parse and validate cleanly. Returns `None` for anything
/// else, and the caller parses the value as a tree, which reports any problem
/// with its location.
///
/// The innermost container and object frame live in locals, the enclosing
/// ones in `sc`: most values are read without touching the buffers.
pub(crate) fn scan_free_object(
    src: &[u8],
    start: usize,
    depth_before: usize,
    sc: &mut Scratch,
) -> Option<(usize, u64)> {
    use crate::validate::MAX_FREE_FORM_DEPTH;
    sc.containers.clear();
    sc.keys.clear();
    sc.frames.clear();
    let mut i = ws_end(src, start + 1);
    if src.get(i) == Some(&b'}') {
        return Some((i + 1, 0));
    }
    // The innermost open container, and how many are open: the free-form
    // object itself is the first.
    let mut top = b'{';
    let mut level = 1usize;
    let mut frame = ScanFrame { from: 0, seen: 0 };
    i = scan_key(src, i, &mut sc.keys, &mut frame)?;
    'value: loop {
        // A value inside more than MAX_FREE_FORM_DEPTH containers below the
        // free-form object is refused by validation.
        if level > MAX_FREE_FORM_DEPTH + 1 {
            return None;
        }
        i = ws_end(src, i);
        match *src.get(i)? {
            open @ (b'{' | b'[') => {
                if depth_before + level + 1 > MAX_JSON_DEPTH {
                    return None;
                }
                i = ws_end(src, i + 1);
                let close = if open == b'{' { b'}' } else { b']' };
                if src.get(i) == Some(&close) {
                    i += 1;
                } else {
                    sc.containers.push(top);
                    top = open;
                    level += 1;
                    if open == b'{' {
                        let inner = ScanFrame {
                            from: sc.keys.len(),
                            seen: 0,
                        };
                        let outer = std::mem::replace(&mut frame, inner);
                        sc.frames.push((outer.from, outer.seen));
                        i = scan_key(src, i, &mut sc.keys, &mut frame)?;
                    }
                    continue 'value;
                }
            }
            b'"' => i = scan_string(src, i)?,
            b'-' | b'0'..=b'9' => {
                let end = number_end(src, i)?;
                let lexeme = &src[i..end];
                // Only a float with an exponent, or with over 300 digits, can
                // overflow to infinity; plain integers and decimals are the
                // usual case and need no second look.
                let mut float = false;
                let mut exponent = false;
                for &c in lexeme {
                    float |= c == b'.';
                    exponent |= (c | 0x20) == b'e';
                }
                if exponent || (float && lexeme.len() >= 300) {
                    let text = std::str::from_utf8(lexeme).ok()?;
                    if !text.parse::<f64>().ok()?.is_finite() {
                        return None;
                    }
                }
                i = end;
            }
            b't' if src[i..].starts_with(b"true") => i += 4,
            b'f' if src[i..].starts_with(b"false") => i += 5,
            b'n' if src[i..].starts_with(b"null") => i += 4,
            _ => return None,
        }
        // After a value.
        loop {
            i = ws_end(src, i);
            match (*src.get(i)?, top) {
                (b',', b'{') => {
                    i = ws_end(src, i + 1);
                    i = scan_key(src, i, &mut sc.keys, &mut frame)?;
                    continue 'value;
                }
                (b',', _) => {
                    i += 1;
                    continue 'value;
                }
                (b'}', b'{') => {
                    i += 1;
                    level -= 1;
                    if level == 0 {
                        return Some((i, frame.seen));
                    }
                    sc.keys.truncate(frame.from);
                    let (from, seen) = sc.frames.pop()?;
                    frame = ScanFrame { from, seen };
                    top = sc.containers.pop()?;
                }
                (b']', b'[') => {
                    i += 1;
                    level -= 1;
                    top = sc.containers.pop()?;
                }
                _ => return None,
            }
        }
    }
}

/// Where the string content at `i` ends: its closing quote, a raw control
/// character or the end of `src`. An escape is skipped as a backslash and the
/// byte after it (the rest of a `\uXXXX` is plain), without checking it: this
/// sizes a buffer, and skips strings in validated text.
fn escaped_string_end(src: &[u8], mut i: usize) -> usize {
    loop {
        i = plain_run_end(src, i);
        match src.get(i) {
            Some(b'\\') => i += 2,
            // The quote, the end of the text or a raw control character
            // (an error the caller reports).
            _ => return i.min(src.len()),
        }
    }
}

/// A key and its `:`; `None` for escaped keys and duplicates. Inlined into
/// its three call sites: a request has a few hundred free-form keys, and the
/// call cost about a fifth of a key's work.
#[inline(always)]
fn scan_key(
    src: &[u8],
    i: usize,
    keys: &mut Vec<(usize, usize)>,
    frame: &mut ScanFrame,
) -> Option<usize> {
    if src.get(i) != Some(&b'"') {
        return None;
    }
    let start = i + 1;
    let mut j = plain_run_end(src, start);
    if src.get(j) != Some(&b'"') {
        return None;
    }
    let key = &src[start..j];
    let bits = key_bits(key);
    let siblings = keys.get(frame.from..)?;
    if siblings.len() >= SCAN_KEY_LIMIT {
        return None;
    }
    // Only a key whose bits were all seen can repeat a sibling.
    if frame.seen & bits == bits {
        let same = |&(a, b): &(usize, usize)| b - a == key.len() && &src[a..b] == key;
        if siblings.iter().any(same) {
            return None;
        }
    }
    frame.seen |= bits;
    keys.push((start, j));
    j = ws_end(src, j + 1);
    (src.get(j) == Some(&b':')).then_some(j + 1)
}

/// A string value; `None` unless the tree parser would read it cleanly.
fn scan_string(src: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j = plain_run_end(src, j);
        match *src.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => match *src.get(j + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => j += 2,
                b'u' => {
                    let hex = |at: usize| -> Option<u32> {
                        let d = src.get(at..at + 4)?;
                        d.iter()
                            .try_fold(0u32, |v, &c| Some(v * 16 + (c as char).to_digit(16)?))
                    };
                    let v = hex(j + 2)?;
                    if (0xD800..0xDC00).contains(&v) {
                        if src.get(j + 6..j + 8) != Some(b"\\u") {
                            return None;
                        }
                        let lo = hex(j + 8)?;
                        if !(0xDC00..0xE000).contains(&lo) {
                            return None;
                        }
                        j += 12;
                    } else if (0xDC00..0xE000).contains(&v) {
                        return None;
                    } else {
                        j += 6;
                    }
                }
                _ => return None,
            },
            // A control character: the only byte left that ends a run.
            _ => return None,
        }
    }
}

/// The entries of an object kept as validated text, one level deep: the
/// objects among the values stay text (see [`Plan::Shallow`]), so reading one
/// key of a large object does not build the whole tree.
pub(crate) fn parse_shallow(text: &str) -> Option<Map<Json>> {
    match parse_validated_text(text, &Plan::Shallow) {
        Some(Json::Object(o)) => Some(o.into_map()),
        _ => None,
    }
}

/// Parses text that is already known to be UTF-8 and valid JSON.
fn parse_validated_text(text: &str, plan: &'static Plan) -> Option<Json> {
    let mut p = Parser {
        src: text.as_bytes(),
        text,
        pos: 0,
        scratch: Scratch::default(),
        duplicates: None,
    };
    p.document(plan).ok()
}

/// A value cut from validated text, its objects kept as text.
pub(crate) fn parse_shallow_value(text: &str) -> Option<Json> {
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
    parse_validated_text(text, &Plan::Nested)
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

/// The content of a string of validated text, alone in `text`, if it has
/// no escapes: it reads as it is written.
pub(crate) fn plain_string(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let last = b.len().checked_sub(1)?;
    (b.first() == Some(&b'"') && plain_run_end(b, 1) == last).then(|| &text[1..last])
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

/// Filter bits of an object key: two of 64, from its length and its first
/// and last bytes. An object keeps the bits of all its keys or'ed; a key
/// whose bits are not all set is not one of them ([`may_hold`]).
#[inline]
pub(crate) fn key_bits(key: &[u8]) -> u64 {
    let first = key.first().copied().unwrap_or(0);
    let last = key.last().copied().unwrap_or(0);
    let mixed = (key.len() as u64 | u64::from(first) << 32 | u64::from(last) << 40)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    1 << (mixed >> 58) | 1 << ((mixed >> 52) & 63)
}

/// The filter of an object whose keys are not known: every key may be there.
pub(crate) const ANY_KEY: u64 = u64::MAX;

/// `false` when `key` is certainly not among the keys behind `filter`.
pub(crate) fn may_hold(filter: u64, key: &str) -> bool {
    let bits = key_bits(key.as_bytes());
    filter & bits == bits
}

/// A member of validated object text, by offsets into the text.
pub(crate) struct Member {
    /// Where the key starts (after its quote); it is as long as the key
    /// looked up, since validated keys have no escapes.
    pub(crate) key: usize,
    /// The value's text.
    pub(crate) value: std::ops::Range<usize>,
}

/// Where the value of the top-level member `key` of validated object text
/// lies (start and end offsets), without building anything. Validated text
/// has unescaped keys (the scan keeps no object with an escaped key), so keys
/// compare as bytes.
pub(crate) fn find_member(text: &str, key: &str) -> Option<Member> {
    let src = text.as_bytes();
    let mut i = 1;
    loop {
        i = ws_end(src, i);
        if src.get(i) != Some(&b'"') {
            // `}` of an empty object (or of text that is not what it should be).
            return None;
        }
        let start = i + 1;
        let end = plain_run_end(src, start);
        i = end + 1;
        i = ws_end(src, i);
        if src.get(i) != Some(&b':') {
            return None;
        }
        i += 1;
        i = ws_end(src, i);
        let value_end = skip_validated_value(src, i)?;
        if &src[start..end] == key.as_bytes() {
            return Some(Member {
                key: start,
                value: i..value_end,
            });
        }
        i = value_end;
        i = ws_end(src, i);
        if src.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
    }
}

/// The end of the value at `i` in text known to be valid JSON: strings and
/// containers are skipped without checking them again.
fn skip_validated_value(src: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        match *src.get(i)? {
            b'"' => {
                i = escaped_string_end(src, i + 1);
                if src.get(i) != Some(&b'"') {
                    return None;
                }
                i += 1;
            }
            b'{' | b'[' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                i += 1;
            }
            // Inside a container: numbers, literals, `,`, `:`, whitespace.
            _ if depth > 0 => i += 1,
            _ => {
                // A scalar at the top: it ends at a delimiter or the end.
                while let Some(&c) = src.get(i) {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    i += 1;
                }
                return Some(i);
            }
        }
        if depth == 0 {
            return Some(i);
        }
    }
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

/// The index of the first byte at or after `i` that is not JSON whitespace
/// (space, tab, line feed, carriage return); `src.len()` when there is none.
#[inline]
pub(crate) fn ws_end(src: &[u8], mut i: usize) -> usize {
    // Every JSON whitespace byte is at most a space: one comparison answers
    // most calls, compact JSON having none.
    if src.get(i).is_some_and(|&c| c > b' ') {
        return i;
    }
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = src.get(i) {
        i += 1;
    }
    i
}

/// The index of the first byte at or after `i` that ends a plain run of
/// string content: `"`, `\` or a control character (below 0x20);
/// `src.len()` when there is none. Eight bytes at a time: strings are most of
/// a request's bytes.
#[inline(always)]
pub(crate) fn plain_run_end(src: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const QUOTES: u64 = ONES * b'"' as u64;
    const BACKSLASHES: u64 = ONES * b'\\' as u64;
    const SPACES: u64 = ONES * 0x20;
    while let Some(chunk) = src.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        // A byte of `y` is flagged when it is zero (`y - 1` borrows and `!y`
        // keeps the top bit) or, for `x - SPACES`, when it is below 0x20.
        // Borrows only flag bytes above a truly flagged one, so the lowest
        // flag is exact.
        let q = x ^ QUOTES;
        let b = x ^ BACKSLASHES;
        let hits = ((q.wrapping_sub(ONES) & !q)
            | (b.wrapping_sub(ONES) & !b)
            | (x.wrapping_sub(SPACES) & !x))
            & HIGH;
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = src.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    include!("../benches/bench_like.rs");

    fn free_objects_kept_as_text(v: &Json) -> (usize, usize) {
        let mut kept = 0;
        let mut trees = 0;
        let input = v.get("inputs").and_then(Json::as_array).unwrap();
        for i in input {
            for key in ["attributes", "memory", "extra_keys"] {
                match i.get(key) {
                    Some(Json::Object(o)) if o.is_validated_text() => kept += 1,
                    Some(_) => trees += 1,
                    None => {}
                }
            }
        }
        (kept, trees)
    }

    #[test]
    fn clean_free_form_objects_are_kept_as_text() {
        let body = bench_like_request(3);
        let v = parse_with(body.as_bytes(), &REQUEST).unwrap();
        assert_eq!(free_objects_kept_as_text(&v), (9, 0));
        // The generic parse builds trees, and both read the same.
        let tree = parse(body.as_bytes()).unwrap();
        assert_eq!(free_objects_kept_as_text(&tree), (0, 9));
        assert_eq!(tree, v);
    }

    #[test]
    fn duplicate_keys_are_located() {
        let found =
            duplicate_keys(br#"{"a":1,"b":[{"x":1},{"x":2,"x":3,"x":4}],"a":{"c":1,"c":2}}"#)
                .unwrap();
        let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["b[1].x", "b[1].x", "a.c", "a"]);
        assert!(duplicate_keys(b"{\"a\":1,}").is_err());
        assert_eq!(duplicate_keys(b"[NaN, {\"k\": Infinity}]").unwrap(), vec![]);
    }

    #[test]
    fn anything_unusual_takes_the_tree_path() {
        for memory in [
            r#"{"a":1,"a":2}"#,
            r#"{"\u0061":1}"#,
            r#"{"a":NaN}"#,
            r#"{"a":1e400}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":[1,]}"#,
        ] {
            let body = format!(
                r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":""}},"memory":{memory}}}]}}"#
            );
            match parse_with(body.as_bytes(), &REQUEST) {
                Ok(v) => assert_eq!(free_objects_kept_as_text(&v), (0, 1), "{memory}"),
                Err(e) => assert!(e.is_syntax(), "{memory}: {e}"),
            }
        }
        let with_depth = |n: usize| {
            let deep = "[".repeat(n) + &"]".repeat(n);
            let body = format!(
                r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":""}},"memory":{{"a":{deep}}}}}]}}"#
            );
            free_objects_kept_as_text(&parse_with(body.as_bytes(), &REQUEST).unwrap())
        };
        assert_eq!(with_depth(254), (1, 0));
        // 255 empty-innermost containers still validate, so may stay text.
        assert_eq!(with_depth(255), (1, 0));
        assert_eq!(with_depth(256), (0, 1));
    }

    /// JSON-ish text built from tricky tokens: duplicate and escaped keys,
    /// non-finite numbers, surrogates, control characters, odd whitespace.
    fn tricky_text() -> impl proptest::strategy::Strategy<Value = String> {
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

    fn plain_run_end_bytewise(src: &[u8], i: usize) -> usize {
        (i..src.len())
            .find(|&j| matches!(src[j], b'"' | b'\\' | 0..=0x1f))
            .unwrap_or(src.len().max(i))
    }

    #[test]
    fn keys_that_share_filter_bits_are_told_apart_and_repeats_are_caught() {
        // Same length, first and last byte: the same filter bits, so the scan
        // must compare them, and find them different.
        assert_eq!(key_bits(b"ab1c"), key_bits(b"ab2c"));
        let scan = |text: &str| scan_free_object(text.as_bytes(), 0, 0, &mut Scratch::with_room());
        let two = r#"{"ab1c": 1, "ab2c": {"ab1c": 2, "ab2c": 3}}"#;
        let (end, keys) = scan(two).unwrap();
        assert_eq!(end, two.len());
        assert!(may_hold(keys, "ab1c") && may_hold(keys, "ab2c"));
        assert!(scan(r#"{"ab1c": 1, "ab2c": 2, "ab1c": 3}"#).is_none());
        assert!(scan(r#"{"x": {"ab1c": 1, "ab2c": 2, "ab2c": 3}}"#).is_none());
        // Sixty distinct keys fill the filter; only a real repeat is refused,
        // in the object itself or in one nested at any point.
        let many: Vec<String> = (0..60).map(|i| format!(r#""k{i}": {i}"#)).collect();
        let text = format!("{{{}}}", many.join(", "));
        let (_, keys) = scan(&text).unwrap();
        assert!((0..60).all(|i| may_hold(keys, &format!("k{i}"))));
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

        /// The shortcuts for one value of kept text read it as the parser
        /// does, and the key filter of a kept object admits all its keys.
        #[test]
        fn kept_values_and_key_filters_agree_with_the_parser(value in tricky_text()) {
            let doc = format!("{{\"k\": {value}}}");
            let mut sc = Scratch::with_room();
            if scan_free_object(doc.as_bytes(), 0, 0, &mut sc).is_some() {
                proptest::prop_assert_eq!(
                    parse_shallow_value(&value),
                    parse_validated_text(&value, &Plan::Nested)
                );
            }
            if let Some((end, keys)) = scan_free_object(value.as_bytes(), 0, 0, &mut sc) {
                proptest::prop_assert_eq!(end, value.len());
                let parsed = parse(value.as_bytes()).unwrap();
                let object = parsed.as_object().unwrap();
                for key in object.keys() {
                    proptest::prop_assert!(may_hold(keys, key), "{key} in {value}");
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

        /// Keeping clean objects as text never changes a verdict or a value.
        #[test]
        fn the_text_path_agrees_with_the_tree_path(value in tricky_text(), deep in 0usize..3) {
            let value = match deep {
                1 => format!("{}{value}{}", "[".repeat(253), "]".repeat(253)),
                2 => format!("{}{value}{}", "[".repeat(254), "]".repeat(254)),
                _ => value,
            };
            let body = format!(
                r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":""}},"memory":{{"m":{value}}},"attributes":{value2}}}]}}"#,
                value2 = if value.starts_with('{') { value.as_str() } else { "{}" },
            );
            let fast = parse_with(body.as_bytes(), &REQUEST)
                .and_then(crate::validate::request);
            let slow = parse(body.as_bytes()).and_then(crate::validate::request);
            match (fast, slow) {
                (Ok(a), Ok(b)) => {
                    // Same value, and the kept text reads back the same
                    // (a duplicate key kept verbatim would differ here).
                    let (ta, tb) = (a.to_json_string(), b.to_json_string());
                    proptest::prop_assert_eq!(&a, &b);
                    let back = parse(ta.as_bytes()).unwrap();
                    proptest::prop_assert_eq!(&back, &parse(tb.as_bytes()).unwrap());
                    proptest::prop_assert_eq!(duplicate_keys(ta.as_bytes()).unwrap(), vec![]);
                    proptest::prop_assert_eq!(
                        Json::from_slice(ta.as_bytes()).map(|v| v.to_json_string()).ok(),
                        Some(tb),
                    );
                }
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a.issues(), b.issues()),
                (a, b) => proptest::prop_assert!(false, "paths disagree on {body}: {a:?} vs {b:?}"),
            }
        }
    }
}
