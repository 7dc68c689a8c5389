//! The direct reader of [`AgentRequest::from_slice`]: the usual valid
//! request, read straight into typed values.
//!
//! The exact path (the parser following the request's `SHAPE`, then the
//! request's validator) builds a [`crate::Json`] tree of the
//! typed levels (key strings, maps, the input objects) and then takes it
//! apart field by field, collecting pydantic's exact error list. For a valid
//! request, the overwhelmingly common case on a server, all of that work is
//! thrown away. [`request`] reads the body straight into the typed values
//! instead and gives up (`None`) at the first thing it does not expect; the
//! caller then runs the exact path, which reports errors as before.
//!
//! # The contract
//!
//! `request(b)` returns `Some(x)` only when the exact path returns `Ok(y)`
//! with `x == y`, and with the same representation of every free-form object:
//! an [`Object`] is kept as validated text exactly when the exact path keeps
//! it as text, with the same text. So `from_slice` returns the same value,
//! serializes it the same way, and rejects the same documents with the same
//! errors as without this module. The tests below check this on every
//! request of the reference fixtures (and the public corpus when present),
//! on systematic mutations of each valid one, and on generated bodies.
//!
//! # What it accepts
//!
//! Exactly this shape, anything else is `None`:
//!
//! - valid UTF-8 without a byte-order mark, whitespace being the parser's
//!   (space, tab, CR, LF), nothing after the root object but whitespace;
//! - a root object with the keys `request_id` (a non-empty string) and
//!   `inputs` (an array of inputs), and no other key;
//! - each input an object with `id` (an integer lexeme that fits `i64`;
//!   `-0` is 0, as [`Number::as_i64`](crate::json::Number::as_i64) reads it) and
//!   `instruction` (an object with exactly `type`, `"user"` or `"env"`, and
//!   `content`, a string), and optionally `tools` (an array of free-form
//!   objects), `attributes`, `memory`, `extra_keys` (free-form objects) and
//!   `num_outputs` (an integer lexeme from 1 to `u64::MAX`), in any order;
//! - keys at these typed levels written without escapes and never repeated
//!   (the exact path would keep the last duplicate; here it is simply not
//!   the common case); no explicit `null` anywhere typed; input ids unique;
//! - every free-form object one that the free-form scan accepts at that
//!   position (valid, finite, unique unescaped keys, within the depth
//!   limits). It is called with the same `depth_before` the parser passes
//!   there, so it decides exactly as in the exact path, which keeps such an
//!   object as validated text; one it refuses is read otherwise there (as
//!   its normal text when its keys repeat or are escaped, as a tree when it
//!   holds an error), so it is refused here too. That includes `{}` (and `{ }`): the
//!   parser checks the free-form plan before the generic `{`, so an empty
//!   object there is the validated text `{}` too, not an empty map; a
//!   missing field is an empty map on both paths.
//!
//! It reads through [`Cursor`], the JSON layer's interface for direct
//! readers: strings are decoded by the parser's own code, numbers are
//! delimited by its lexer and read as `Number::as_i64` and `as_u64` read
//! them, free-form objects are checked by its scan, so the values are the same by construction. Like the
//! parser, the reader does not recurse (the typed levels have a fixed depth
//! and free-form objects are scanned with an explicit stack) and never
//! indexes past the end of the input.

use std::num::NonZeroU64;

use super::{
    AgentInput, AgentInstruction, AgentRequest, INPUT_FIELDS, INSTRUCTION_FIELDS, InstructionType,
    ROOT_FIELDS, ids_unique,
};
use crate::json::Cursor;
use crate::limits::READ;
use crate::validate::NonEmptyString;

/// The parser's stack depth at an input's `attributes`, `memory` and
/// `extra_keys`: the root object, the `inputs` array and the input object
/// are open.
const INPUT_FIELD_DEPTH: usize = 3;

/// The values of `instruction.type`, in the order of [`InstructionType`].
const INSTRUCTION_TYPES: &[&str] = &["user", "env"];

/// The common case of a valid request, read straight into typed values.
/// `None` whenever anything is unusual; the caller then takes the exact path.
pub(super) fn read(src: &[u8]) -> Option<AgentRequest> {
    let mut c = Cursor::new(src, READ)?;
    let request = request(&mut c).filter(|_| c.at_end())?;
    ids_unique(request.inputs()).then_some(request)
}

fn instruction(c: &mut Cursor<'_>) -> Option<AgentInstruction> {
    let (mut kind, mut content) = (None, None);
    c.object(INSTRUCTION_FIELDS, |c, i| {
        if i == 0 {
            kind = Some(match c.literal(INSTRUCTION_TYPES)? {
                0 => InstructionType::User,
                _ => InstructionType::Env,
            });
        } else {
            content = Some(c.string()?);
        }
        Some(())
    })?;
    Some(AgentInstruction {
        kind: kind?,
        content: content?,
    })
}

impl AgentInput {
    /// An input read directly, as [`read`] reads those of a request, for
    /// the other direct readers (the coaching request's); `field_depth` as
    /// in `input`.
    pub(crate) fn read_direct(c: &mut Cursor<'_>, field_depth: usize) -> Option<AgentInput> {
        input(c, field_depth)
    }
}

