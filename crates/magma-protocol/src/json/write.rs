//! The JSON writer behind every `to_json_string()` of this crate.
//!
//! It writes straight into one `String`, sized up front from
//! [`WriteJson::size_hint`]: the lengths of the models' strings, of kept
//! object text and of the scalars directly in a map or array, a fixed
//! allowance for each field and for each element of a container nested in
//! a map or array (whose contents are not visited: walking the whole tree
//! took about a fifth of the time in `serialize/response_8`), and a 1/16
//! slack for escapes. Models
//! parsed from a document, whose free-form objects are kept text, and
//! responses with changed maps as memory are written in one allocation; a
//! deep tree of maps may grow the buffer (by doubling) once or twice. No
//! serde machinery is involved. The output is byte for byte what
//! `serde_json::to_string` gives through the `Serialize` impls (in
//! `serde.rs` for values, beside each model for the models), which stay the
//! reference: the tests here and in `model/tests.rs` compare the two on
//! every fixture document and on generated values. The models' writers live
//! beside their types; what they must follow:
//!
//! - models emit every field, in the reference's declaration order, nulls and
//!   defaults included;
//! - strings are escaped as serde_json's compact formatter does: `"` and `\`
//!   with a backslash, `\b \f \n \r \t` by name, the other control characters
//!   below U+0020 as `\u00XX` (lowercase hex); `/`, DEL and non-ASCII are
//!   written as they are. Runs of bytes that need no escape are found eight
//!   bytes at a time and copied whole;
//! - an object still kept as the validated text of a document is copied as
//!   it is, any other object is written as a map in key order;
//! - a number is written as its lexeme. That is what serde_json gives too:
//!   the `Serialize` impl re-prints integers that fit `i64`/`u64` through
//!   `itoa`, which for a JSON integer lexeme (no leading zero, no `+`) is the
//!   lexeme itself, and writes `-0` and every other finite lexeme verbatim.
//!   A non-finite lexeme (`NaN`, `Infinity`, `1e400`; only ever the `input`
//!   of a `finite_number` error) is written as a JSON string, as the
//!   `Serialize` impl does.

use super::{Json, Map, Number, Object};

/// A value this writer can write.
pub(crate) trait WriteJson {
    /// Appends the compact JSON text of `self` to `out`.
    fn write_json(&self, out: &mut String);

    /// About how many bytes [`write_json`](WriteJson::write_json) appends:
    /// exact for kept text and for strings without escapes and numbers down
    /// to the first level of a map or array, an allowance for the fixed
    /// parts and for containers below that level. Cheap: no byte of a string
    /// is read, no tree is walked.
    fn size_hint(&self) -> usize;
}

/// Compact JSON text of `value`, in one allocation unless the estimate was
/// short (strings with many escapes, deep trees of maps).
pub(crate) fn to_string<T: WriteJson + ?Sized>(value: &T) -> String {
    let mut out = String::with_capacity(capacity_for(value.size_hint()));
    value.write_json(&mut out);
    out
}

/// The buffer for a value of about `hint` bytes: a little slack for escapes.
pub(crate) fn capacity_for(hint: usize) -> usize {
    hint + hint / 16 + 16
}

// ---------------------------------------------------------------------------
// Scalars

/// Marks, in the high bit of each byte lane, the bytes of `w` that need an
/// escape (below U+0020, `"`, `\`). The lowest marked lane is always exact
/// (a borrow only runs upward from a lane that is itself marked), which is
/// all [`next_escape`] uses.
#[inline]
fn escape_lanes(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    let q = w ^ (ONES * u64::from(b'"'));
    let quote = q.wrapping_sub(ONES) & !q;
    let b = w ^ (ONES * u64::from(b'\\'));
    let backslash = b.wrapping_sub(ONES) & !b;
    (control | quote | backslash) & HIGH
}

