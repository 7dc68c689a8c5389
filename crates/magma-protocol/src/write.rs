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
//! `serde_json::to_string` gives through the `Serialize` impls of
//! [`crate::ser`], which stay the reference (the tests below compare the two
//! on every fixture document and on generated values):
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

use crate::json::{Json, Map, Number, Object};
use crate::model::{
    AgentDecision, AgentError, AgentHealth, AgentInfo, AgentInput, AgentInstruction, AgentOutput,
    AgentRequest, AgentResponse, Outcome, ToolCall,
};

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
fn capacity_for(hint: usize) -> usize {
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
#[inline]
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

/// Appends `s` as a JSON string, escaped as serde_json does.
pub(crate) fn write_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    loop {
        let i = next_escape(bytes, start);
        // Runs end before an ASCII byte or at the end: always a char boundary.
        out.push_str(&s[start..i]);
        let Some(&b) = bytes.get(i) else { break };
        push_escape(out, b);
        start = i + 1;
    }
    out.push('"');
}

fn push_escape(out: &mut String, b: u8) {
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

fn write_u64(out: &mut String, mut n: u64) {
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

fn write_i64(out: &mut String, n: i64) {
    if n < 0 {
        out.push('-');
    }
    write_u64(out, n.unsigned_abs());
}

fn write_bool(out: &mut String, b: bool) {
    out.push_str(if b { "true" } else { "false" });
}

/// `-?(0|[1-9][0-9]*)`: what `itoa` prints back for the integers it can
/// hold, so the lexeme can be copied.
fn is_canonical_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text).as_bytes();
    match digits {
        [] => false,
        [d] => d.is_ascii_digit(),
        [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
    }
}

impl WriteJson for Number {
    fn write_json(&self, out: &mut String) {
        let text = self.as_str();
        // The `Serialize` impl prints a canonical integer lexeme back as it
        // is (through `itoa`, or verbatim for `-0` and beyond `u64`). Every
        // other lexeme takes that impl's steps, one by one.
        if is_canonical_integer(text) {
            out.push_str(text);
            return;
        }
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
        let text = self.as_str();
        if is_canonical_integer(text) {
            text.len()
        } else {
            text.len() + 2
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

// ---------------------------------------------------------------------------
// Models: the fields of `crate::ser`, in the same order. Each `push_str`
// literal holds the punctuation and key before a value; each `size_hint`
// counts those literals roughly (20 bytes for an integer).

impl WriteJson for AgentInstruction {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"type\":\"");
        out.push_str(self.kind.as_str());
        out.push_str("\",\"content\":");
        write_str(out, &self.content);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        32 + self.content.len()
    }
}

impl WriteJson for AgentInput {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        write_i64(out, self.id);
        out.push_str(",\"instruction\":");
        self.instruction.write_json(out);
        out.push_str(",\"tools\":");
        self.tools.write_json(out);
        out.push_str(",\"attributes\":");
        self.attributes.write_json(out);
        out.push_str(",\"memory\":");
        self.memory.write_json(out);
        out.push_str(",\"num_outputs\":");
        write_u64(out, self.num_outputs.get());
        out.push_str(",\"extra_keys\":");
        self.extra_keys.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        120 + self.instruction.size_hint()
            + self.tools.size_hint()
            + self.attributes.size_hint()
            + self.memory.size_hint()
            + self.extra_keys.size_hint()
    }
}

impl WriteJson for AgentRequest {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"request_id\":");
        write_str(out, self.request_id());
        out.push_str(",\"inputs\":");
        self.inputs().write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        30 + self.request_id().len() + self.inputs().size_hint()
    }
}

impl WriteJson for ToolCall {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"name\":");
        write_str(out, &self.name);
        out.push_str(",\"arguments\":");
        self.arguments.write_json(out);
        out.push_str(",\"target_robot_name\":");
        write_str(out, &self.target_robot_name);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        48 + self.name.len() + self.arguments.size_hint() + self.target_robot_name.len()
    }
}

impl WriteJson for AgentDecision {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"say\":");
        write_str(out, &self.say);
        out.push_str(",\"tool_calls\":");
        self.tool_calls.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        28 + self.say.len() + self.tool_calls.size_hint()
    }
}

impl WriteJson for AgentError {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"code\":");
        write_str(out, &self.code);
        out.push_str(",\"message\":");
        write_str(out, &self.message);
        out.push_str(",\"component\":");
        self.component.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        40 + self.code.len() + self.message.len() + self.component.size_hint()
    }
}

