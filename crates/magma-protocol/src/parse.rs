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

use crate::error::{Error, Issue};
use crate::json::{Json, Number, Object};

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

enum Frame {
    Array(Vec<Json>),
    Object {
        map: Object,
        key: String,
        /// Key -> index, built once the object grows past `LINEAR_KEY_LIMIT`.
        index: Option<HashMap<String, usize>>,
    },
}

struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    pos: usize,
}

type PResult<T> = Result<T, (usize, &'static str)>;

/// Parses one document. Errors are `json_invalid` issues with a position.
pub(crate) fn parse(src: &[u8]) -> Result<Json, Error> {
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
    let mut p = Parser { src, text, pos: 0 };
    p.document().map_err(|(at, msg)| json_error(src, at, msg))
}

fn json_error(src: &[u8], at: usize, msg: &'static str) -> Error {
    let position = Position::locate(src, at);
    Error::from_issue(Issue::json_invalid(msg, position))
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn document(&mut self) -> PResult<Json> {
        if self.src.starts_with("\u{feff}".as_bytes()) {
            return Err((0, "unexpected byte order mark (U+FEFF) before the document"));
        }
        self.skip_ws();
        let value = self.value_tree()?;
        self.skip_ws();
        if self.pos != self.src.len() {
            return Err((self.pos, "extra data after the document"));
        }
        Ok(value)
    }

    /// Parses one value of any depth without recursion.
    fn value_tree(&mut self) -> PResult<Json> {
        let mut stack: Vec<Frame> = Vec::new();
        'value: loop {
            // Start of a value.
            self.skip_ws();
            let mut done = match self.peek() {
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
                        stack.push(Frame::Array(Vec::new()));
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
                        stack.push(Frame::Object {
                            map: Object::new(),
                            key,
                            index: None,
                        });
                        continue 'value;
                    }
                }
                _ => self.scalar()?,
            };
            // A value is complete: hand it to the enclosing container.
            loop {
                let Some(top) = stack.last_mut() else {
                    return Ok(done);
                };
                self.skip_ws();
                match top {
                    Frame::Array(items) => {
                        items.push(done);
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                continue 'value;
                            }
                            Some(b']') => {
                                self.pos += 1;
                                let Some(Frame::Array(items)) = stack.pop() else {
                                    unreachable!("the top frame is an array")
                                };
                                done = Json::Array(items);
                            }
                            _ => return Err((self.pos, "expected ',' or ']' in an array")),
                        }
                    }
                    Frame::Object { map, key, index } => {
                        insert_last_wins(map, index, std::mem::take(key), done);
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                *key = self.object_key()?;
                                continue 'value;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                let Some(Frame::Object { map, .. }) = stack.pop() else {
                                    unreachable!("the top frame is an object")
                                };
                                done = Json::Object(map);
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
    fn string(&mut self) -> PResult<String> {
        let open = self.pos;
        self.pos += 1;
        let start = self.pos;
        // Fast path: no escapes.
        loop {
            match self.peek() {
                None => return Err((open, "unterminated string")),
                Some(b'"') => {
                    let s = self.text[start..self.pos].to_owned();
                    self.pos += 1;
                    return Ok(s);
                }
                Some(b'\\') => break,
                Some(c) if c < 0x20 => {
                    return Err((self.pos, "raw control character in a string"));
                }
                Some(_) => self.pos += 1,
            }
        }
        let mut out = String::with_capacity(self.pos - start + 16);
        out.push_str(&self.text[start..self.pos]);
        loop {
            let run = self.pos;
            while let Some(c) = self.peek() {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.pos += 1;
            }
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

fn insert_last_wins(
    map: &mut Object,
    index: &mut Option<HashMap<String, usize>>,
    key: String,
    value: Json,
) {
    if let Some(idx) = index {
        if let Some(&i) = idx.get(&key) {
            map.replace_at(i, value);
        } else {
            idx.insert(key.clone(), map.len());
            map.push_unique(key, value);
        }
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

/// The end of the number lexeme starting at `start`, or `None` when the text
/// there is not a JSON number. Trailing characters are left to the caller,
/// as Python does (`01` reads `0` and then fails on `1`).
fn number_end(src: &[u8], start: usize) -> Option<usize> {
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