/// The index of the first byte at or after `i` that needs an escape, or
/// `bytes.len()`. Reads eight bytes at a time, the last (partial) eight too,
/// so that short strings and tails cost no byte-by-byte loop.
#[inline(always)]
fn next_escape(bytes: &[u8], mut i: usize) -> usize {
    const SPACES: u64 = 0x2020_2020_2020_2020;
    while let Some(chunk) = bytes.get(i..).and_then(<[u8]>::first_chunk::<8>) {
        let lanes = escape_lanes(u64::from_le_bytes(*chunk));
        if lanes != 0 {
            return i + (lanes.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    let len = bytes.len();
    if i >= len {
        return len;
    }
    // 1 to 7 bytes left: one word holding them, the other lanes spaces.
    let (word, base) = match bytes.last_chunk::<8>() {
        Some(last) => {
            // The last eight bytes overlap bytes already scanned (or escaped
            // just before `i`): blank those lanes out.
            let seen = (1u64 << (8 * (8 - (len - i)))) - 1;
            (
                (u64::from_le_bytes(*last) & !seen) | (SPACES & seen),
                len - 8,
            )
        }
        None => (load_short(&bytes[i..]), i),
    };
    let lanes = escape_lanes(word);
    if lanes == 0 {
        len
    } else {
        base + (lanes.trailing_zeros() / 8) as usize
    }
}

/// The 1 to 7 bytes of `rest` as the low lanes of a word whose other lanes
/// are spaces. Built from (overlapping) loads of the first and last bytes:
/// a copy into a buffer would cost a call and a stalled load.
#[inline]
fn load_short(rest: &[u8]) -> u64 {
    let n = rest.len();
    debug_assert!((1..8).contains(&n));
    let word = if let (Some(lo), Some(hi)) = (rest.first_chunk::<4>(), rest.last_chunk::<4>()) {
        u64::from(u32::from_le_bytes(*lo)) | u64::from(u32::from_le_bytes(*hi)) << (8 * (n - 4))
    } else {
        u64::from(rest[0])
            | u64::from(rest[n / 2]) << (8 * (n / 2))
            | u64::from(rest[n - 1]) << (8 * (n - 1))
    };
    word | 0x2020_2020_2020_2020u64 << (8 * n)
}

/// `true` when `s` holds a byte that [`write_str`] escapes.
pub(crate) fn needs_escape(s: &str) -> bool {
    next_escape(s.as_bytes(), 0) < s.len()
}

/// Appends `s` as a JSON string, escaped as serde_json does.
pub(crate) fn write_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = next_escape(bytes, 0);
    // The usual string needs no escape: one copy.
    out.push_str(s.get(..start).unwrap_or_default());
    if start == bytes.len() {
        out.push('"');
        return;
    }
    while let Some(&b) = bytes.get(start) {
        push_escape(out, b);
        let i = next_escape(bytes, start + 1);
        // Runs end before an ASCII byte or at the end: always a char boundary.
        out.push_str(&s[start + 1..i]);
        start = i;
    }
    out.push('"');
}

/// Appends the escape serde_json writes for `b`, a byte that needs one
/// (below U+0020, `"`, `\`).
pub(super) fn push_escape(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match b {
        b'"' => "\\\"",
        b'\\' => "\\\\",
        0x08 => "\\b",
        0x0c => "\\f",
        b'\n' => "\\n",
        b'\r' => "\\r",
        b'\t' => "\\t",
        _ => {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
            return;
        }
    };
    out.push_str(short);
}

pub(crate) fn write_u64(out: &mut String, mut n: u64) {
    if n < 10 {
        out.push(char::from(b'0' + n as u8));
        return;
    }
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    while n > 0 {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or_default());
}

pub(crate) fn write_i64(out: &mut String, n: i64) {
    if n < 0 {
        out.push('-');
    }
    write_u64(out, n.unsigned_abs());
}

pub(crate) fn write_bool(out: &mut String, b: bool) {
    out.push_str(if b { "true" } else { "false" });
}

/// `-?(0|[1-9][0-9]*)`: what `itoa` prints back for the integers it can
/// hold, so the lexeme can be copied.
#[cfg(test)]
fn is_canonical_integer(text: &str) -> bool {
    canonical_integer(text.as_bytes())
}

/// [`is_canonical_integer`] of a lexeme's bytes.
fn canonical_integer(text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    match digits {
        [] => false,
        [d] => d.is_ascii_digit(),
        [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
    }
}

impl WriteJson for Number {
    fn write_json(&self, out: &mut String) {
        let bytes = self.lexeme_bytes();
        // The `Serialize` impl prints a canonical integer lexeme back as it
        // is (through `itoa`, or verbatim for `-0` and beyond `u64`). Every
        // other lexeme takes that impl's steps, one by one.
        if canonical_integer(bytes) {
            if bytes.len() <= 8 {
                // A few ASCII digits, pushed as they are: cheaper than
                // checking them as a `str` and copying them.
                out.extend(bytes.iter().copied().map(char::from));
            } else {
                out.push_str(self.as_str());
            }
            return;
        }
        let text = self.as_str();
        if self.is_integer() {
            if let Ok(i) = text.parse::<i64>() {
                if text != "-0" {
                    write_i64(out, i);
                    return;
                }
            } else if let Ok(u) = text.parse::<u64>() {
                write_u64(out, u);
                return;
            }
        }
        if self.is_finite() {
            out.push_str(text);
        } else {
            write_str(out, text);
        }
    }

    fn size_hint(&self) -> usize {
        // Exact for an integer written back as it is (the usual case, and
        // what `Object::insert` sizes kept text with).
        let bytes = self.lexeme_bytes();
        if canonical_integer(bytes) {
            bytes.len()
        } else {
            bytes.len() + 2
        }
    }
}

impl WriteJson for bool {
    fn write_json(&self, out: &mut String) {
        write_bool(out, *self);
    }

    fn size_hint(&self) -> usize {
        5
    }
}

impl WriteJson for str {
    fn write_json(&self, out: &mut String) {
        write_str(out, self);
    }

    fn size_hint(&self) -> usize {
        self.len() + 2
    }
}

impl WriteJson for String {
    fn write_json(&self, out: &mut String) {
        write_str(out, self);
    }

    fn size_hint(&self) -> usize {
        self.len() + 2
    }
}

impl<T: WriteJson> WriteJson for Option<T> {
    fn write_json(&self, out: &mut String) {
        match self {
            Some(v) => v.write_json(out),
            None => out.push_str("null"),
        }
    }

    fn size_hint(&self) -> usize {
        self.as_ref().map_or(4, T::size_hint)
    }
}

impl<T: WriteJson + ?Sized> WriteJson for &T {
    fn write_json(&self, out: &mut String) {
        (**self).write_json(out);
    }

    fn size_hint(&self) -> usize {
        (**self).size_hint()
    }
}

// ---------------------------------------------------------------------------
// Containers

impl<T: WriteJson> WriteJson for [T] {
    fn write_json(&self, out: &mut String) {
        out.push('[');
        for (i, v) in self.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            v.write_json(out);
        }
        out.push(']');
    }

    fn size_hint(&self) -> usize {
        self.iter().map(|v| v.size_hint() + 1).sum::<usize>() + 2
    }
}

impl<T: WriteJson> WriteJson for Vec<T> {
    fn write_json(&self, out: &mut String) {
        self.as_slice().write_json(out);
    }

    fn size_hint(&self) -> usize {
        self.as_slice().size_hint()
    }
}

impl<V: WriteJson> WriteJson for Map<V> {
    fn write_json(&self, out: &mut String) {
        out.push('{');
        for (i, (k, v)) in self.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_str(out, k);
            out.push(':');
            v.write_json(out);
        }
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        self.iter()
            .map(|(k, v)| k.len() + 4 + v.size_hint())
            .sum::<usize>()
            + 2
    }
}

impl WriteJson for Object {
    fn write_json(&self, out: &mut String) {
        match self.raw_text() {
            Some(text) => out.push_str(text),
            None => self.as_map().write_json(out),
        }
    }

    /// Kept text: its length. A map: its keys and scalar values, and an
    /// allowance for each container value, whose contents are not visited
    /// (a walk of the whole tree costs more than the occasional regrowth).
    fn size_hint(&self) -> usize {
        match self.raw_text() {
            Some(text) => text.len(),
            None => {
                self.as_map()
                    .iter()
                    .map(|(k, v)| k.len() + 4 + shallow_hint(v))
                    .sum::<usize>()
                    + 2
            }
        }
    }
}

/// The size of a value inside a map or array: exact for scalars and kept
/// text, an allowance per element or entry for other containers.
fn shallow_hint(v: &Json) -> usize {
    const PER_ELEMENT: usize = 48;
    const PER_ENTRY: usize = 64;
    match v {
        Json::Null | Json::Bool(_) => 5,
        Json::Number(n) => n.as_str().len() + 2,
        Json::String(s) => s.len() + 2,
        Json::Array(a) => a.len() * PER_ELEMENT + 2,
        Json::Object(o) => o.raw_text().map_or(o.len() * PER_ENTRY + 2, str::len),
    }
}

impl WriteJson for Json {
    fn write_json(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => write_bool(out, *b),
            Json::Number(n) => n.write_json(out),
            Json::String(s) => write_str(out, s),
            Json::Array(a) => a.write_json(out),
            Json::Object(o) => o.write_json(out),
        }
    }

    fn size_hint(&self) -> usize {
        match self {
            Json::Null | Json::Bool(_) => 5,
            Json::Number(n) => n.size_hint(),
            Json::String(s) => s.len() + 2,
            Json::Array(a) => a.iter().map(|v| shallow_hint(v) + 1).sum::<usize>() + 2,
            Json::Object(o) => o.size_hint(),
        }
    }
}