/// `"status":"…",` of a candidate.
fn write_status_field(out: &mut String, outcome: &Outcome) {
    out.push_str("\"status\":\"");
    out.push_str(outcome.status().as_str());
    out.push_str("\",");
}

/// `"output":…,"error":…` of a candidate.
fn write_output_and_error(out: &mut String, outcome: &Outcome) {
    out.push_str("\"output\":");
    outcome.decision().write_json(out);
    out.push_str(",\"error\":");
    outcome.error().write_json(out);
}

fn outcome_size_hint(outcome: &Outcome) -> usize {
    44 + outcome.decision().size_hint() + outcome.error().size_hint()
}

impl WriteJson for Outcome {
    fn write_json(&self, out: &mut String) {
        out.push('{');
        write_status_field(out, self);
        write_output_and_error(out, self);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        outcome_size_hint(self)
    }
}

impl WriteJson for AgentOutput {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"request_id\":");
        write_str(out, &self.request_id);
        out.push_str(",\"source_id\":");
        write_i64(out, self.source_id);
        out.push_str(",\"candidate_index\":");
        write_u64(out, self.candidate_index);
        out.push(',');
        write_status_field(out, &self.outcome);
        out.push_str("\"memory\":");
        self.memory.write_json(out);
        out.push_str(",\"internal_steps\":");
        self.internal_steps.write_json(out);
        out.push(',');
        write_output_and_error(out, &self.outcome);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        130 + self.request_id.len()
            + self.memory.size_hint()
            + self.internal_steps.size_hint()
            + outcome_size_hint(&self.outcome)
    }
}

impl WriteJson for AgentResponse {
    fn write_json(&self, out: &mut String) {
        self.candidates().write_json(out);
    }

    fn size_hint(&self) -> usize {
        self.candidates().size_hint()
    }
}

impl WriteJson for AgentHealth {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"status\":\"ready\"}");
    }

    fn size_hint(&self) -> usize {
        18
    }
}