/// An input; `field_depth` is the parser's stack depth at its free-form
/// fields (the input object included), so that they are scanned exactly as
/// the parser would scan them there.
fn input(c: &mut Cursor<'_>, field_depth: usize) -> Option<AgentInput> {
    let mut id = None;
    let mut instruction_ = None;
    let mut tools = Vec::new();
    let mut attributes = None;
    let mut memory = None;
    let mut num_outputs = NonZeroU64::MIN;
    let mut extra_keys = None;
    c.object(INPUT_FIELDS, |c, i| {
        match i {
            0 => id = Some(c.integer()?.parse::<i64>().ok()?),
            1 => instruction_ = Some(instruction(c)?),
            2 => c.array(|c| {
                // An element of `tools`: one more open container, the array.
                let tool = c.free_object(field_depth + 1)?;
                if tools.capacity() == 0 {
                    // Room for a usual skill list without regrowing.
                    tools = Vec::with_capacity(4);
                }
                tools.push(tool);
                Some(())
            })?,
            3 => attributes = Some(c.free_object(field_depth)?),
            4 => memory = Some(c.free_object(field_depth)?),
            5 => {
                // `-0` and negative values are `greater_than` errors.
                let lexeme = c.integer()?;
                if lexeme.starts_with('-') {
                    return None;
                }
                num_outputs = NonZeroU64::new(lexeme.parse::<u64>().ok()?)?;
            }
            _ => extra_keys = Some(c.free_object(field_depth)?),
        }
        Some(())
    })?;
    Some(AgentInput {
        id: id?,
        instruction: instruction_?,
        tools,
        attributes: attributes.unwrap_or_default(),
        memory: memory.unwrap_or_default(),
        num_outputs,
        extra_keys: extra_keys.unwrap_or_default(),
    })
}

fn request(c: &mut Cursor<'_>) -> Option<AgentRequest> {
    let mut request_id = None;
    let mut inputs = None;
    c.object(ROOT_FIELDS, |c, i| {
        if i == 0 {
            request_id = Some(NonEmptyString::from_text(c.string_cow()?)?);
        } else {
            // Room for the inputs the rest of the body can hold at about
            // half a kilobyte each (BENCH's hold more), at most a few: a
            // list grown from nothing is copied at each doubling.
            let mut list = Vec::with_capacity((c.remaining() / 512).clamp(1, 16));
            c.array(|c| {
                list.push(input(c, INPUT_FIELD_DEPTH)?);
                Some(())
            })?;
            inputs = Some(list);
        }
        Some(())
    })?;
    Some(AgentRequest::from_parts_unchecked(request_id?, inputs?))
}

#[cfg(test)]
#[allow(clippy::print_stderr)] // the tests report what they counted
mod tests {
    use std::cell::RefCell;
    use std::path::Path;

    use super::*;
    use crate::json::{Json, Object};

    use magma_testkit::fixtures::{TINY_BODY, bench_like_request, http_body, public_corpus};
    include!("../../../tests/support/corpus_docs.rs");

    /// The exact path, as `from_slice` runs it when this reader says `None`.
    fn exact(b: &[u8]) -> Result<AgentRequest, crate::Error> {
        crate::json::parse_shaped(b, &super::super::SHAPE, READ)
            .map_err(crate::Error::from)
            .and_then(AgentRequest::from_json)
    }

    /// The representation of every free-form object, in order: `Some(text)`
    /// for validated text, `None` for a tree.
    fn representations(r: &AgentRequest) -> Vec<Option<String>> {
        free_objects(r)
            .map(|o| o.raw_text().map(str::to_owned))
            .collect()
    }

    /// Every free-form object of `r`, in order.
    fn free_objects(r: &AgentRequest) -> impl Iterator<Item = &Object> {
        r.inputs().iter().flat_map(|i| {
            i.tools
                .iter()
                .chain([&i.attributes, &i.memory, &i.extra_keys])
        })
    }

    #[derive(Default, Debug, Clone, Copy)]
    struct Tally {
        cases: usize,
        exact_ok: usize,
        fast: usize,
    }

    /// Checks the contract on one body and counts the outcome. Returns
    /// whether the direct reader answered.
    fn check(body: &[u8], tally: &mut Tally) -> Result<bool, String> {
        let fast = read(body);
        let exact = exact(body);
        tally.cases += 1;
        tally.exact_ok += usize::from(exact.is_ok());
        let Some(f) = fast else { return Ok(false) };
        tally.fast += 1;
        let shown = || {
            String::from_utf8_lossy(body)
                .chars()
                .take(2000)
                .collect::<String>()
        };
        let e = exact.map_err(|err| {
            format!(
                "the direct reader accepts what the exact path refuses ({err}):\n{}",
                shown()
            )
        })?;
        if f != e {
            return Err(format!("values differ: {f:?} vs {e:?}\n{}", shown()));
        }
        if representations(&f) != representations(&e) {
            return Err(format!(
                "representations differ: {:?} vs {:?}\n{}",
                representations(&f),
                representations(&e),
                shown()
            ));
        }
        if f.to_json_string() != e.to_json_string() {
            return Err(format!("serializations differ\n{}", shown()));
        }
        Ok(true)
    }

    fn fixture_docs() -> Vec<(String, String)> {
        let docs = fixture_docs_of("request");
        assert!(docs.len() > 1000, "{} request fixtures", docs.len());
        docs
    }