/// A value of this crate as [`Json`], by writing it and reading the text
/// back within `limits` (`null` beyond them): used for the `input` of a
/// model-level error, which pydantic reports as the model's dump.
pub(crate) fn to_value<T: WriteJson + ?Sized>(value: &T, limits: super::lex::Limits) -> Json {
    super::parse::parse(to_string(value).as_bytes(), limits).unwrap_or_default()
}

/// Test support shared with the models' writer tests: values and strings
/// that are hard to write right, and the serde path to compare with.
#[cfg(test)]
pub(crate) mod testing {
    use proptest::prelude::*;
    use serde::Serialize;

    use super::{WriteJson, to_string};
    use crate::json::{Json, KeyFilter, Number, Object};

    /// `true` for the bytes serde_json escapes.
    pub(crate) fn needs_escape(b: u8) -> bool {
        b < 0x20 || b == b'"' || b == b'\\'
    }

    /// The serde path: `serde_json::to_string` through the `Serialize` impls.
    pub(crate) fn serde<T: Serialize + ?Sized>(value: &T) -> String {
        serde_json::to_string(value).expect("the Serialize impls never fail")
    }

    /// The writer and the serde path give the same bytes; returns them.
    #[track_caller]
    pub(crate) fn same<T: WriteJson + Serialize + ?Sized>(value: &T) -> String {
        let ours = to_string(value);
        let theirs = serde(value);
        assert_eq!(ours, theirs);
        ours
    }

