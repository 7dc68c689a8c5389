//! The normal text of a free-form object with repeated or escaped keys:
//! what writing its tree would give, written from the document's spans
//! without building the tree, so that such an object is kept as text too.
//!
//! The free-form scan ([`super::scan`]) keeps a clean object as the text the
//! document wrote; it refuses an object with a repeated key (the reference
//! keeps the last value at the first key's place) or an escaped key (whose
//! bytes are not the key). Built as a tree, such an object costs about 19
//! times its text, and a client could send one of any size. Here it is
//! read twice instead: [`plan`] checks it as the parser reads it and finds
//! its repeats (keys compared decoded, through a [`KeySet`] per open object),
//! [`write`] writes it as the writer writes a tree (compact, strings
//! escaped as serde_json does, numbers as written, each key once: at its
//! first place, with the value of its last). The result holds the
//! invariants of kept text: unique keys, each written as the writer writes
//! it (plain but for `"`, `\` and control characters), nested objects
//! likewise, and it reads as the tree reads. What it costs: the text
//! written (never longer than the object's), four bytes per repeated
//! member, eight per repeated key, and while an object is open the set of
//! its keys (5 to 11 bytes a key).

use super::KeyFilter;
use super::key_set::{KeySet, key_text, offsets_fit};
use super::lex::{Limits, skip_validated_value};
use super::lex::{
    escaped_string_end, hex4, number_end, plain_run_end, short_escape, surrogate_pair, ws_end,
};
use super::scan::{scan_number, scan_string};
use super::write::push_escape;

/// Reads the object at `start` (a `{`, in `src`, which is `text`) as
/// [`super::scan::scan_free_object`] does, but accepting repeated and
/// escaped keys: its end, its normal text and the [`KeyFilter`] of its
/// top-level keys (decoded). `None` for what the parser refuses anywhere in
/// the object, and for what validation refuses in a value that is kept
/// (not discarded by a repeat): the caller reads it as a tree, which
/// reports it with its location.
pub(crate) fn normalize_free_object(
    src: &[u8],
    text: &str,
    start: usize,
    depth_before: usize,
    limits: Limits,
) -> Option<(usize, String, KeyFilter)> {
    if !offsets_fit(src) {
        return None;
    }
    let plan = plan(src, text, start, depth_before, limits)?;
    // The normal text is never longer than the object's: escapes decode
    // to fewer bytes or as many, whitespace and repeats are dropped.
    let mut out = String::with_capacity(plan.end - start);
    let end = write(src, text, start, &plan, &mut out)?;
    (end == plan.end).then_some((end, out, plan.keys))
}

/// What [`write`] needs to know of an object beyond its text.
struct Plan {
    /// The end of the object.
    end: usize,
    /// How many levels of containers a kept value may open (the object
    /// itself is the first), as the scan counts them.
    free_form_levels: usize,
    /// The filter of its top-level keys.
    keys: KeyFilter,
    /// The opening quotes of the members not written: every occurrence
    /// of a key but its first, in document order (so sorted).
    skip: Vec<u32>,
    /// For each repeated key, sorted by the first: the opening quotes of
    /// its first occurrence and of its last, whose value is written at
    /// the first's place.
    last: Vec<(u32, u32)>,
}

impl Plan {
    fn skips(&self, at: usize) -> bool {
        !self.skip.is_empty() && self.skip.binary_search(&(at as u32)).is_ok()
    }

    /// The opening quote of the last occurrence of the key at `at`, when
    /// `at` is the first of a repeated key.
    fn last_of(&self, at: usize) -> Option<usize> {
        let i = self.last.binary_search_by_key(&(at as u32), |p| p.0).ok()?;
        Some(self.last[i].1 as usize)
    }
}

/// The repeats found so far: [`Plan::skip`], and pairs of a first and a
/// later occurrence, compacted to one pair (the latest) per key whenever
/// they double, so that a key repeated a million times costs one pair.
#[derive(Default)]
struct Repeats {
    skip: Vec<u32>,
    pairs: Vec<(u32, u32)>,
    compacted: usize,
}