impl WriteJson for AgentInfo {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"protocol_version\":");
        write_str(out, &self.protocol_version);
        out.push_str(",\"agent_id\":");
        write_str(out, &self.agent_id);
        out.push_str(",\"agent_version\":");
        write_str(out, &self.agent_version);
        out.push_str(",\"specialized_coaching\":");
        self.specialized_coaching.write_json(out);
        out.push_str(",\"coaching_resume\":");
        write_bool(out, self.coaching_resume);
        out.push_str(",\"coaching_unavailable_reason\":");
        self.coaching_unavailable_reason.write_json(out);
        out.push_str(",\"capabilities\":");
        self.capabilities.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        170 + self.protocol_version.len()
            + self.agent_id.len()
            + self.agent_version.len()
            + self.specialized_coaching.size_hint()
            + self.coaching_unavailable_reason.size_hint()
            + self.capabilities.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::{WriteJson, to_string};
    use crate::json::{Json, Map, Number, Object};
    use crate::model::{
        AgentDecision, AgentError, AgentHealth, AgentInfo, AgentInput, AgentInstruction,
        AgentOutput, AgentRequest, AgentResponse, NonEmptyString, Outcome, ToolCall,
    };
    use serde::Serialize;

    /// `true` for the bytes serde_json escapes.
    fn needs_escape(b: u8) -> bool {
        b < 0x20 || b == b'"' || b == b'\\'
    }

    const FIXTURES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/reference.jsonl"
    );

    /// The serde path: `serde_json::to_string` through `crate::ser`.
    fn serde<T: Serialize + ?Sized>(value: &T) -> String {
        serde_json::to_string(value).expect("the Serialize impls never fail")
    }

    /// The writer and the serde path give the same bytes; returns them.
    #[track_caller]
    fn same<T: WriteJson + Serialize + ?Sized>(value: &T) -> String {
        let ours = to_string(value);
        let theirs = serde(value);
        assert_eq!(ours, theirs);
        ours
    }

    fn nes(s: &str) -> NonEmptyString {
        NonEmptyString::new(s).unwrap()
    }

    fn raw(text: &str) -> Object {
        Object::from_validated_text(text, crate::parse::ANY_KEY)
    }

    fn num(lexeme: &str) -> Json {
        Json::Number(Number::from_parser(lexeme))
    }

    /// Every string a test below needs to get right.
    fn tricky_strings() -> Vec<String> {
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

    /// Lexemes a `Number` can hold, including the non-finite ones the parser
    /// keeps for error `input`s and a few non-canonical integers no
    /// constructor makes, to pin the `Serialize` impl's re-printing.
    const LEXEMES: &[&str] = &[
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

    fn sample_object() -> Object {
        let mut o = Object::new();
        for (i, s) in tricky_strings().into_iter().enumerate() {
            o.insert(s.clone(), Json::String(s));
            o.insert(format!("n{i}"), num(LEXEMES[i % LEXEMES.len()]));
        }
        o
    }

    /// One `Json` of every kind, nested, with kept text among maps.
    fn every_kind() -> Json {
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
        let depth = crate::parse::MAX_JSON_DEPTH - 1;
        let deep = format!("{}{}", "[{\"k\":".repeat(depth / 2), "}]".repeat(depth / 2));
        let deep = deep.replacen("}]", "0}]", 1);
        let deep = Json::from_slice(deep.as_bytes()).unwrap();
        same(&deep);
    }

    /// Values as deep as the parser allows are written on the stack budget
    /// of `tests/it/hostile.rs`: 256 KiB optimised, 2 MiB in a debug build.
    #[test]
    fn deep_values_fit_the_stack_budget() {
        let depth = crate::parse::MAX_JSON_DEPTH;
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

    fn request() -> AgentRequest {
        let mut a = AgentInput::new(-3, AgentInstruction::env("{\"infos\": \"a\\nb\"}"));
        a.tools = vec![raw(r#"{"name":"t","arguments":{}}"#), sample_object()];
        a.attributes = raw(r#"{"known_robots":["panda"]}"#);
        a.memory = sample_object();
        a.num_outputs = std::num::NonZeroU64::new(u64::MAX).unwrap();
        a.extra_keys.insert("inference_mode", Json::Bool(true));
        let b = AgentInput::new(i64::MIN, AgentInstruction::user("\u{1f}😀/"));
        AgentRequest::new("r\"1", vec![a, b]).unwrap()
    }

    fn candidates() -> Vec<AgentOutput> {
        let call = ToolCall {
            name: nes("move\tto"),
            arguments: sample_object(),
            target_robot_name: nes("pánda"),
        };
        let outcomes = [
            Outcome::Completed(AgentDecision::default()),
            Outcome::Completed(AgentDecision::say("hi \"there\"")),
            Outcome::Completed(AgentDecision {
                say: "both".into(),
                tool_calls: vec![call.clone(), call],
            }),
            Outcome::Error(AgentError::new("", "")),
            Outcome::Error(AgentError::new("demo_error", "bad\u{0}").with_component("dé\\mo")),
        ];
        outcomes
            .into_iter()
            .enumerate()
            .map(|(i, outcome)| AgentOutput {
                request_id: nes("req/é"),
                source_id: i as i64 - 2,
                candidate_index: u64::MAX - i as u64,
                memory: if i % 2 == 0 {
                    sample_object()
                } else {
                    raw(r#"{"m": []}"#)
                },
                internal_steps: vec![Object::new(), raw(r#"{"s":1}"#), sample_object()],
                outcome,
            })
            .collect()
    }

    #[test]
    fn models_built_by_hand() {
        let req = request();
        assert_eq!(req.to_json_string(), serde(&req));
        for input in req.inputs() {
            same(input);
            same(&input.instruction);
        }
        let outputs = candidates();
        for c in &outputs {
            same(c);
            same(&c.outcome);
            if let Some(d) = c.outcome.decision() {
                same(d);
                for t in &d.tool_calls {
                    same(t);
                }
            }
            if let Some(e) = c.outcome.error() {
                same(e);
            }
        }
        let response = AgentResponse::new(outputs);
        assert_eq!(response.to_json_string(), serde(&response));
        assert_eq!(AgentResponse::default().to_json_string(), "[]");
        assert_eq!(AgentHealth.to_json_string(), serde(&AgentHealth));
        assert_eq!(AgentHealth.to_json_string(), r#"{"status":"ready"}"#);

        let mut info = AgentInfo::new("agent \"x\"", "1.0\n");
        assert_eq!(info.to_json_string(), serde(&info));
        info.specialized_coaching = vec!["failure".into(), "é\u{1}".into()];
        info.coaching_resume = true;
        info.coaching_unavailable_reason = Some("no \\ coach".into());
        info.capabilities.insert("streaming", false);
        info.protocol_version = String::new();
        assert_eq!(info.to_json_string(), serde(&info));
        assert_eq!(
            AgentInfo::new("a", "1").to_json_string(),
            r#"{"protocol_version":"2.0","agent_id":"a","agent_version":"1","specialized_coaching":[],"coaching_resume":false,"coaching_unavailable_reason":null,"capabilities":{"inference":true}}"#
        );
        assert_eq!(every_kind().to_json_string(), serde(&every_kind()));
    }

    /// Checks every value the document gives, returns how many.
    fn check_document(kind: &str, doc: &str, request: Option<&str>) -> usize {
        let mut checked = 0;
        let mut check = |ours: String, theirs: String| {
            assert_eq!(ours, theirs, "{kind} document {doc}");
            checked += 1;
        };
        let bytes = doc.as_bytes();
        match kind {
            "request" => match AgentRequest::from_slice(bytes) {
                Ok(v) => check(v.to_json_string(), serde(&v)),
                Err(e) => check(to_string(&e.to_fastapi_body()), serde(&e.to_fastapi_body())),
            },
            "response" | "exchange" => match AgentResponse::from_slice(bytes) {
                Ok(v) => check(v.to_json_string(), serde(&v)),
                Err(e) => check(to_string(&e.to_fastapi_body()), serde(&e.to_fastapi_body())),
            },
            "info" => match AgentInfo::from_slice(bytes) {
                Ok(v) => check(v.to_json_string(), serde(&v)),
                Err(e) => check(to_string(&e.to_fastapi_body()), serde(&e.to_fastapi_body())),
            },
            "health" => match AgentHealth::from_slice(bytes) {
                Ok(v) => check(v.to_json_string(), serde(&v)),
                Err(e) => check(to_string(&e.to_fastapi_body()), serde(&e.to_fastapi_body())),
            },
            other => panic!("unknown fixture kind {other:?}"),
        }
        if let Some(request) = request {
            checked += check_document("request", request, None);
        }
        // The same document as free-form JSON, validated and not (the
        // latter keeps NaN and 1e400).
        if let Ok(v) = Json::from_slice(bytes) {
            assert_eq!(v.to_json_string(), serde(&v), "{doc}");
            checked += 1;
        }
        if let Ok(v) = crate::parse::parse(bytes) {
            assert_eq!(to_string(&v), serde(&v), "{doc}");
            checked += 1;
        }
        checked
    }

    /// Runs `f` on a thread with a large stack: some fixtures nest 1497
    /// deep, and validating and cloning those in a debug build needs more
    /// than a test thread's 2 MiB. What the writer needs is
    /// [`deep_values_fit_the_stack_budget`]'s business.
    fn on_large_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(f)
            .expect("spawn")
            .join()
            .expect("no panic");
    }

    #[test]
    fn every_fixture_writes_as_serde_json_does() {
        on_large_stack(every_fixture);
    }

    fn every_fixture() {
        let text = std::fs::read_to_string(FIXTURES).expect("fixture file");
        let mut lines = text.lines();
        lines.next().expect("header line");
        let (mut cases, mut accepted, mut checked) = (0, 0, 0);
        for line in lines {
            let case: serde_json::Value = serde_json::from_str(line).expect("fixture line");
            let kind = case["kind"].as_str().expect("kind");
            let doc = case["doc"].as_str().expect("doc");
            checked += check_document(kind, doc, case["request"].as_str());
            cases += 1;
            accepted += usize::from(case["verdict"] == "accept");
        }
        assert!(cases >= 4000, "{cases} fixture cases");
        assert!(accepted >= 1700, "{accepted} accepted");
        assert!(checked >= 2 * cases, "{checked} values checked");
    }

    #[test]
    fn the_first_allocation_is_usually_enough() {
        on_large_stack(first_allocation);
    }

    fn first_allocation() {
        /// Written without growing the first buffer.
        fn fits<T: WriteJson + ?Sized>(v: &T) -> bool {
            to_string(v).capacity() == super::capacity_for(v.size_hint())
        }
        let text = std::fs::read_to_string(FIXTURES).expect("fixture file");
        let (mut models, mut models_fit, mut values, mut values_fit) = (0, 0, 0, 0);
        for line in text.lines().skip(1) {
            let case: serde_json::Value = serde_json::from_str(line).expect("fixture line");
            let doc = case["doc"].as_str().expect("doc").as_bytes();
            let mut model = |fit: bool| {
                models += 1;
                models_fit += usize::from(fit);
            };
            if let Ok(v) = AgentRequest::from_slice(doc) {
                model(fits(&v));
            }
            if let Ok(v) = AgentResponse::from_slice(doc) {
                model(fits(&v));
            }
            if let Ok(v) = AgentInfo::from_slice(doc) {
                model(fits(&v));
            }
            if let Ok(v) = Json::from_slice(doc) {
                values += 1;
                values_fit += usize::from(fits(&v));
            }
        }
        assert!(models > 1500 && values > 3000, "{models} {values}");
        assert!(
            models_fit * 100 >= models * 99,
            "{models_fit} of {models} models fit"
        );
        // Whole documents read as `Json` are trees of maps: most still fit.
        assert!(
            values_fit * 2 >= values,
            "{values_fit} of {values} values fit"
        );
        let response = AgentResponse::new(candidates());
        assert!(fits(&response));
        // What magma-server's demo agent answers: the memory changed, so a
        // map holding arrays of maps.
        let inputs: Vec<String> = (0..8)
            .map(|i| {
                format!(
                    r#"{{"id":{i},"instruction":{{"type":"env","content":"{{\"infos\": \"ok\"}}"}},"memory":{{"memory_list":[],"history":[{{"author":"USER","content":"Press sw{i}."}},{{"author":"MODEL","content":"Pressing sw{i}."}}]}}}}"#
                )
            })
            .collect();
        let body = format!(
            r#"{{"request_id":"7c9e6679742540de944be07fc1f90ae7","inputs":[{}]}}"#,
            inputs.join(",")
        );
        let request = AgentRequest::from_slice(body.as_bytes()).unwrap();
        let per_input = request
            .inputs()
            .iter()
            .map(|input| {
                let mut memory: Object = input.memory.as_map().clone().into();
                memory.insert("steps", Json::from(1));
                let call = ToolCall {
                    name: nes("cancel_current_action"),
                    arguments: Object::new(),
                    target_robot_name: nes("panda"),
                };
                vec![crate::Candidate::new(
                    memory,
                    AgentDecision::call(vec![call]),
                )]
            })
            .collect();
        let response = AgentResponse::assemble(&request, per_input).unwrap();
        assert!(response[0].memory.raw_text().is_none());
        assert!(fits(&response), "{}", response.to_json_string());
        assert!(response.size_hint() <= 2 * response.to_json_string().len());
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn tricky_char() -> impl Strategy<Value = char> {
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

        fn tricky_string() -> impl Strategy<Value = String> {
            proptest::collection::vec(tricky_char(), 0..24).prop_map(String::from_iter)
        }

        /// `Json` built directly: any string, any lexeme (non-finite ones
        /// too), maps and kept text.
        fn json_value() -> impl Strategy<Value = Json> {
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
        fn json_text() -> impl Strategy<Value = String> {
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
            crate::parse::nested_text(leaf, key, " :\n")
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            /// Parsed values, as `Json` and inside a request (where objects
            /// stay text), write as the serde path does.
            #[test]
            fn parsed_values_write_as_serde_json_does(text in json_text()) {
                if let Ok(v) = Json::from_slice(text.as_bytes()) {
                    prop_assert_eq!(v.to_json_string(), serde(&v));
                }
                if let Ok(v) = crate::parse::parse(text.as_bytes()) {
                    prop_assert_eq!(to_string(&v), serde(&v));
                }
                let object = if text.starts_with('{') { text.as_str() } else { "{}" };
                let body = format!(
                    r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":""}},"memory":{{"m":{text}}},"attributes":{object},"tools":[{object}]}}]}}"#
                );
                if let Ok(req) = AgentRequest::from_slice(body.as_bytes()) {
                    prop_assert_eq!(req.to_json_string(), serde(&req));
                }
            }

            /// Values built by hand write as the serde path does, alone and
            /// as every free-form and string field of a candidate.
            #[test]
            fn built_values_write_as_serde_json_does(
                v in json_value(),
                s in tricky_string(),
                steps in proptest::collection::vec(json_value(), 0..3),
            ) {
                prop_assert_eq!(v.to_json_string(), serde(&v));
                let object = |v: &Json| match v {
                    Json::Object(o) => o.clone(),
                    other => [(s.clone(), other.clone())].into_iter().collect(),
                };
                let name = NonEmptyString::new(format!("{s}x")).unwrap();
                let call = ToolCall {
                    name: name.clone(),
                    arguments: object(&v),
                    target_robot_name: name.clone(),
                };
                let error = AgentError::new(s.clone(), s.clone()).with_component(s.clone());
                let response = AgentResponse::new(
                    [Outcome::Completed(AgentDecision { say: s.clone(), tool_calls: vec![call] }),
                     Outcome::Error(error)]
                    .into_iter()
                    .map(|outcome| AgentOutput {
                        request_id: name.clone(),
                        source_id: -1,
                        candidate_index: 1,
                        memory: object(&v),
                        internal_steps: steps.iter().map(object).collect(),
                        outcome,
                    })
                    .collect(),
                );
                prop_assert_eq!(response.to_json_string(), serde(&response));
            }
        }
    }
}