    pub(crate) fn raw(text: &str) -> Object {
        Object::from_validated_text(text, KeyFilter::ANY)
    }

    pub(crate) fn num(lexeme: &str) -> Json {
        Json::Number(Number::from_parser(lexeme))
    }

    /// Every string a test below needs to get right.
    pub(crate) fn tricky_strings() -> Vec<String> {
        let mut out: Vec<String> = (0u8..0x80).map(|b| char::from(b).to_string()).collect();
        out.extend(
            [
                "",
                "plain",
                "a/b</script>",
                "\u{7f}",
                "é — ü ß",
                "\u{80}\u{7ff}\u{800}\u{ffff}",
                "emoji 😀🤖 and \u{10ffff}",
                "quote \" backslash \\ slash / tab \t nl \n cr \r bs \u{8} ff \u{c}",
                "\u{0}\u{1}\u{1f}\u{1b}[0m",
                "{\"infos\": \"panda: press_button succeed\"}",
                "\\u0000 is not a control character here",
            ]
            .map(str::to_owned),
        );
        out.push((0u8..0x20).map(char::from).collect());
        out.push("x".repeat(1000) + "\"" + &"y".repeat(7));
        out
    }

    /// Lexemes a `Number` can hold, including the non-finite ones the parser
    /// keeps for error `input`s and a few non-canonical integers no
    /// constructor makes, to pin the `Serialize` impl's re-printing.
    pub(crate) const LEXEMES: &[&str] = &[
        "0",
        "-0",
        "1",
        "-1",
        "42",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "123456789012345678901234567890",
        "-123456789012345678901234567890",
        "0.0",
        "-0.0",
        "1.5",
        "-2.5",
        "1E+2",
        "1e2",
        "1e-7",
        "2.5E-3",
        "1e308",
        "1e309",
        "1e400",
        "-1e400",
        "1e-400",
        "NaN",
        "Infinity",
        "-Infinity",
        // Non-canonical integers.
        "007",
        "-007",
        "-00",
        "00",
        "+5",
        "018446744073709551615",
        "0123456789012345678901234567890",
    ];

    pub(crate) fn sample_object() -> Object {
        let mut o = Object::new();
        for (i, s) in tricky_strings().into_iter().enumerate() {
            o.insert(s.clone(), Json::String(s));
            o.insert(format!("n{i}"), num(LEXEMES[i % LEXEMES.len()]));
        }
        o
    }