    /// `true` if a key of the (valid JSON) document has an escape.
    fn has_escaped_key(doc: &str) -> bool {
        let b = doc.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'"' {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            let mut escaped = false;
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    escaped = true;
                    j += 1;
                }
                j += 1;
            }
            i = j + 1;
            let after = doc
                .get(i..)
                .unwrap_or_default()
                .trim_start_matches([' ', '\t', '\n', '\r']);
            if escaped && after.starts_with(':') {
                return true;
            }
        }
        false
    }

    #[test]
    fn the_direct_reader_agrees_with_the_exact_path_on_the_corpora() {
        let mut corpora = vec![("fixtures", fixture_docs())];
        if let Some(p) = public_corpus(env!("CARGO_MANIFEST_DIR")) {
            corpora.push(("public corpus", corpus_docs(&p, "request")));
        }
        let mut failures = Vec::new();
        for (name, docs) in corpora {
            let mut tally = Tally::default();
            let mut slow_valid = Vec::new();
            for (id, doc) in &docs {
                match check(doc.as_bytes(), &mut tally) {
                    Ok(false) if exact(doc.as_bytes()).is_ok() => {
                        slow_valid.push(id.as_str());
                        // Only repeated or escaped keys send a valid
                        // request to the exact path.
                        let repeated =
                            crate::duplicate_keys(doc.as_bytes()).is_ok_and(|d| !d.is_empty());
                        if !repeated && !has_escaped_key(doc) {
                            failures.push(format!("{name} {id}: valid, usual, not fast"));
                        }
                    }
                    Ok(_) => {}
                    Err(e) => failures.push(format!("{name} {id}: {e}")),
                }
            }
            eprintln!(
                "{name}: {} request documents, {} valid, {} of them on the direct reader; \
                 valid ones on the exact path: {slow_valid:?}",
                tally.cases, tally.exact_ok, tally.fast
            );
            assert!(
                tally.fast * 10 >= tally.exact_ok * 8,
                "{name}: only {} of {} valid requests take the direct reader",
                tally.fast,
                tally.exact_ok
            );
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }

    /// A request body as editable members. Keys are raw JSON text, so they
    /// can be escaped, unknown or repeated; values are raw JSON text too.
    #[derive(Clone)]
    struct Body {
        before: String,
        /// Root members; `None` as a value stands for the `inputs` array.
        root: Vec<(String, Option<String>)>,
        inputs: Vec<Vec<(String, String)>>,
        after: String,
        /// Whitespace written between all tokens of the typed levels.
        ws: String,
    }

    fn quoted(s: &str) -> String {
        serde_json::to_string(s).expect("a string serializes")
    }

    fn object_text(o: &Object) -> String {
        Json::Object(o.clone()).to_json_string()
    }

    impl Body {
        fn of(r: &AgentRequest) -> Body {
            let inputs = r
                .inputs()
                .iter()
                .map(|i| {
                    let tools: Vec<String> = i.tools.iter().map(object_text).collect();
                    vec![
                        ("\"id\"".to_owned(), i.id.to_string()),
                        (
                            "\"instruction\"".to_owned(),
                            format!(
                                "{{\"type\":{},\"content\":{}}}",
                                quoted(i.instruction.kind.as_str()),
                                quoted(&i.instruction.content)
                            ),
                        ),
                        ("\"tools\"".to_owned(), format!("[{}]", tools.join(","))),
                        ("\"attributes\"".to_owned(), object_text(&i.attributes)),
                        ("\"memory\"".to_owned(), object_text(&i.memory)),
                        ("\"num_outputs\"".to_owned(), i.num_outputs.to_string()),
                        ("\"extra_keys\"".to_owned(), object_text(&i.extra_keys)),
                    ]
                })
                .collect();
            Body {
                before: String::new(),
                root: vec![
                    ("\"request_id\"".to_owned(), Some(quoted(r.request_id()))),
                    ("\"inputs\"".to_owned(), None),
                ],
                inputs,
                after: String::new(),
                ws: String::new(),
            }
        }

        fn render(&self) -> String {
            let w = &self.ws;
            let members = |m: &mut dyn Iterator<Item = (&str, String)>| {
                let parts: Vec<String> = m.map(|(k, v)| format!("{w}{k}{w}:{w}{v}{w}")).collect();
                format!("{{{}}}", parts.join(","))
            };
            let inputs: Vec<String> = self
                .inputs
                .iter()
                .map(|i| members(&mut i.iter().map(|(k, v)| (k.as_str(), v.clone()))))
                .collect();
            let inputs = format!("[{w}{}{w}]", inputs.join(&format!("{w},{w}")));
            let root = members(
                &mut self
                    .root
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.clone().unwrap_or_else(|| inputs.clone()))),
            );
            format!("{}{root}{}", self.before, self.after)
        }

        /// Sets (or adds) member `key` of input `i`.
        fn set(&mut self, i: usize, key: &str, value: &str) {
            let key = format!("\"{key}\"");
            let members = &mut self.inputs[i];
            match members.iter_mut().find(|(k, _)| *k == key) {
                Some(m) => m.1 = value.to_owned(),
                None => members.push((key, value.to_owned())),
            }
        }

        fn get(&self, i: usize, key: &str) -> String {
            let key = format!("\"{key}\"");
            self.inputs[i]
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        }

        fn with(&self, f: impl FnOnce(&mut Body)) -> Body {
            let mut b = self.clone();
            f(&mut b);
            b
        }
    }

    /// What the direct reader must do with a mutation when the exact path
    /// accepts it.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Expect {
        /// Take the direct reader.
        Fast,
        /// Leave it to the exact path (what it does is unusual).
        Exact,
        /// Either (only the contract is checked).
        Any,
    }

    fn nested(n: usize) -> String {
        format!("{{\"a\":{}{}}}", "[".repeat(n), "]".repeat(n))
    }

    /// Mutations of one valid body: name, expectation, body text.
    fn mutations(b: &Body) -> Vec<(&'static str, Expect, String)> {
        use Expect::{Any, Exact, Fast};
        let n = b.inputs.len();
        let first = |f: &dyn Fn(&mut Body)| {
            if n == 0 {
                b.with(|b| {
                    b.inputs.push(vec![
                        ("\"id\"".into(), "7".into()),
                        (
                            "\"instruction\"".into(),
                            r#"{"type":"user","content":""}"#.into(),
                        ),
                    ]);
                    f(b);
                })
            } else {
                b.with(f)
            }
        };
        let id0 = if n == 0 {
            "7".to_owned()
        } else {
            b.get(0, "id")
        };
        let mut out: Vec<(&'static str, Expect, Body)> = vec![
            ("as is", Fast, b.clone()),
            (
                "whitespace everywhere",
                Fast,
                b.with(|b| b.ws = " \n\t\r ".into()),
            ),
            (
                "whitespace around",
                Fast,
                b.with(|b| (b.before, b.after) = (" \r\n\t".into(), "\n ".into())),
            ),
            (
                "byte order mark",
                Any,
                b.with(|b| b.before = "\u{feff}".into()),
            ),
            ("trailing garbage", Any, b.with(|b| b.after = " x".into())),
            ("trailing object", Any, b.with(|b| b.after = "{}".into())),
            ("trailing comma", Any, b.with(|b| b.after = ",".into())),
            ("root keys reversed", Fast, b.with(|b| b.root.reverse())),
            (
                "duplicate request_id",
                Exact,
                b.with(|b| {
                    b.root
                        .insert(0, ("\"request_id\"".into(), Some("\"shadowed\"".into())))
                }),
            ),
            (
                "duplicate inputs",
                Exact,
                b.with(|b| b.root.insert(0, ("\"inputs\"".into(), Some("null".into())))),
            ),
            (
                "unknown root key",
                Any,
                b.with(|b| b.root.push(("\"extra\"".into(), Some("1".into())))),
            ),
            (
                "escaped root key",
                Exact,
                b.with(|b| b.root[0].0 = "\"request_\\u0069d\"".into()),
            ),
            (
                "request_id empty",
                Any,
                b.with(|b| b.root[0].1 = Some("\"\"".into())),
            ),
            (
                "request_id null",
                Any,
                b.with(|b| b.root[0].1 = Some("null".into())),
            ),
            (
                "request_id escapes",
                Fast,
                b.with(|b| b.root[0].1 = Some(r#""\u00e9\ud83d\ude00\n\"\\\/""#.into())),
            ),
            (
                "request_id lone surrogate",
                Any,
                b.with(|b| b.root[0].1 = Some(r#""a\ud800""#.into())),
            ),
            (
                "request_id raw tab",
                Any,
                b.with(|b| b.root[0].1 = Some("\"a\tb\"".into())),
            ),
            (
                "inputs null",
                Any,
                b.with(|b| b.root[1].1 = Some("null".into())),
            ),
            ("inputs empty", Fast, b.with(|b| b.inputs.clear())),
            (
                "inputs object",
                Any,
                b.with(|b| b.root[1].1 = Some("{}".into())),
            ),
            (
                "input keys reversed",
                Fast,
                first(&|b| b.inputs[0].reverse()),
            ),
            (
                "only required keys",
                Fast,
                first(&|b| b.inputs[0].truncate(2)),
            ),
            (
                "id missing",
                Any,
                first(&|b| {
                    b.inputs[0].remove(0);
                }),
            ),
            (
                "duplicate id key",
                Exact,
                first(&|b| b.inputs[0].push(("\"id\"".into(), "12345".into()))),
            ),
            (
                "duplicate memory key",
                Exact,
                first(&|b| {
                    b.set(0, "memory", "{}");
                    b.inputs[0].insert(0, ("\"memory\"".into(), "{\"m\":1}".into()));
                }),
            ),
            (
                "escaped id key",
                Exact,
                first(&|b| b.inputs[0][0].0 = "\"\\u0069d\"".into()),
            ),
            (
                "unknown input key",
                Any,
                first(&|b| b.set(0, "unknown", "{}")),
            ),
            ("id NaN", Any, first(&|b| b.set(0, "id", "NaN"))),
            ("id -Infinity", Any, first(&|b| b.set(0, "id", "-Infinity"))),
            (
                "id 1.0",
                Any,
                first(&|b| b.set(0, "id", &format!("{id0}.0"))),
            ),
            ("id 1e0", Any, first(&|b| b.set(0, "id", "1e0"))),
            ("id 01", Any, first(&|b| b.set(0, "id", "01"))),
            ("id 1.", Any, first(&|b| b.set(0, "id", "1."))),
            ("id -0", Any, first(&|b| b.set(0, "id", "-0"))),
            (
                "id i64::MIN",
                Any,
                first(&|b| b.set(0, "id", "-9223372036854775808")),
            ),
            (
                "id i64::MAX + 1",
                Any,
                first(&|b| b.set(0, "id", "9223372036854775808")),
            ),
            ("id string", Any, first(&|b| b.set(0, "id", "\"1\""))),
            ("id null", Any, first(&|b| b.set(0, "id", "null"))),
            ("id true", Any, first(&|b| b.set(0, "id", "true"))),
            (
                "num_outputs 0",
                Any,
                first(&|b| b.set(0, "num_outputs", "0")),
            ),
            (
                "num_outputs -0",
                Any,
                first(&|b| b.set(0, "num_outputs", "-0")),
            ),
            (
                "num_outputs -1",
                Any,
                first(&|b| b.set(0, "num_outputs", "-1")),
            ),
            (
                "num_outputs 3",
                Fast,
                first(&|b| b.set(0, "num_outputs", "3")),
            ),
            (
                "num_outputs u64::MAX",
                Fast,
                first(&|b| b.set(0, "num_outputs", "18446744073709551615")),
            ),
            (
                "num_outputs u64::MAX + 1",
                Any,
                first(&|b| b.set(0, "num_outputs", "18446744073709551616")),
            ),
            (
                "num_outputs 1.0",
                Any,
                first(&|b| b.set(0, "num_outputs", "1.0")),
            ),
            (
                "num_outputs null",
                Any,
                first(&|b| b.set(0, "num_outputs", "null")),
            ),
            (
                "instruction null",
                Any,
                first(&|b| b.set(0, "instruction", "null")),
            ),
            (
                "instruction escaped type",
                Fast,
                first(&|b| b.set(0, "instruction", r#"{"content":"c","type":"\u0075ser"}"#)),
            ),
            (
                "instruction env",
                Fast,
                first(&|b| {
                    b.set(
                        0,
                        "instruction",
                        r#"{ "type" : "env" , "content" : "{\"infos\": \"ok\"}" }"#,
                    )
                }),
            ),
            (
                "instruction bad type",
                Any,
                first(&|b| b.set(0, "instruction", r#"{"type":"USER","content":"c"}"#)),
            ),
            (
                "instruction extra key",
                Any,
                first(&|b| b.set(0, "instruction", r#"{"type":"user","content":"c","x":1}"#)),
            ),
            (
                "instruction duplicate key",
                Exact,
                first(&|b| {
                    b.set(
                        0,
                        "instruction",
                        r#"{"type":"env","type":"user","content":"c"}"#,
                    )
                }),
            ),
            (
                "instruction content null",
                Any,
                first(&|b| b.set(0, "instruction", r#"{"type":"user","content":null}"#)),
            ),
            (
                "instruction lone surrogate",
                Any,
                first(&|b| b.set(0, "instruction", r#"{"type":"user","content":"\udc00"}"#)),
            ),
            ("tools null", Any, first(&|b| b.set(0, "tools", "null"))),
            ("tools empty", Fast, first(&|b| b.set(0, "tools", " [ ] "))),
            (
                "tools empty objects",
                Fast,
                first(&|b| b.set(0, "tools", "[{},{ \n}]")),
            ),
            (
                "tools scalar element",
                Any,
                first(&|b| b.set(0, "tools", "[{},1]")),
            ),
            (
                "tools trailing comma",
                Any,
                first(&|b| b.set(0, "tools", "[{},]")),
            ),
            ("memory null", Any, first(&|b| b.set(0, "memory", "null"))),
            ("memory array", Any, first(&|b| b.set(0, "memory", "[]"))),
            ("memory empty", Fast, first(&|b| b.set(0, "memory", "{ }"))),
            (
                "memory NaN",
                Any,
                first(&|b| b.set(0, "memory", r#"{"x":NaN}"#)),
            ),
            (
                "memory 1e400",
                Any,
                first(&|b| b.set(0, "memory", r#"{"x":[1e400]}"#)),
            ),
            (
                "memory duplicate key",
                Exact,
                first(&|b| b.set(0, "memory", r#"{"a":1,"a":2}"#)),
            ),
            (
                "memory escaped key",
                Exact,
                first(&|b| b.set(0, "memory", r#"{"\u0061":1}"#)),
            ),
            (
                "attributes null",
                Any,
                first(&|b| b.set(0, "attributes", "null")),
            ),
            (
                "extra_keys string",
                Any,
                first(&|b| b.set(0, "extra_keys", "\"{}\"")),
            ),
        ];
        for depth in [252, 253, 254, 255, 256, 1493, 1494, 1495, 1496, 1497] {
            out.push((
                "deep memory",
                Any,
                first(&|b| b.set(0, "memory", &nested(depth))),
            ));
            out.push((
                "deep tool",
                Any,
                first(&|b| b.set(0, "tools", &format!("[{}]", nested(depth)))),
            ));
        }
        out.push((
            "duplicate ids",
            Any,
            first(&|b| {
                let again = b.inputs[0].clone();
                b.inputs.push(again);
            }),
        ));
        out.push((
            "ids 0 and -0",
            Any,
            first(&|b| {
                b.set(0, "id", "0");
                let mut again = b.inputs[0].clone();
                again[0].1 = "-0".into();
                b.inputs.push(again);
            }),
        ));
        if n >= 2 {
            out.push((
                "last id repeats the first",
                Any,
                b.with(|b| b.inputs[n - 1][0].1 = b.inputs[0][0].1.clone()),
            ));
        }
        out.push((
            "many inputs, unique ids",
            Fast,
            first(&|b| {
                let template = b.inputs[0].clone();
                b.inputs = (0..40)
                    .map(|i| {
                        let mut m = template.clone();
                        m[0].1 = (i * 3 - 50).to_string();
                        m
                    })
                    .collect();
            }),
        ));
        out.push((
            "many inputs, one repeated id",
            Any,
            first(&|b| {
                let template = b.inputs[0].clone();
                b.inputs = (0..40)
                    .map(|i| {
                        let mut m = template.clone();
                        m[0].1 = (i % 39).to_string();
                        m
                    })
                    .collect();
            }),
        ));
        out.into_iter()
            .map(|(name, e, b)| (name, e, b.render()))
            .collect()
    }

    #[test]
    fn mutations_of_valid_requests_keep_the_contract() {
        let mut tallies: std::collections::BTreeMap<&str, Tally> = Default::default();
        let mut failures = Vec::new();
        let mut valid = 0;
        let mut not_fast_as_rendered = Vec::new();
        for (id, doc) in fixture_docs() {
            let Ok(r) = exact(doc.as_bytes()) else {
                continue;
            };
            valid += 1;
            let body = Body::of(&r);
            // A tree-kept free-form object may still print as text the scan
            // refuses (an escaped key such as `"\u0000"`); then no mutation
            // of this body can be expected to take the direct reader.
            let base_fast = read(body.render().as_bytes()).is_some();
            if !base_fast {
                not_fast_as_rendered.push(id.clone());
            }
            for (name, expect, text) in mutations(&body) {
                let expect = match expect {
                    Expect::Fast if !base_fast => Expect::Any,
                    e => e,
                };
                let tally = tallies.entry(name).or_default();
                let exact_ok = exact(text.as_bytes()).is_ok();
                match check(text.as_bytes(), tally) {
                    Err(e) => failures.push(format!("{id} / {name}: {e}")),
                    Ok(fast) if exact_ok => {
                        let want = match expect {
                            Expect::Fast => Some(true),
                            Expect::Exact => Some(false),
                            Expect::Any => None,
                        };
                        if want.is_some_and(|w| w != fast) {
                            failures.push(format!(
                                "{id} / {name}: expected {expect:?}, direct reader answered: {fast}"
                            ));
                        }
                    }
                    Ok(_) => {}
                }
            }
        }
        let mut total = Tally::default();
        for (name, t) in &tallies {
            eprintln!(
                "{name:32} {:5} bodies, {:5} valid, {:5} fast",
                t.cases, t.exact_ok, t.fast
            );
            total.cases += t.cases;
            total.exact_ok += t.exact_ok;
            total.fast += t.fast;
        }
        eprintln!(
            "mutations of {valid} valid fixtures: {} bodies, {} valid, {} on the direct reader; \
             fixtures whose re-rendered body is not on the direct reader: {not_fast_as_rendered:?}",
            total.cases, total.exact_ok, total.fast
        );
        assert!(valid > 500, "{valid} valid request fixtures");
        assert!(not_fast_as_rendered.len() <= 5, "{not_fast_as_rendered:?}");
        assert!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures.join("\n\n")
        );
    }

    #[test]
    fn the_benchmark_bodies_take_the_direct_reader() {
        let mut bodies: Vec<(String, String)> = [1, 3, 52]
            .into_iter()
            .map(|n| (format!("bench_like_request({n})"), bench_like_request(n)))
            .collect();
        bodies.extend([1, 8, 64].map(|n| (format!("http_body({n})"), http_body(n))));
        bodies.push(("TINY_BODY".into(), TINY_BODY.into()));
        for (name, body) in &bodies {
            let mut tally = Tally::default();
            assert_eq!(check(body.as_bytes(), &mut tally), Ok(true), "{name}");
            let r = read(body.as_bytes()).unwrap();
            // Every free-form object in the body stays text, except `{}`,
            // which is an empty map on both paths (the tiny body has no
            // objects: its defaults are empty maps too).
            let kept = representations(&r).iter().filter(|t| t.is_some()).count();
            let empty = free_objects(&r).filter(|o| o.is_empty()).count();
            let objects = if body == TINY_BODY {
                0
            } else {
                representations(&r).len() - empty
            };
            assert_eq!(kept, objects, "{name}");
            if body != TINY_BODY && name.starts_with("http_body") {
                assert!(empty > 0, "{name}: its `extra_keys` are `{{}}`");
            }
        }
        assert_eq!(
            http_body(8).len(),
            6676,
            "docs/performance.md quotes this size"
        );
    }

    /// Free-form object text, mostly clean and varied; sometimes built from
    /// tricky tokens (as in `parse.rs`): duplicate and escaped keys,
    /// non-finite numbers, surrogates, control characters, deep nesting.
    fn free_object() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let clean = prop_oneof![
            Just("1".to_owned()),
            Just("\"s\"".to_owned()),
            Just("null".to_owned()),
            Just("false".to_owned()),
            Just("-0".to_owned()),
            Just("123456789012345678901234567890".to_owned()),
            Just("1.5E-3".to_owned()),
            Just("-0.0".to_owned()),
            Just(r#""\ud83d\ude00 \u00e9""#.to_owned()),
            Just("\"ok \\n \\\" \\\\\"".to_owned()),
            Just("[]".to_owned()),
            Just("{ }".to_owned()),
            Just(format!("{}{}", "[".repeat(250), "]".repeat(250))),
        ]
        .boxed();
        let tricky = prop_oneof![
            Just("NaN".to_owned()),
            Just("-Infinity".to_owned()),
            Just("1e400".to_owned()),
            Just("01".to_owned()),
            Just(r#""\ud800""#.to_owned()),
            Just("\"tab\there\"".to_owned()),
            Just(format!("{}{}", "[".repeat(253), "]".repeat(253))),
            Just(format!("{}1{}", "[".repeat(254), "]".repeat(254))),
            Just("[1,]".to_owned()),
        ];
        let any_leaf = prop_oneof![4 => clean.clone(), 1 => tricky].boxed();
        fn tree(
            leaf: BoxedStrategy<String>,
            keys: BoxedStrategy<&'static str>,
        ) -> BoxedStrategy<String> {
            leaf.prop_recursive(3, 24, 4, move |inner| {
                let keys = keys.clone();
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..4)
                        .prop_map(|v| format!("[{}]", v.join(","))),
                    proptest::collection::vec((keys, inner), 0..4).prop_map(|kv| {
                        let body: Vec<String> =
                            kv.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
                        format!("{{{}}}", body.join(" ,\n"))
                    }),
                ]
            })
            .boxed()
        }
        let distinct = |n: usize| {
            proptest::sample::subsequence(vec![r#""a""#, r#""b""#, r#""c""#, r#""d e""#], 0..=n)
        };
        let tricky_keys = prop_oneof![
            Just(r#""a""#),
            Just(r#""a""#),
            Just(r#""\u0061""#),
            Just(r#""\u0000""#),
        ]
        .boxed();
        // Clean: distinct keys at every level (a subsequence of the names).
        let clean_tree = clean.prop_recursive(3, 24, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                (distinct(3), proptest::collection::vec(inner, 4)).prop_map(|(keys, values)| {
                    let body: Vec<String> = keys
                        .iter()
                        .zip(values)
                        .map(|(k, v)| format!("{k}:{v}"))
                        .collect();
                    format!("{{ {} }}", body.join(", "))
                }),
            ]
        });
        let object = |keys: BoxedStrategy<Vec<&'static str>>, values: BoxedStrategy<String>| {
            (keys, proptest::collection::vec(values, 3)).prop_map(|(keys, values)| {
                let body: Vec<String> = keys
                    .iter()
                    .zip(values)
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect();
                format!("{{{}}}", body.join(","))
            })
        };
        let top_keys =
            || proptest::sample::subsequence(vec![r#""k""#, r#""l""#, r#""m""#], 0..=3).boxed();
        prop_oneof![
            16 => object(top_keys(), clean_tree.boxed()),
            2 => object(top_keys(), tree(any_leaf.clone(), tricky_keys)),
            1 => object(Just(vec![r#""k""#, r#""k""#]).boxed(), any_leaf.clone()),
            1 => any_leaf,
        ]
    }

    /// A request body with tricky tokens in every position, mostly valid.
    fn request_body() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        fn pick(
            valid: &'static [&'static str],
            tricky: &'static [&'static str],
        ) -> BoxedStrategy<String> {
            let v = proptest::sample::select(valid).prop_map(str::to_owned);
            let t = proptest::sample::select(tricky).prop_map(str::to_owned);
            prop_oneof![20 => v, 1 => t].boxed()
        }
        fn key(name: &'static str) -> BoxedStrategy<String> {
            prop_oneof![
                60 => Just(format!("\"{name}\"")),
                1 => Just(format!("\"\\u{:04x}{}\"", u32::from(name.as_bytes()[0]), &name[1..])),
                1 => Just(format!("\"{name} \"")),
            ]
            .boxed()
        }
        let ws = proptest::sample::select(&["", "", " ", "\n\t", " \r\n "][..]);
        let id = pick(
            &[
                "0",
                "1",
                "2",
                "3",
                "-0",
                "-7",
                "9223372036854775807",
                "-9223372036854775808",
            ],
            &[
                "9223372036854775808",
                "1.0",
                "1e2",
                "01",
                "1.",
                "NaN",
                "-Infinity",
                "null",
                "\"1\"",
                "true",
                "-",
            ],
        );
        let num_outputs = pick(
            &["1", "2", "18446744073709551615"],
            &[
                "0",
                "-0",
                "-1",
                "18446744073709551616",
                "1.5",
                "null",
                "1E0",
            ],
        );
        let kind = pick(
            &["\"user\"", "\"env\"", "\"\\u0075ser\"", "\"e\\u006ev\""],
            &["\"USER\"", "null", "\"user \"", "\"\\ud800\""],
        );
        let content = pick(
            &[
                "\"\"",
                "\"hi\"",
                "\"\\ud83d\\ude00 \\u00e9\"",
                "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
                "\"{\\\"infos\\\": \\\"ok\\\"}\"",
            ],
            &[
                "\"\\ud800\"",
                "\"\\udc00x\"",
                "\"raw\ttab\"",
                "1",
                "null",
                "\"\\x\"",
                "\"unterminated",
            ],
        );
        let instruction = (
            key("type"),
            kind,
            key("content"),
            content,
            any::<bool>(),
            0u8..20,
        )
            .prop_map(|(kt, k, kc, c, swap, extra)| {
                let mut m = vec![format!("{kt}:{k}"), format!("{kc}:{c}")];
                if swap {
                    m.reverse();
                }
                match extra {
                    0 => m.push("\"x\":1".into()),
                    1 => m.push(format!("{kt}:{k}")),
                    2 => m.truncate(1),
                    _ => {}
                }
                format!("{{{}}}", m.join(","))
            });
        let tools = prop_oneof![
            3 => proptest::collection::vec(free_object(), 0..3).prop_map(|v| format!("[{}]", v.join(" , "))),
            1 => Just("[]".to_owned()),
            1 => Just("null".to_owned()),
            1 => Just("[1]".to_owned()),
        ];
        let opt = |s: BoxedStrategy<String>| proptest::option::weighted(0.6, s);
        let input = (
            (key("id"), id),
            (key("instruction"), instruction),
            opt((key("tools"), tools)
                .prop_map(|(k, v)| format!("{k}:{v}"))
                .boxed()),
            opt((key("attributes"), free_object())
                .prop_map(|(k, v)| format!("{k}:{v}"))
                .boxed()),
            opt((key("memory"), free_object())
                .prop_map(|(k, v)| format!("{k}:{v}"))
                .boxed()),
            opt((key("num_outputs"), num_outputs)
                .prop_map(|(k, v)| format!("{k}:{v}"))
                .boxed()),
            opt((key("extra_keys"), free_object())
                .prop_map(|(k, v)| format!("{k}:{v}"))
                .boxed()),
            0u8..60,
        )
            .prop_flat_map(|((ki, i), (kn, n), t, a, m, o, e, extra)| {
                let mut members = vec![format!("{ki}:{i}"), format!("{kn}:{n}")];
                members.extend([t, a, m, o, e].into_iter().flatten());
                match extra {
                    0 => members.push("\"unknown\":1".into()),
                    1 => members.push(members[0].clone()),
                    2 => {
                        members.remove(0);
                    }
                    3 => members.push("\"memory\":{}".into()),
                    _ => {}
                }
                Just(members).prop_shuffle()
            });
        let request_id = pick(
            &["\"r\"", "\" \"", "\"\\u00e9\\t\""],
            &["\"\"", "null", "\"\\ud800\"", "1"],
        );
        let trailer = pick(&["", " ", "\n\r\t "], &["x", "{}", ",", "\u{0}"]);
        (
            ws,
            (key("request_id"), request_id),
            key("inputs"),
            proptest::collection::vec(input, 0..4),
            trailer,
            any::<bool>(),
            0u8..30,
        )
            .prop_map(|(w, (kr, r), ki, inputs, trailer, swap, extra)| {
                let inputs: Vec<String> = inputs
                    .into_iter()
                    .map(|m| format!("{{{w}{}{w}}}", m.join(&format!("{w},{w}"))))
                    .collect();
                let mut root = vec![
                    format!("{kr}{w}:{w}{r}"),
                    format!("{ki}{w}:{w}[{w}{}{w}]", inputs.join(",")),
                ];
                if swap {
                    root.reverse();
                }
                match extra {
                    0 => root.push("\"extra\":null".into()),
                    1 => root.push(root[0].clone()),
                    2 => {
                        root.pop();
                    }
                    _ => {}
                }
                format!("{w}{{{w}{}{w}}}{trailer}", root.join(&format!("{w},{w}")))
            })
    }

    #[test]
    fn generated_bodies_keep_the_contract() {
        use proptest::test_runner::{Config, TestRng, TestRunner};
        let config = Config {
            cases: 4000,
            failure_persistence: None,
            ..Config::default()
        };
        let rng = TestRng::deterministic_rng(config.rng_algorithm);
        let mut runner = TestRunner::new_with_rng(config, rng);
        let tally = RefCell::new(Tally::default());
        // Bodies refused only for repeated input ids, and valid bodies with
        // several inputs on the direct reader: both must occur.
        let repeated_ids = RefCell::new(0usize);
        let several_fast = RefCell::new(0usize);
        let result = runner.run(&request_body(), |body| {
            let fast = check(body.as_bytes(), &mut tally.borrow_mut())
                .map_err(proptest::test_runner::TestCaseError::fail)?;
            match exact(body.as_bytes()) {
                Ok(r) if fast && r.inputs().len() >= 2 => *several_fast.borrow_mut() += 1,
                Err(e)
                    if e.issues()
                        .iter()
                        .all(|i| i.to_string().contains("Input ids must be unique")) =>
                {
                    *repeated_ids.borrow_mut() += 1;
                }
                _ => {}
            }
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
        let t = tally.into_inner();
        let (repeated_ids, several_fast) = (repeated_ids.into_inner(), several_fast.into_inner());
        eprintln!(
            "generated bodies: {} checked, {} valid, {} on the direct reader ({several_fast} of them \
             with several inputs); {repeated_ids} refused only for repeated input ids",
            t.cases, t.exact_ok, t.fast
        );
        assert!(t.exact_ok * 4 >= t.cases, "too few valid bodies: {t:?}");
        assert!(
            t.fast * 10 >= t.exact_ok * 7,
            "the direct reader is not the common case: {t:?}"
        );
        assert!(
            repeated_ids >= 20 && several_fast >= 30,
            "{repeated_ids} {several_fast}"
        );
    }
}