impl Repeats {
    fn add(&mut self, first: usize, later: usize) {
        // Offsets fit: checked before planning.
        self.skip.push(later as u32);
        self.pairs.push((first as u32, later as u32));
        if self.pairs.len() > 2 * self.compacted + 1024 {
            self.compact();
        }
    }

    /// Sorts the pairs by first occurrence and keeps the latest of each.
    fn compact(&mut self) {
        self.pairs
            .sort_unstable_by_key(|&(first, later)| (first, std::cmp::Reverse(later)));
        self.pairs.dedup_by_key(|p| p.0);
        self.compacted = self.pairs.len();
    }
}

/// The first read: checks the object as the parser reads it (valid JSON,
/// within the document's depth, strings the parser reads cleanly, keys
/// included) and finds its repeats. The structure is the free-form scan's,
/// with a [`KeySet`] per open object in place of its key list. What
/// validation refuses in a value (a number that is not finite, nesting
/// deeper than a free-form value may) is left to [`write`]: only a value
/// that is kept counts, and a later repeat of its key discards it, as it
/// discards the value from the reference's dict, so a hostile object
/// cannot reach the tree that way.
fn plan(src: &[u8], text: &str, start: usize, depth_before: usize, limits: Limits) -> Option<Plan> {
    let mut repeats = Repeats::default();
    let mut keys = KeyFilter::EMPTY;
    let mut i = ws_end(src, start + 1);
    let free_form_levels = limits.free_form_depth.saturating_add(1);
    if src.get(i) == Some(&b'}') {
        return Some(Plan {
            end: i + 1,
            free_form_levels,
            keys,
            skip: Vec::new(),
            last: Vec::new(),
        });
    }
    let mut containers: Vec<u8> = Vec::new();
    let mut sets: Vec<KeySet> = Vec::new();
    let mut top = b'{';
    let mut level = 1usize;
    let mut set = KeySet::new(src);
    let open_levels = limits.depth.saturating_sub(depth_before + 1);
    i = plan_key(src, text, i, &mut set, &mut repeats, Some(&mut keys))?;
    'value: loop {
        i = ws_end(src, i);
        match *src.get(i)? {
            open @ (b'{' | b'[') => {
                if level > open_levels {
                    return None;
                }
                i = ws_end(src, i + 1);
                let close = if open == b'{' { b'}' } else { b']' };
                if src.get(i) == Some(&close) {
                    i += 1;
                } else {
                    containers.push(top);
                    top = open;
                    level += 1;
                    if open == b'{' {
                        sets.push(std::mem::replace(&mut set, KeySet::new(src)));
                        i = plan_key(src, text, i, &mut set, &mut repeats, None)?;
                    }
                    continue 'value;
                }
            }
            b'"' => i = scan_string(src, i)?,
            // Any number the parser reads, and its constants: validation
            // refuses a value that is not finite only where it is kept,
            // which `write` checks (a repeat may discard it).
            b'-' if src[i..].starts_with(b"-Infinity") => i += 9,
            b'-' | b'0'..=b'9' => i = number_end(src, i)?,
            b'N' if src[i..].starts_with(b"NaN") => i += 3,
            b'I' if src[i..].starts_with(b"Infinity") => i += 8,
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
                    let filter = (level == 1).then_some(&mut keys);
                    i = plan_key(src, text, i, &mut set, &mut repeats, filter)?;
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
                        repeats.compact();
                        return Some(Plan {
                            end: i,
                            free_form_levels,
                            keys,
                            skip: repeats.skip,
                            last: repeats.pairs,
                        });
                    }
                    set = sets.pop()?;
                    top = containers.pop()?;
                }
                (b']', b'[') => {
                    i += 1;
                    level -= 1;
                    top = containers.pop()?;
                }
                _ => return None,
            }
        }
    }
}

/// A key at `i` and its `:`, added to the keys of its object (`set`), a
/// repeat noted; `filter` takes the keys of the top level. Returns where
/// its value starts, after whitespace.
fn plan_key(
    src: &[u8],
    text: &str,
    i: usize,
    set: &mut KeySet,
    repeats: &mut Repeats,
    filter: Option<&mut KeyFilter>,
) -> Option<usize> {
    if src.get(i) != Some(&b'"') {
        return None;
    }
    let end = scan_string(src, i)?;
    match set.first_of(src, text, i) {
        Some(first) => repeats.add(first, i),
        None => {
            if let Some(filter) = filter {
                filter.add(KeyFilter::of(key_text(src, text, i).as_bytes()));
            }
        }
    }
    let j = ws_end(src, end);
    (src.get(j) == Some(&b':')).then_some(j + 1)
}