    /// One `Json` of every kind, nested, with kept text among maps.
    pub(crate) fn every_kind() -> Json {
        let mut inner = Object::new();
        inner.insert(
            "kept",
            Json::Object(raw(r#"{ "a" : [1, 2.50, {"b": null}] ,"c":"\u00e9\/"}"#)),
        );
        inner.insert("kept_empty", Json::Object(raw("{}")));
        inner.insert("kept_blank", Json::Object(raw("{ \n\t}")));
        inner.insert("empty", Json::Object(Object::new()));
        inner.insert("", Json::Array(vec![]));
        Json::Array(vec![
            Json::Null,
            Json::Bool(true),
            Json::Bool(false),
            num("-0"),
            num("1E+2"),
            num("1e400"),
            Json::String("\u{0}\"\\/é😀".into()),
            Json::Array(vec![Json::Array(vec![Json::Array(vec![])])]),
            Json::Object(inner),
            Json::Object(sample_object()),
        ])
    }

    /// Runs `f` on a thread with a large stack: some fixtures nest 1497
    /// deep, and validating and cloning those in a debug build needs more
    /// than a test thread's 2 MiB. What the writer needs is
    /// [`deep_values_fit_the_stack_budget`]'s business.
    pub(crate) fn on_large_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(f)
            .expect("spawn")
            .join()
            .expect("no panic");
    }

    pub(crate) fn tricky_char() -> impl Strategy<Value = char> {
        prop_oneof![
            (0u8..0x20).prop_map(char::from),
            Just('"'),
            Just('\\'),
            Just('/'),
            Just('\u{7f}'),
            Just('é'),
            Just('😀'),
            Just('a'),
            any::<char>(),
        ]
    }

    pub(crate) fn tricky_string() -> impl Strategy<Value = String> {
        proptest::collection::vec(tricky_char(), 0..24).prop_map(String::from_iter)
    }

    /// `Json` built directly: any string, any lexeme (non-finite ones
    /// too), maps and kept text.
    pub(crate) fn json_value() -> impl Strategy<Value = Json> {
        let leaf = prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            proptest::sample::select(LEXEMES).prop_map(num),
            any::<i64>().prop_map(Json::from),
            any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Json::Null, Json::Number)),
            tricky_string().prop_map(Json::String),
            proptest::sample::select(
                &[
                    "{}",
                    "{ }",
                    r#"{"a":1}"#,
                    r#"{ "k" : [ 1 , -0 , 1E+2 , "\u0000\"" ] }"#,
                ][..]
            )
            .prop_map(|t| Json::Object(raw(t))),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Json::Array),
                proptest::collection::vec((tricky_string(), inner), 0..5)
                    .prop_map(|kv| Json::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// JSON-ish text from tricky tokens, as `parse.rs` tests use.
    pub(crate) fn json_text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("false".to_owned()),
            Just("NaN".to_owned()),
            Just("-Infinity".to_owned()),
            Just("1e400".to_owned()),
            Just("-0".to_owned()),
            Just("-0.0".to_owned()),
            Just("1E+2".to_owned()),
            Just("18446744073709551616".to_owned()),
            Just("-9223372036854775808".to_owned()),
            Just("123456789012345678901234567890".to_owned()),
            Just("01".to_owned()),
            Just(r#""\ud83d\ude00""#.to_owned()),
            Just(r#""\u0000\u001f\u007f\/\b\f""#.to_owned()),
            Just("\"é😀 \\\" \\\\\"".to_owned()),
            Just("\"tab\there\"".to_owned()),
            Just("[]".to_owned()),
            Just("{}".to_owned()),
            tricky_string().prop_map(|s| serde_json::to_string(&s).unwrap()),
        ];
        let key = prop_oneof![
            Just(r#""a""#.to_owned()),
            Just(r#""\u0061""#.to_owned()),
            Just(r#""a b""#.to_owned()),
            Just(r#""\n""#.to_owned()),
        ];
        crate::json::parse::nested_text(leaf, key, " :\n")
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::to_string;
    use crate::json::{Json, Map, Number, Object};

    #[test]
    fn strings_escape_as_serde_json_does() {
        for s in tricky_strings() {
            let json = same(&Json::String(s.clone()));
            // serde_json's own string escaper, not through this crate.
            assert_eq!(json, serde_json::to_string(&s).unwrap());
        }
        // Every byte that needs an escape, in every lane of the 8-byte scan,
        // between runs of bytes that do not (ASCII, DEL, multi-byte UTF-8).
        for special in (0u8..0x20).chain([b'"', b'\\']) {
            for filler in ["a", "\u{7f}", "é", "😀", "/", " ", "!", "#", "[", "]"] {
                for at in 0..20 {
                    let mut s = filler.repeat(at);
                    s.push(char::from(special));
                    s.push_str(&filler.repeat(19 - at));
                    let mut ours = String::new();
                    super::write_str(&mut ours, &s);
                    assert_eq!(
                        ours,
                        serde_json::to_string(&s).unwrap(),
                        "{special:#x} {at}"
                    );
                }
            }
        }
    }

    #[test]
    fn strings_of_every_short_length_with_one_or_two_escapes() {
        // Lengths around the 8-byte words: whole words, partial last words
        // (read overlapping when the string has 8 bytes or more, assembled
        // when it has fewer), escapes in the part already scanned.
        for len in 0..=18 {
            for filler in [b'a', b'#', b']', b'!', b' ', 0x7f] {
                let plain = vec![filler; len];
                let check = |bytes: &[u8]| {
                    let s = std::str::from_utf8(bytes).unwrap();
                    let mut ours = String::new();
                    super::write_str(&mut ours, s);
                    assert_eq!(ours, serde_json::to_string(s).unwrap(), "{bytes:?}");
                };
                check(&plain);
                for at in 0..len {
                    for special in [0u8, 0x1f, b'\n', b'"', b'\\'] {
                        let mut one = plain.clone();
                        one[at] = special;
                        check(&one);
                        for second in at + 1..len {
                            let mut two = one.clone();
                            two[second] = b'"';
                            check(&two);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn escape_lanes_find_exactly_the_first_special_byte() {
        for b in 0u8..=255 {
            for lane in 0..8 {
                let mut w = [b'a'; 8];
                w[lane] = b;
                let lanes = super::escape_lanes(u64::from_le_bytes(w));
                let first = (lanes != 0).then(|| lanes.trailing_zeros() / 8);
                let want = needs_escape(b).then_some(lane as u32);
                assert_eq!(first, want, "{b:#x} in lane {lane}");
            }
        }
        // A special byte below makes lanes above it unreliable, never the
        // first one.
        for w in [
            [0u8, 0x20, b'"', 0x21, 0x7f, 0x80, 0xff, 0x1f],
            [0x1f; 8],
            [0xff; 8],
        ] {
            let lanes = super::escape_lanes(u64::from_le_bytes(w));
            let first = w.iter().position(|&b| needs_escape(b));
            assert_eq!(
                (lanes != 0).then(|| lanes.trailing_zeros() as usize / 8),
                first
            );
        }
    }

    #[test]
    fn integers_print_as_itoa_does() {
        for n in [
            0i64,
            1,
            -1,
            9,
            10,
            -10,
            99,
            100,
            12345,
            i64::MAX,
            i64::MIN,
            -i64::MAX,
        ] {
            let mut out = String::new();
            super::write_i64(&mut out, n);
            assert_eq!(out, n.to_string());
        }
        for n in [0u64, 7, 10, u64::from(u32::MAX), u64::MAX, u64::MAX / 10] {
            let mut out = String::new();
            super::write_u64(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }

    #[test]
    fn numbers_write_as_the_serialize_impl_does() {
        let long_float = format!("1{}.5", "0".repeat(400));
        let long_small = format!("0.{}1", "0".repeat(400));
        let long_int = "9".repeat(400);
        let lexemes = LEXEMES
            .iter()
            .copied()
            .chain([&*long_float, &*long_small, &*long_int]);
        for lexeme in lexemes {
            let json = same(&num(lexeme));
            same(&Json::Array(vec![num(lexeme), num(lexeme)]));
            if super::is_canonical_integer(lexeme) || (lexeme.contains('.') && lexeme.len() < 300) {
                assert_eq!(json, lexeme);
            }
        }
        assert_eq!(to_string(&num("-0")), "-0");
        assert_eq!(to_string(&num("1e400")), "\"1e400\"");
        assert_eq!(to_string(&num("NaN")), "\"NaN\"");
        assert_eq!(to_string(&num(&long_float)), format!("\"{long_float}\""));
        assert_eq!(to_string(&num("007")), "7");
        assert_eq!(to_string(&num("+5")), "5");
        assert_eq!(to_string(&num("-00")), "0");
        assert_eq!(to_string(&num("1E+2")), "1E+2");
        // The public constructors.
        for f in [
            0.0,
            -0.0,
            1.0,
            0.1,
            1e300,
            1e-300,
            5e-324,
            f64::MAX,
            f64::MIN,
        ] {
            let n = Number::from_f64(f).unwrap();
            assert_eq!(same(&Json::Number(n.clone())), n.as_str());
        }
        for n in [
            Json::from(i128::MIN),
            Json::from(u128::MAX),
            Json::from(-7i8),
        ] {
            same(&n);
        }
    }

    #[test]
    fn json_objects_and_maps() {
        let all = every_kind();
        let text = same(&all);
        assert!(text.contains(r#"{"kept":{ "a" : [1, 2.50, {"b": null}] ,"c":"\u00e9\/"},"#));
        assert!(text.contains(r#""kept_empty":{},"kept_blank":{ "#));
        same(&Json::Object(Object::new()));
        same(&Object::new());
        same(&raw("{}"));
        same(&raw(r#"{"x":{"y":[]}}"#));
        same(&sample_object());
        // A kept object that has been read stays text; a changed one is a map.
        let mut o = raw(r#"{"a": 1,  "b": "x"}"#);
        assert_eq!(o.get("a"), Some(&Json::from(1)));
        assert_eq!(same(&o), r#"{"a": 1,  "b": "x"}"#);
        o.insert("c", Json::Array(vec![Json::Null]));
        if let Some(v) = o.get_mut("a") {
            *v = num("-0");
        }
        same(&o);
        let mut caps = Map::new();
        caps.insert("inference", true);
        caps.insert("é\n", false);
        same(&caps);
        same(&Map::<bool>::new());
        // Deep nesting, as deep as the parser allows.
        let depth = crate::json::TEST_LIMITS.depth - 1;
        let deep = format!("{}{}", "[{\"k\":".repeat(depth / 2), "}]".repeat(depth / 2));
        let deep = deep.replacen("}]", "0}]", 1);
        let deep = crate::json::parse::parse(deep.as_bytes(), crate::json::TEST_LIMITS).unwrap();
        same(&deep);
    }

    /// Values as deep as the parser allows are written on the stack budget
    /// of `tests/it/hostile.rs`: 256 KiB optimised, 2 MiB in a debug build.
    #[test]
    fn deep_values_fit_the_stack_budget() {
        let depth = crate::json::TEST_LIMITS.depth;
        let (mut array, mut object, mut mixed) = (Json::Null, Json::from(0), Json::Null);
        for level in 0..depth {
            array = Json::Array(vec![array]);
            object = Json::Object([("k", object)].into_iter().collect());
            mixed = match level % 3 {
                0 => Json::Array(vec![Json::Object(raw("{}")), mixed]),
                1 => Json::Object([("é", mixed), ("n", num("-0"))].into_iter().collect()),
                _ => Json::Object([("", mixed)].into_iter().collect()),
            };
        }
        let want_array = "[".repeat(depth) + "null" + &"]".repeat(depth);
        let want_object = "{\"k\":".repeat(depth) + "0" + &"}".repeat(depth);
        let stack = if cfg!(debug_assertions) {
            2 << 20
        } else {
            256 << 10
        };
        let (array, object, mixed) = std::thread::Builder::new()
            .stack_size(stack)
            .spawn(move || {
                assert_eq!(array.to_json_string(), want_array);
                assert_eq!(object.to_json_string(), want_object);
                let text = mixed.to_json_string();
                assert!(text.len() > 5 * depth);
                (array, object, mixed)
            })
            .expect("spawn")
            .join()
            .expect("no stack overflow");
        on_large_stack(move || {
            for v in [array, object, mixed] {
                same(&v);
            }
        });
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Parsed values write as the serde path does.
        #[test]
        fn parsed_values_write_as_serde_json_does(text in json_text()) {
            if let Ok(v) = crate::json::parse::parse(text.as_bytes(), crate::json::TEST_LIMITS) {
                proptest::prop_assert_eq!(to_string(&v), serde(&v));
            }
        }

        /// Values built by hand write as the serde path does.
        #[test]
        fn built_values_write_as_serde_json_does(v in json_value()) {
            proptest::prop_assert_eq!(v.to_json_string(), serde(&v));
        }
    }
}