/// An open container of [`write`].
enum Open {
    /// An object, and whether a member of it was written (a `,` goes
    /// before the next).
    Object(bool),
    Array,
    /// A value written at the place of an earlier member of its key: the
    /// reading goes on after that earlier member's own value.
    Resume(usize),
}

/// What [`next_member`] found.
enum Next {
    /// A member to write: its key and `:` are written, its value starts
    /// at the first offset; the second is where the reading resumes after
    /// it when the value is that of a later occurrence of the key.
    Value(usize, Option<usize>),
    /// The object's end (its `}` written): the offset after it.
    Closed(usize),
}

/// The second read: writes the planned object (checked by [`plan`]) in
/// normal form; returns the end of the object. `None` for a kept value
/// that validation refuses (a number that is not finite, nesting deeper
/// than a free-form value may), as the scan refuses it.
fn write(src: &[u8], text: &str, start: usize, plan: &Plan, out: &mut String) -> Option<usize> {
    let mut stack: Vec<Open> = Vec::new();
    // The open containers, the object itself the first: a kept value
    // deeper than validation allows is its error to report.
    let mut level = 0usize;
    let mut i = start;
    'value: loop {
        i = ws_end(src, i);
        match *src.get(i)? {
            b'{' => {
                out.push('{');
                match next_member(src, text, ws_end(src, i + 1), plan, false, out)? {
                    Next::Value(value, resume) => {
                        level += 1;
                        if level > plan.free_form_levels {
                            return None;
                        }
                        stack.push(Open::Object(true));
                        if let Some(resume) = resume {
                            stack.push(Open::Resume(resume));
                        }
                        i = value;
                        continue 'value;
                    }
                    Next::Closed(after) => i = after,
                }
            }
            b'[' => {
                out.push('[');
                i = ws_end(src, i + 1);
                if src.get(i) == Some(&b']') {
                    out.push(']');
                    i += 1;
                } else {
                    level += 1;
                    if level > plan.free_form_levels {
                        return None;
                    }
                    stack.push(Open::Array);
                    continue 'value;
                }
            }
            b'"' => i = write_string(src, text, i, out)?,
            // `None` for a number validation refuses, and for the parser's
            // constants (`NaN`, `-Infinity`).
            b'-' | b'0'..=b'9' => {
                let end = scan_number(src, i)?;
                out.push_str(text.get(i..end)?);
                i = end;
            }
            c @ (b't' | b'f' | b'n') => {
                let word = match c {
                    b't' => "true",
                    b'f' => "false",
                    _ => "null",
                };
                out.push_str(word);
                i += word.len();
            }
            _ => return None,
        }
        // After a value.
        loop {
            match stack.last_mut() {
                None => return Some(i),
                Some(Open::Resume(at)) => {
                    i = *at;
                    stack.pop();
                }
                Some(Open::Array) => {
                    i = ws_end(src, i);
                    match *src.get(i)? {
                        b',' => {
                            out.push(',');
                            i += 1;
                            continue 'value;
                        }
                        b']' => {
                            out.push(']');
                            i += 1;
                            stack.pop();
                            level -= 1;
                        }
                        _ => return None,
                    }
                }
                Some(Open::Object(written)) => {
                    let written = *written;
                    i = ws_end(src, i);
                    let at = match *src.get(i)? {
                        b',' => ws_end(src, i + 1),
                        b'}' => i,
                        _ => return None,
                    };
                    match next_member(src, text, at, plan, written, out)? {
                        Next::Value(value, resume) => {
                            stack.pop();
                            stack.push(Open::Object(true));
                            if let Some(resume) = resume {
                                stack.push(Open::Resume(resume));
                            }
                            i = value;
                            continue 'value;
                        }
                        Next::Closed(after) => {
                            i = after;
                            stack.pop();
                            level -= 1;
                        }
                    }
                }
            }
        }
    }
}

/// From `i` (a key's opening quote, or the `}` of the object), passes the
/// members the plan skips and writes the key of the next one (after a `,`
/// when a member of the object was `written`), or the `}`.
fn next_member(
    src: &[u8],
    text: &str,
    mut i: usize,
    plan: &Plan,
    written: bool,
    out: &mut String,
) -> Option<Next> {
    loop {
        match *src.get(i)? {
            b'}' => {
                out.push('}');
                return Some(Next::Closed(i + 1));
            }
            b'"' => {}
            _ => return None,
        }
        let value = value_of(src, i)?;
        if plan.skips(i) {
            i = ws_end(src, skip_validated_value(src, value)?);
            match *src.get(i)? {
                b',' => i = ws_end(src, i + 1),
                b'}' => {}
                _ => return None,
            }
            continue;
        }
        if written {
            out.push(',');
        }
        write_string(src, text, i, out)?;
        out.push(':');
        return Some(match plan.last_of(i) {
            Some(last) => Next::Value(
                value_of(src, last)?,
                Some(skip_validated_value(src, value)?),
            ),
            None => Next::Value(value, None),
        });
    }
}

/// Where the value of the member whose key's opening quote is at `at`
/// starts.
fn value_of(src: &[u8], at: usize) -> Option<usize> {
    let close = escaped_string_end(src, at + 1);
    let colon = ws_end(src, close + 1);
    (src.get(colon) == Some(&b':')).then(|| ws_end(src, colon + 1))
}

/// Writes the string at `i` (checked) as the writer writes it: decoded,
/// then escaped as serde_json escapes. Returns the end of its closing
/// quote.
fn write_string(src: &[u8], text: &str, i: usize, out: &mut String) -> Option<usize> {
    out.push('"');
    let mut j = i + 1;
    loop {
        let run = plain_run_end(src, j);
        // A plain run ends before an ASCII byte: a char boundary.
        out.push_str(text.get(j..run)?);
        j = run;
        match *src.get(j)? {
            b'"' => {
                out.push('"');
                return Some(j + 1);
            }
            b'\\' => {
                let (c, next) = unescape(src, j)?;
                if c < '\u{20}' || c == '"' || c == '\\' {
                    // ASCII: the cast keeps it.
                    push_escape(out, c as u8);
                } else {
                    out.push(c);
                }
                j = next;
            }
            _ => return None,
        }
    }
}

/// The character of the escape at `j` (a `\`) and where the text goes on;
/// `None` for what the parser refuses (a lone surrogate among them).
fn unescape(src: &[u8], j: usize) -> Option<(char, usize)> {
    let c = match *src.get(j + 1)? {
        b'u' => {
            let v = hex4(src, j + 2)?;
            if (0xD800..0xDC00).contains(&v) {
                if src.get(j + 6..j + 8) != Some(b"\\u") {
                    return None;
                }
                let lo = hex4(src, j + 8)?;
                if !(0xDC00..0xE000).contains(&lo) {
                    return None;
                }
                return Some((surrogate_pair(v, lo)?, j + 12));
            }
            return Some((char::from_u32(v)?, j + 6));
        }
        b => short_escape(b)?,
    };
    Some((c, j + 2))
}

#[cfg(test)]
mod tests {
    use super::super::TEST_LIMITS;
    use super::super::parse::{LONE_SURROGATE, duplicate_keys, parse, tricky_text};
    use super::super::scan::{ScanBuffers, scan_free_object};
    use super::super::{Json, Object};
    use super::*;

    fn normal(value: &str) -> Option<(usize, String, KeyFilter)> {
        normalize_free_object(value.as_bytes(), value, 0, 0, TEST_LIMITS)
    }

    /// The normal text of `value` is what writing its tree gives, and kept
    /// as text it reads as the tree does: whole, key by key (unread, after
    /// one lookup, once read) and written back.
    fn agrees_with_the_tree(value: &str) {
        let tree = parse(value.as_bytes(), TEST_LIMITS).unwrap();
        let (end, text, keys) = normal(value).unwrap_or_else(|| panic!("refused {value}"));
        assert_eq!(end, value.len(), "{value}");
        assert_eq!(text, tree.to_json_string(), "{value}");
        let repeats = duplicate_keys(text.as_bytes(), TEST_LIMITS, 10).unwrap();
        assert!(repeats.found.is_empty(), "{text}");
        let kept = Object::from_validated_text(&text, keys);
        // `{}` is kept as an empty map, which writes the same.
        assert!(kept.is_validated_text() || text == "{}");
        let kept = Json::Object(kept);
        assert_eq!(kept, tree, "{value}");
        assert_eq!(kept.to_json_string(), text);
        let object = tree.as_object().unwrap();
        let others = ["", "a", "k1", "missing", "\"", "a\\", "a\"", "\u{e9}"];
        for key in object.keys().chain(others) {
            assert!(
                !object.contains_key(key) || keys.may_contain(key),
                "{key:?}"
            );
            let want = object.get(key);
            let fresh = Object::from_validated_text(&text, keys);
            assert_eq!(fresh.get_str(key), want.and_then(Json::as_str), "{key:?}");
            assert_eq!(fresh.get_cloned(key).as_ref(), want, "{key:?} in {text}");
            assert_eq!(fresh.contains_key(key), want.is_some(), "{key:?}");
            let looked_up = Object::from_validated_text(&text, keys);
            let _ = looked_up.get(object.keys().next().unwrap_or(""));
            assert_eq!(looked_up.get(key), want, "{key:?} in {text}");
            assert_eq!(looked_up.get_str(key), want.and_then(Json::as_str));
            let read = Object::from_validated_text(&text, keys);
            assert_eq!(read.len(), object.len());
            assert_eq!(read.get(key), want, "{key:?}");
        }
        let keys_read: Vec<&str> = kept.as_object().unwrap().keys().collect();
        let keys_built: Vec<&str> = object.keys().collect();
        assert_eq!(keys_read, keys_built);
    }

    /// `{"k0":0,...}` of `n` distinct keys, then `tail` members.
    fn keys(n: usize, tail: &str) -> String {
        let members: Vec<String> = (0..n).map(|i| format!(r#""k{i}":{i}"#)).collect();
        let sep = if tail.is_empty() || n == 0 { "" } else { "," };
        format!("{{{}{sep}{tail}}}", members.join(","))
    }

    #[test]
    fn repeats_take_the_first_place_and_the_last_value() {
        for value in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"b":2,"a":3}"#,
            r#"{"b":0,"a":1,"c":2,"a":3,"d":4,"a":5}"#,
            r#"{"x":0,"a":1,"b":2,"b":3}"#,
            r#"{ "a" : [1, {"b": 2}] , "a" : {"c": "\u00e9\/"} , "z" : null }"#,
            r#"{"a":1,"b":2,"c":3,"a":4,"b":5,"c":6}"#,
            r#"{"a":{"b":1,"b":2},"c":[{"d":1,"d":[{"e":0,"e":1}]}],"a":{"b":3,"x":{"y":1,"y":2},"b":4}}"#,
            r#"{"a":{"b":1,"b":2},"a":0}"#,
            r#"{"a":0,"a":{"b":1,"b":2}}"#,
            r#"{"a":[],"a":{},"b":[[]],"b":"s"}"#,
            // What validation refuses, in a value a repeat discards.
            r#"{"a":NaN,"b":[Infinity,-Infinity,1e400],"a":1,"b":2}"#,
            r#"{"x":{"a":{"n":1e999},"a":0},"a":[1e400],"a":"ok"}"#,
            "{\"a\":\t1,\r\n\"a\" :\"x\\ty\"}",
        ] {
            agrees_with_the_tree(value);
        }
    }

    #[test]
    fn escaped_keys_are_written_as_the_writer_writes_them() {
        for value in [
            r#"{"\u0061":1}"#,
            r#"{"a\"b":1,"c":2}"#,
            r#"{"a\\":1,"a\"":2,"a":3}"#,
            r#"{"\u00e9t\u00e9":"\u00e9"}"#,
            r#"{"line\nbreak":1,"tab\t":2,"\u001f":3,"\b\f\r":4}"#,
            r#"{"\ud83d\ude00":1,"\/":2}"#,
            r#"{"a":1,"\u0061":2}"#,
            r#"{"\u0061":1,"a":2,"b":{"\u0062":3,"b":4}}"#,
            r#"{"\u0022":1,"\"":2,"\\\"":3}"#,
            "{\"\u{e9}\":1,\"\\u00e9\":2}",
            r#"{"é":1,"\u00E9":{"k\u0031":[1,2]}}"#,
        ] {
            agrees_with_the_tree(value);
        }
    }

    #[test]
    fn large_objects_with_repeats_and_escapes() {
        // Past 64 keys the scan moves its keys into a set: both sides.
        for n in [63, 64, 65, 130] {
            for repeat in [0, 63.min(n - 1), n - 1] {
                agrees_with_the_tree(&keys(n, &format!(r#""k{repeat}":"again""#)));
                agrees_with_the_tree(&keys(n, &format!(r#""k\u0030":[],"k{repeat}":"again""#)));
                let inner = keys(n, &format!(r#""k{repeat}":{{"k1":1,"\u006b1":2}}"#));
                agrees_with_the_tree(&format!(r#"{{"in":[{inner}],"k1":{inner},"in":{inner}}}"#));
            }
        }
    }

    #[test]
    fn what_the_parser_or_validation_refuses_is_left_to_the_tree() {
        for value in [
            r#"{"\ud800":1}"#,
            r#"{"\udc00":1,"a":1}"#,
            r#"{"\ud800\u0041":1}"#,
            r#"{"a":1,"a":"\ud800"}"#,
            r#"{"a":1,"a":NaN}"#,
            r#"{"a":1,"a":1e400}"#,
            r#"{"a":1,"a":[1,]}"#,
            r#"{"a":1,"a":2"#,
            r#"{"a":1,"a"}"#,
            r#"{"\x":1}"#,
            "{\"a\":1,\"a\tb\":2}",
        ] {
            assert!(normal(value).is_none(), "{value}");
        }
        // A lone surrogate in a key is the parser's error, as it was.
        let err = parse(br#"{"a":1,"\ud800":2}"#, TEST_LIMITS).unwrap_err();
        assert!(err.to_string().contains(LONE_SURROGATE), "{err}");
        // Too deep for a free-form value: validation's error.
        let deep = |n: usize| format!(r#"{{"a":1,"a":{}1{}}}"#, "[".repeat(n), "]".repeat(n));
        assert!(normal(&deep(254)).is_some());
        assert!(normal(&deep(255)).is_none());
        // Discarded by a repeat, it is no error, as in the reference.
        let shadowed = |n: usize| format!(r#"{{"a":{}1{},"a":1}}"#, "[".repeat(n), "]".repeat(n));
        agrees_with_the_tree(&shadowed(255));
        agrees_with_the_tree(&shadowed(1000));
        // Beyond the document's depth, the parser's error.
        assert!(normal(&shadowed(1497)).is_none());
        for kept_error in [
            r#"{"a":NaN}"#,
            r#"{"a":1,"b":[2,1e400],"a":2}"#,
            r#"{"a":-Infinity,"b":1}"#,
        ] {
            assert!(normal(kept_error).is_none(), "{kept_error}");
        }
    }

    #[test]
    fn a_key_repeated_a_million_times_costs_one_pair() {
        let value = format!("{{{}\"a\":1}}", r#""a":0,"#.repeat(1_000_000));
        let plan = plan(value.as_bytes(), &value, 0, 0, TEST_LIMITS).unwrap();
        assert_eq!(plan.last, vec![(1, (value.len() - 6) as u32)]);
        assert_eq!(plan.skip.len(), 1_000_000);
        let (_, text, _) = normal(&value).unwrap();
        assert_eq!(text, r#"{"a":1}"#);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Whatever the scan keeps, this keeps; whatever this keeps reads
        /// and writes as its tree.
        #[test]
        fn normal_text_agrees_with_the_tree(value in tricky_text()) {
            let mut sc = ScanBuffers::with_room();
            let scanned = scan_free_object(value.as_bytes(), 0, 0, TEST_LIMITS, &mut sc);
            let normal = normal(&value);
            if scanned.is_some() {
                proptest::prop_assert!(normal.is_some(), "{}", value);
            }
            if normal.is_some() {
                agrees_with_the_tree(&value);
            }
        }
    }
}
