//! The lossless value: [`Json`], [`Number`], the ordered [`Map`] and
//! [`Object`] with its reader of kept text.
//!
//! The reference keeps free-form positions (`memory`, `attributes`, `tools`,
//! `extra_keys`, `arguments`, `internal_steps`) as Python objects: integers of
//! any size, floats, and dictionaries in insertion order. These types keep the
//! same information: a number is kept as its JSON lexeme, so `1.0` stays a
//! float and `123456789012345678901234567890` stays exact, and objects keep
//! their key order.

use std::fmt;
use std::sync::{Arc, OnceLock};

use super::KeyFilter;
use super::shared_text::KeptText;

/// A JSON value that keeps everything the document said.
///
/// Numbers keep their lexeme and objects keep their key order. Equality is
/// structural and order-sensitive for objects, and compares numbers by lexeme.
#[derive(PartialEq, Eq, Default)]
pub enum Json {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A finite number, kept as written.
    Number(Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, in document order, keys unique.
    Object(Object),
}

/// A JSON object: ordered, unique string keys.
///
/// An object read from a free-form position of a document (`memory`,
/// `attributes`, `tools[i]`, `extra_keys`, `arguments`, `internal_steps[i]`)
/// is kept as its validated text until it is first looked at: reading it
/// parses it once (the result is cached), changing it turns it into an
/// ordinary map, and serializing an untouched object copies its text. Agents
/// that pass memory through unchanged therefore pay for one validating scan
/// and one copy. None of this shows in the API: an `Object` behaves as an
/// ordered map of [`Json`] values.
pub struct Object {
    repr: ObjectRepr,
}

// Five words: `Json` values are built by the million in trees, and each
// word of `Object` is one of every `Json`.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(size_of::<Object>() == 40 && size_of::<Json>() == 48);

enum ObjectRepr {
    /// Owned entries.
    Map(Map<Json>),
    /// Text of an object that passed validation (valid JSON, finite numbers,
    /// nesting within limits, no duplicate keys, each key written as the
    /// writer writes it: as it is unless it holds `"`, `\` or a control
    /// character), read on first use one level deep: objects among its
    /// values stay text. Either the document's own text (no escaped key) or
    /// the normal text of an object with repeated or escaped keys
    /// (`normal.rs`): what writing its tree gives, nested objects included.
    Raw {
        /// Shared: a copy of an untouched object (an agent returning the
        /// memory it was given, once per candidate) costs a count, not the
        /// text again.
        /// With the [`KeyFilter`] of its top-level keys, which answers
        /// most lookups of a missing key without a scan.
        text: KeptText,
        /// What reading it built, boxed so that an unread object (and so
        /// every `Json`) stays small: deep values are cloned and dropped
        /// recursively, and their frames grow with it.
        read: OnceLock<Box<Decoded>>,
    },
}

/// What decoding an object kept as text built.
#[derive(Default)]
struct Decoded {
    /// Every entry, one level deep.
    entries: OnceLock<Map<Json>>,
    /// The first key looked up before the entries were read, with its value:
    /// agents often read one key of an object (a tool's `name`, one
    /// attribute), which then costs that value, not every entry.
    /// Set when the box is made, never after: a plain field, which costs
    /// no synchronisation to fill.
    looked_up: Option<(LookedUp, Json)>,
}

impl Decoded {
    fn with_looked_up(key: LookedUp, value: Json) -> Box<Decoded> {
        Box::new(Decoded {
            entries: OnceLock::new(),
            looked_up: Some((key, value)),
        })
    }

    /// The value looked up before the entries were read, if it is `key`'s:
    /// the looked-up key needs no escape, so it is written as it is at
    /// `at`, and only that key has those bytes there.
    fn looked_up<'a>(&'a self, text: &str, key: &str) -> Option<&'a Json> {
        let (at, value) = self.looked_up.as_ref()?;
        (text.get(at.start..at.end) == Some(key)).then_some(value)
    }

    fn with_entries(entries: Map<Json>) -> Box<Decoded> {
        Box::new(Decoded {
            entries: OnceLock::from(entries),
            looked_up: None,
        })
    }
}

/// Where a looked-up key lies in the text it was read from: the text does not
/// change while what was read of it is kept.
type LookedUp = std::ops::Range<usize>;

/// The entries already read, if any.
fn entries_read(read: &OnceLock<Box<Decoded>>) -> Option<&Map<Json>> {
    read.get().and_then(|r| r.entries.get())
}

impl Object {
    /// An empty object.
    pub fn new() -> Object {
        Object {
            repr: ObjectRepr::Map(Map::new()),
        }
    }

    /// An empty object with room for `n` entries.
    pub fn with_capacity(n: usize) -> Object {
        Object {
            repr: ObjectRepr::Map(Map::with_capacity(n)),
        }
    }

    /// Wraps validated text: the caller has checked that `text` is one JSON
    /// object with unique keys, written as the writer writes keys, that the
    /// generic parser reads without error.
    /// `keys` covers its top-level keys ([`KeyFilter::ANY`] when not
    /// known).
    pub(crate) fn from_validated_text(text: &str, keys: KeyFilter) -> Object {
        if text == "{}" {
            // Common (`extra_keys`, `memory`, `attributes`), and an empty
            // map writes back the same two bytes: no copy to keep.
            return Object::new();
        }
        Object::from_kept_text(KeptText::own(text.into(), keys))
    }

    /// [`Object::from_validated_text`] for text already kept (shared with
    /// the objects beside it in its document, see `shared_text.rs`); the
    /// caller makes `{}` an empty map.
    pub(crate) fn from_kept_text(text: KeptText) -> Object {
        Object {
            repr: ObjectRepr::Raw {
                text,
                read: OnceLock::new(),
            },
        }
    }

    /// `true` while the object is still the validated text of a document.
    pub(crate) fn is_validated_text(&self) -> bool {
        matches!(self.repr, ObjectRepr::Raw { .. })
    }

    /// The text of an untouched object read from a document.
    pub(crate) fn raw_text(&self) -> Option<&str> {
        match &self.repr {
            ObjectRepr::Raw { text, .. } => Some(&**text),
            ObjectRepr::Map(_) => None,
        }
    }

    fn map(&self) -> &Map<Json> {
        match &self.repr {
            ObjectRepr::Map(m) => m,
            ObjectRepr::Raw { text, read, .. } => read
                .get_or_init(Box::default)
                .entries
                .get_or_init(|| read_kept_text(text)),
        }
    }

    fn map_mut(&mut self) -> &mut Map<Json> {
        if let ObjectRepr::Raw { text, read, .. } = &mut self.repr {
            let map = read
                .take()
                .and_then(|mut r| r.entries.take())
                .unwrap_or_else(|| read_kept_text(text));
            self.repr = ObjectRepr::Map(map);
        }
        match &mut self.repr {
            ObjectRepr::Map(m) => m,
            ObjectRepr::Raw { .. } => unreachable!("converted to a map just above"),
        }
    }

    /// The entries as a map.
    pub fn as_map(&self) -> &Map<Json> {
        self.map()
    }

    /// The entries as a map, mutably.
    pub fn as_map_mut(&mut self) -> &mut Map<Json> {
        self.map_mut()
    }

    /// The owned map.
    pub fn into_map(self) -> Map<Json> {
        match self.repr {
            ObjectRepr::Map(m) => m,
            ObjectRepr::Raw { text, read, .. } => read
                .into_inner()
                .and_then(|r| r.entries.into_inner())
                .unwrap_or_else(|| read_kept_text(&text)),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// About how long the object's compact JSON is, without writing it:
    /// exact for an object kept as the text it was read from (no scan), an
    /// allowance for nested maps otherwise.
    pub fn json_len_hint(&self) -> usize {
        super::write::WriteJson::size_hint(self)
    }

    /// `true` if there are no entries.
    pub fn is_empty(&self) -> bool {
        match &self.repr {
            ObjectRepr::Raw { text, .. } => text[1..].trim_start().starts_with('}'),
            ObjectRepr::Map(m) => m.is_empty(),
        }
    }

    /// The value for `key`.
    pub fn get(&self, key: &str) -> Option<&Json> {
        if let ObjectRepr::Raw { text, read } = &self.repr {
            if !text.keys.may_contain(key) {
                return None;
            }
            match read.get() {
                // Unread text: a missing key costs a scan, the first key
                // looked up costs its value.
                None => {
                    let member = super::kept_text::find_member(text, key)?;
                    // Only a key written as it is can be found again by
                    // its bytes at `at` (see `Decoded::looked_up`).
                    let plain = super::lex::plain_run_end(key.as_bytes(), 0) == key.len();
                    let value = plain
                        .then(|| super::kept_text::read_kept_value(&text[member.value]))
                        .flatten();
                    if let Some(value) = value {
                        let at = member.key..member.key + key.len();
                        let r = read.get_or_init(|| Decoded::with_looked_up(at, value));
                        if let Some(v) = r.looked_up(text, key) {
                            return Some(v);
                        }
                    }
                }
                Some(r) if r.entries.get().is_none() => {
                    if let Some(v) = r.looked_up(text, key) {
                        return Some(v);
                    }
                    super::kept_text::find_member(text, key)?;
                }
                Some(_) => {}
            }
        }
        self.map().get(key)
    }

    /// A copy of the value of `key`: what `get(key).cloned()` answers, but
    /// an object still kept as its text (see the type docs) and not read yet
    /// parses the value into the copy and keeps nothing. For a value you
    /// move into your answer (a robot name, a list), this saves building it
    /// twice.
    ///
    /// ```
    /// use magma_protocol::{AgentRequest, json};
    ///
    /// let body = r#"{"request_id": "r", "inputs": [{"id": 0,
    ///     "instruction": {"type": "env", "content": "{}"},
    ///     "attributes": {"known_robots": ["panda", "ur5e"]}}]}"#;
    /// let request = AgentRequest::from_slice(body.as_bytes()).unwrap();
    /// let attributes = &request.inputs()[0].attributes;
    /// let robots = attributes.get_cloned("known_robots");
    /// assert_eq!(robots, Some(json!(["panda", "ur5e"])));
    /// assert_eq!(attributes.get_cloned("objects"), None);
    /// ```
    pub fn get_cloned(&self, key: &str) -> Option<Json> {
        if let ObjectRepr::Raw { text, read } = &self.repr {
            if !text.keys.may_contain(key) {
                return None;
            }
            if read.get().is_none() {
                let member = super::kept_text::find_member(text, key)?;
                if let Some(value) = super::kept_text::read_kept_value(&text[member.value]) {
                    return Some(value);
                }
            }
        }
        self.get(key).cloned()
    }

    /// The string value of `key`: what `get(key).and_then(Json::as_str)`
    /// answers, but cheaper on an object still kept as its text (see the
    /// type docs). There, a string without escapes (most are) is borrowed
    /// from the text, and nothing is built or cached: reading a tool's
    /// `name` this way costs one scan of the tool's text.
    ///
    /// ```
    /// use magma_protocol::{AgentRequest, json};
    ///
    /// let body = r#"{"request_id": "r", "inputs": [{"id": 0,
    ///     "instruction": {"type": "env", "content": "{}"},
    ///     "tools": [{"name": "press_button", "arguments": {}}]}]}"#;
    /// let request = AgentRequest::from_slice(body.as_bytes()).unwrap();
    /// let tool = &request.inputs()[0].tools[0];
    /// assert_eq!(tool.get_str("name"), Some("press_button"));
    /// assert_eq!(tool.get_str("arguments"), None); // not a string
    /// assert_eq!(tool.get_str("description"), None); // not there
    /// assert_eq!(json!({"a": "x\ny"}).as_object().unwrap().get_str("a"), Some("x\ny"));
    /// ```
    pub fn get_str(&self, key: &str) -> Option<&str> {
        if let ObjectRepr::Raw { text, read } = &self.repr {
            if !text.keys.may_contain(key) {
                return None;
            }
            match read.get() {
                // Entries read: the map answers below.
                Some(r) if r.entries.get().is_some() => {}
                cached => {
                    // The text once: each look at a chunk's stretch checks
                    // its bounds.
                    let text: &str = text;
                    if let Some(v) = cached.and_then(|r| r.looked_up(text, key)) {
                        return v.as_str();
                    }
                    let (_, at) = super::kept_text::find_value(text, key)?;
                    if text.as_bytes().get(at) != Some(&b'"') {
                        return None;
                    }
                    if let Some(plain) = super::kept_text::plain_string_at(text, at) {
                        return Some(plain);
                    }
                    // A string with escapes: decoded (and cached) by `get`.
                }
            }
        }
        self.get(key).and_then(Json::as_str)
    }

    /// The string at `index` of the array value of `key`: what
    /// `get(key).and_then(Json::as_array).and_then(|a| a.get(index)).and_then(Json::as_str)`
    /// answers, but cheaper on an object still kept as its text (see the
    /// type docs), as [`get_str`](Object::get_str) is: a string without
    /// escapes is borrowed from the text, the items before it are skipped
    /// unread, and nothing is built or cached. Reading the first of the
    /// `known_robots` this way costs one scan of the attributes' text.
    ///
    /// ```
    /// use magma_protocol::{AgentRequest, json};
    ///
    /// let body = r#"{"request_id": "r", "inputs": [{"id": 0,
    ///     "instruction": {"type": "env", "content": "{}"},
    ///     "attributes": {"known_robots": ["panda", 7, "ur5e"]}}]}"#;
    /// let request = AgentRequest::from_slice(body.as_bytes()).unwrap();
    /// let attributes = &request.inputs()[0].attributes;
    /// assert_eq!(attributes.get_str_item("known_robots", 0), Some("panda"));
    /// assert_eq!(attributes.get_str_item("known_robots", 1), None); // not a string
    /// assert_eq!(attributes.get_str_item("known_robots", 2), Some("ur5e"));
    /// assert_eq!(attributes.get_str_item("known_robots", 3), None); // no such item
    /// assert_eq!(attributes.get_str_item("objects", 0), None); // not there
    /// ```
    pub fn get_str_item(&self, key: &str, index: usize) -> Option<&str> {
        if let ObjectRepr::Raw { text, read } = &self.repr {
            if !text.keys.may_contain(key) {
                return None;
            }
            match read.get() {
                // Entries read: the map answers below.
                Some(r) if r.entries.get().is_some() => {}
                cached => {
                    let text: &str = text;
                    if let Some(v) = cached.and_then(|r| r.looked_up(text, key)) {
                        return str_item(v, index);
                    }
                    let (_, at) = super::kept_text::find_value(text, key)?;
                    match super::kept_text::array_item(text, at, index) {
                        super::kept_text::Item::Plain(s) => return Some(s),
                        super::kept_text::Item::Other => return None,
                        // Decoded (and cached) by `get`.
                        super::kept_text::Item::Escaped => {}
                    }
                }
            }
        }
        self.get(key).and_then(|v| str_item(v, index))
    }

    /// `false` when the object is unread text without `key`: answering that
    /// takes a scan, where reading the entries would build them.
    fn raw_may_contain(&self, key: &str) -> bool {
        match &self.repr {
            ObjectRepr::Raw { text, read } if entries_read(read).is_none() => {
                text.keys.may_contain(key) && super::kept_text::find_member(text, key).is_some()
            }
            _ => true,
        }
    }

    /// The value for `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        self.map_mut().get_mut(key)
    }

    /// `true` if `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.raw_may_contain(key) && self.map().contains_key(key)
    }

    /// Sets `key`; an existing key keeps its position, a new one goes last.
    pub fn insert<K>(&mut self, key: K, value: Json) -> Option<Json>
    where
        K: AsRef<str> + Into<String>,
    {
        if let ObjectRepr::Raw { text, read } = &mut self.repr {
            if spliceable(key.as_ref(), &value) {
                return splice(text, read, key, value);
            }
        }
        self.map_mut().insert(key.into(), value)
    }

    /// Removes `key`, keeping the order of the others.
    pub fn remove(&mut self, key: &str) -> Option<Json> {
        self.map_mut().remove(key)
    }

    /// The entries in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Json)> + '_ {
        self.map().iter()
    }

    /// The entries in order, values mutable.
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = (&str, &mut Json)> + '_ {
        self.map_mut().iter_mut()
    }

    /// The keys in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.map().keys()
    }

    /// The values in order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &Json> + '_ {
        self.map().values()
    }

    pub(crate) fn entries(&self) -> &[(String, Json)] {
        self.map().entries()
    }
}

/// The string at `index` of `value`, if it is an array with one there.
fn str_item(value: &Json, index: usize) -> Option<&str> {
    value.as_array()?.get(index)?.as_str()
}

/// Parses text that already passed validation, one level deep; cannot fail.
fn read_kept_text(text: &str) -> Map<Json> {
    // `None` is unreachable: the text was validated as an object before it
    // was kept.
    super::kept_text::read_kept_entries(text).unwrap_or_default()
}

/// `true` when `key` and `value` can be written into validated text as
/// they are: a key that needs no escape (written as it is) and a
/// scalar value (null, a boolean, a finite number, a string), which cannot
/// break the nesting limits the text was checked for.
fn spliceable(key: &str, value: &Json) -> bool {
    let plain_key = super::lex::plain_run_end(key.as_bytes(), 0) == key.len();
    let scalar = match value {
        Json::Null | Json::Bool(_) | Json::String(_) => true,
        Json::Number(n) => n.is_finite(),
        Json::Array(_) | Json::Object(_) => false,
    };
    plain_key && scalar
}

thread_local! {
    /// Where [`splice`] writes a new text before copying it into its own
    /// allocation.
    static SPLICE_BUFFER: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Largest buffer [`SPLICE_BUFFER`] keeps between splices.
const SPLICE_BUFFER_KEPT: usize = 64 * 1024;

/// [`Object::insert`] on validated text: the member is written into the text
/// (its value replaced in place, or appended before the closing brace), and
/// into the entries too when they were already read.
#[inline(never)]
fn splice<K: AsRef<str> + Into<String>>(
    text: &mut KeptText,
    read: &mut OnceLock<Box<Decoded>>,
    key: K,
    value: Json,
) -> Option<Json> {
    use super::write::WriteJson;
    let k = key.as_ref();
    let found = if text.keys.may_contain(k) {
        super::kept_text::find_member(text, k).map(|m| (m.value.start, m.value.end))
    } else {
        None
    };
    // Written into a buffer kept per thread, then copied once into the
    // new text's own allocation: an agent inserts into every candidate's
    // memory, and a `String` of its own would be one more allocation each.
    // The text once: each look at a chunk's stretch checks its bounds.
    let t: &str = text;
    let (spliced, old) = SPLICE_BUFFER.with_borrow_mut(|out| {
        out.clear();
        let spliced = match found {
            Some((start, end)) => {
                out.reserve(t.len() - (end - start) + value.size_hint());
                out.push_str(&t[..start]);
                value.write_json(out);
                out.push_str(&t[end..]);
                let old = match entries_read(read) {
                    Some(_) => None,
                    None => super::kept_text::read_kept_value(&t[start..end]),
                };
                (Arc::<str>::from(out.as_str()), old)
            }
            None => {
                // Validated text ends with the object's `}`.
                let body = t.get(..t.len() - 1).unwrap_or_default();
                let first = super::lex::ws_end(t.as_bytes(), 1);
                let empty = t.as_bytes().get(first) == Some(&b'}');
                out.reserve(t.len() + k.len() + value.size_hint() + 4);
                out.push_str(if empty { "{\"" } else { body });
                if !empty {
                    out.push_str(",\"");
                }
                out.push_str(k);
                out.push_str("\":");
                value.write_json(out);
                out.push('}');
                (Arc::<str>::from(out.as_str()), None)
            }
        };
        // A long text's buffer is not kept for the thread's lifetime.
        if out.capacity() > SPLICE_BUFFER_KEPT {
            *out = String::new();
        }
        spliced
    });
    let mut keys = text.keys;
    keys.add(KeyFilter::of(k.as_bytes()));
    *text = KeptText::own_folded(spliced, keys);
    // What was read of the old text: the entries stay right once changed
    // too, a looked-up value may not.
    match read.take().and_then(|mut r| r.entries.take()) {
        Some(mut map) => {
            let old = map.insert(key.into(), value);
            *read = OnceLock::from(Decoded::with_entries(map));
            old
        }
        None => old,
    }
}

impl Default for Object {
    fn default() -> Self {
        Object::new()
    }
}

impl Clone for Json {
    fn clone(&self) -> Self {
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(*b),
            Json::Number(n) => Json::Number(n.clone()),
            Json::String(s) => Json::String(s.clone()),
            Json::Array(_) | Json::Object(_) => clone_tree(self),
        }
    }
}

/// A container and its copy so far, while [`clone_tree`] copies its items.
enum Copying<'a> {
    Array(std::slice::Iter<'a, Json>, Vec<Json>),
    /// The last field is the key of the value being copied.
    Object(
        std::slice::Iter<'a, (String, Json)>,
        Vec<(String, Json)>,
        String,
    ),
}

/// Clones a value with an explicit stack instead of recursion: values nest
/// as deep as the parser allows, and a recursive clone needs more stack
/// than the rest of the crate (see `values_as_deep_as_the_parser_allows` in
/// `tests/it/hostile.rs`). Objects kept as text are copied flat.
#[inline(never)]
fn clone_tree(root: &Json) -> Json {
    let mut stack: Vec<Copying<'_>> = Vec::new();
    let mut next = root;
    loop {
        let mut done = match next {
            Json::Array(items) => {
                stack.push(Copying::Array(
                    items.iter(),
                    Vec::with_capacity(items.len()),
                ));
                None
            }
            Json::Object(Object {
                repr: ObjectRepr::Map(m),
            }) => {
                let (iter, copy) = (m.entries.iter(), Vec::with_capacity(m.len()));
                stack.push(Copying::Object(iter, copy, String::new()));
                None
            }
            // Kept as text: a flat copy.
            Json::Object(o) => Some(Json::Object(o.clone())),
            scalar => Some(scalar.clone()),
        };
        // Finish what is complete, then go on with the next item.
        loop {
            let Some(top) = stack.last_mut() else {
                // `done` holds the root once the stack is empty.
                return done.unwrap_or_default();
            };
            match (top, done.take()) {
                (Copying::Array(_, copy), Some(value)) => copy.push(value),
                (Copying::Object(_, copy, key), Some(value)) => {
                    copy.push((std::mem::take(key), value));
                }
                (_, None) => {}
            }
            let top = stack.last_mut().expect("checked just above");
            let item = match top {
                Copying::Array(items, _) => items.next(),
                Copying::Object(entries, _, key) => entries.next().map(|(k, v)| {
                    *key = k.clone();
                    v
                }),
            };
            if let Some(item) = item {
                next = item;
                break;
            }
            done = Some(match stack.pop().expect("checked just above") {
                Copying::Array(_, copy) => Json::Array(copy),
                Copying::Object(_, entries, _) => Json::Object(Object {
                    repr: ObjectRepr::Map(Map { entries }),
                }),
            });
        }
    }
}

impl Clone for Object {
    fn clone(&self) -> Self {
        match &self.repr {
            ObjectRepr::Map(m) => Object {
                repr: ObjectRepr::Map(m.clone()),
            },
            ObjectRepr::Raw { text, read } => clone_text(text, entries_read(read)),
        }
    }
}

/// A copy is usually made to be changed: keep the parsed entries, if any, so
/// the change does not parse the text again. Kept out of line, so that it
/// adds nothing to the frames of `clone_tree`.
#[inline(never)]
fn clone_text(text: &KeptText, entries: Option<&Map<Json>>) -> Object {
    Object {
        repr: ObjectRepr::Raw {
            text: text.clone(),
            read: entries.map_or_else(OnceLock::new, |m| {
                OnceLock::from(Decoded::with_entries(m.clone()))
            }),
        },
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        if let (Some(a), Some(b)) = (self.raw_text(), other.raw_text()) {
            if a == b {
                return true;
            }
        }
        self.map() == other.map()
    }
}

impl Eq for Object {}

impl From<Map<Json>> for Object {
    fn from(m: Map<Json>) -> Self {
        Object {
            repr: ObjectRepr::Map(m),
        }
    }
}

impl From<Object> for Map<Json> {
    fn from(o: Object) -> Self {
        o.into_map()
    }
}

impl IntoIterator for Object {
    type Item = (String, Json);
    type IntoIter = std::vec::IntoIter<(String, Json)>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl<K: Into<String>> FromIterator<(K, Json)> for Object {
    fn from_iter<I: IntoIterator<Item = (K, Json)>>(iter: I) -> Self {
        Object::from(iter.into_iter().collect::<Map<Json>>())
    }
}

impl<K: Into<String>> Extend<(K, Json)> for Object {
    fn extend<I: IntoIterator<Item = (K, Json)>>(&mut self, iter: I) {
        self.map_mut().extend(iter);
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.map(), f)
    }
}

impl Json {
    /// The name of this value's JSON type: `null`, `boolean`, `number`,
    /// `string`, `array` or `object`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }

    /// `true` if this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Json::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The integer, if this is an integer number that fits in `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number().and_then(Number::as_i64)
    }

    /// The number as `f64` (integers converted, possibly rounded).
    pub fn as_f64(&self) -> Option<f64> {
        self.as_number().and_then(Number::as_f64)
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The object, mutably, if this is one.
    pub fn as_object_mut(&mut self) -> Option<&mut Object> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    /// Looks a key up, if this is an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.as_object().and_then(|o| o.get(key))
    }

    /// Compact JSON text, numbers written exactly as they were read.
    pub fn to_json_string(&self) -> String {
        super::write::to_string(self)
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_string())
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_string())
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Self {
        Json::Bool(b)
    }
}

impl From<String> for Json {
    fn from(s: String) -> Self {
        Json::String(s)
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Self {
        Json::String(s.to_owned())
    }
}

impl From<Number> for Json {
    fn from(n: Number) -> Self {
        Json::Number(n)
    }
}

impl From<Object> for Json {
    fn from(o: Object) -> Self {
        Json::Object(o)
    }
}

impl From<Vec<Json>> for Json {
    fn from(a: Vec<Json>) -> Self {
        Json::Array(a)
    }
}

macro_rules! json_from_int {
    ($($t:ty)*) => {$(
        impl From<$t> for Json {
            fn from(i: $t) -> Self {
                Json::Number(Number::from(i))
            }
        }
        impl From<$t> for Number {
            fn from(i: $t) -> Self {
                // What fits 64 bits is written here, without an allocation.
                let lexeme = match (i64::try_from(i), u64::try_from(i)) {
                    (_, Ok(u)) => Lexeme::integer(false, u),
                    (Ok(n), Err(_)) => Lexeme::integer(n < 0, n.unsigned_abs()),
                    _ => Lexeme::Long(i.to_string().into_boxed_str()),
                };
                Number { lexeme }
            }
        }
    )*};
}
json_from_int!(i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize);

/// A number's lexeme: a short one (most are: counters, ids, coordinates)
/// held in place, without an allocation of its own. Its bytes are read as
/// they are; the `&str` of a short one is checked (ASCII) when asked for,
/// which the workspace's `forbid(unsafe_code)` leaves no other way to make.
#[derive(Clone)]
enum Lexeme {
    /// The first `len` bytes of `bytes`: an ASCII lexeme.
    Short {
        len: u8,
        bytes: [u8; SHORT_LEXEME],
    },
    Long(Box<str>),
}

/// The longest lexeme held in place: what keeps a [`Number`] three words.
const SHORT_LEXEME: usize = 22;

impl Lexeme {
    fn new(text: &str) -> Lexeme {
        let n = text.len();
        match u8::try_from(n) {
            Ok(len) if n <= SHORT_LEXEME => {
                let mut bytes = [0; SHORT_LEXEME];
                bytes[..n].copy_from_slice(text.as_bytes());
                Lexeme::Short { len, bytes }
            }
            _ => Lexeme::Long(text.into()),
        }
    }

    /// The decimal lexeme of the integer `magnitude`, negated when
    /// `negative` (20 digits and a sign at most: always short).
    fn integer(negative: bool, mut magnitude: u64) -> Lexeme {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (magnitude % 10) as u8;
            magnitude /= 10;
            if magnitude == 0 {
                break;
            }
        }
        let mut bytes = [0; SHORT_LEXEME];
        let mut len = 0;
        if negative {
            bytes[0] = b'-';
            len = 1;
        }
        let count = digits.len() - at;
        bytes[len..len + count].copy_from_slice(&digits[at..]);
        len += count;
        Lexeme::Short {
            len: len as u8,
            bytes,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Lexeme::Short { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            Lexeme::Long(text) => text.as_bytes(),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // ASCII by construction, so this cannot fail.
            Lexeme::Short { .. } => std::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            Lexeme::Long(text) => text,
        }
    }
}

/// The integer of the digits of an integer lexeme (no sign), if it fits:
/// what `str::parse` answers, on the bytes.
fn digits_value(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        if !d.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// A JSON number, kept as the lexeme the document used.
///
/// A `Number` obtained from this crate is always finite and always a valid
/// JSON number lexeme (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`).
/// Integers have any number of digits; an integer is a lexeme without
/// fraction and exponent, as in Python's `json` module.
#[derive(Clone)]
pub struct Number {
    lexeme: Lexeme,
}

// Three words: a `Number` is one of the values of a `Json`, which stays
// the size its `Object` gives it.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(size_of::<Number>() == 24);

impl PartialEq for Number {
    fn eq(&self, other: &Self) -> bool {
        self.lexeme.as_bytes() == other.lexeme.as_bytes()
    }
}

impl Eq for Number {}

impl std::hash::Hash for Number {
    /// As the lexeme's (a `str`'s) hash.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.lexeme.as_str().hash(state);
    }
}

impl Number {
    /// Builds a number from a finite `f64`; `None` for NaN and infinities.
    ///
    /// The lexeme is the shortest one that reads back as the same `f64`, and
    /// always marks a float (`1.0`, not `1`).
    pub fn from_f64(f: f64) -> Option<Number> {
        if !f.is_finite() {
            return None;
        }
        // `{:?}` prints the shortest round-tripping form and keeps `.0`.
        let text = format!("{f:?}");
        Some(Number {
            lexeme: Lexeme::new(&text),
        })
    }

    /// Parses a lexeme; `None` unless it is a finite JSON number.
    pub fn from_lexeme(text: &str) -> Option<Number> {
        let n = Number::from_lexeme_unchecked_finite(text)?;
        n.is_finite().then_some(n)
    }

    /// A lexeme that is syntactically a JSON number, finite or not.
    pub(crate) fn from_lexeme_unchecked_finite(text: &str) -> Option<Number> {
        super::lex::is_number_lexeme(text.as_bytes()).then(|| Number {
            lexeme: Lexeme::new(text),
        })
    }

    /// The parser's constructor: the text is a checked lexeme, or one of the
    /// non-JSON constants `NaN`, `Infinity`, `-Infinity` that Python accepts
    /// and validation then rejects.
    pub(crate) fn from_parser(text: &str) -> Number {
        Number {
            lexeme: Lexeme::new(text),
        }
    }

    /// The lexeme, exactly as written in the document.
    pub fn as_str(&self) -> &str {
        self.lexeme.as_str()
    }

    /// The lexeme's bytes (ASCII), for the writer.
    pub(crate) fn lexeme_bytes(&self) -> &[u8] {
        self.lexeme.as_bytes()
    }

    /// `true` for an integer lexeme (no fraction, no exponent).
    #[inline]
    pub fn is_integer(&self) -> bool {
        let b = self.lexeme.as_bytes();
        !b.is_empty()
            && b[b.len() - 1].is_ascii_digit()
            && !b.iter().any(|c| matches!(c, b'.' | b'e' | b'E'))
    }

    /// `true` unless the value is NaN or infinite once read as Python reads
    /// it (a float lexeme such as `1e400` overflows to infinity).
    #[inline]
    pub fn is_finite(&self) -> bool {
        let b = self.lexeme.as_bytes();
        match b.first() {
            Some(b'N' | b'I') => return false,
            Some(b'-') if b.get(1) == Some(&b'I') => return false,
            _ => {}
        }
        if self.is_integer() {
            return true;
        }
        // Without an exponent, only a mantissa of over 309 digits can overflow.
        let has_exp = b.iter().any(|c| matches!(c, b'e' | b'E'));
        if !has_exp && b.len() < 300 {
            return true;
        }
        self.as_str().parse::<f64>().is_ok_and(f64::is_finite)
    }

    /// The value as `i64`, if it is an integer lexeme in range (`-0` is 0).
    pub fn as_i64(&self) -> Option<i64> {
        if !self.is_integer() {
            return None;
        }
        let b = self.lexeme.as_bytes();
        match b.strip_prefix(b"-") {
            Some(digits) => {
                let magnitude = digits_value(digits)?;
                0i64.checked_sub_unsigned(magnitude)
            }
            None => i64::try_from(digits_value(b)?).ok(),
        }
    }

    /// The value as `u64`, if it is a non-negative integer lexeme in range.
    pub fn as_u64(&self) -> Option<u64> {
        if !self.is_integer() {
            return None;
        }
        let b = self.lexeme.as_bytes();
        if b == b"-0" {
            return Some(0);
        }
        digits_value(b)
    }

    /// The value as `f64` (integers converted, possibly rounded).
    pub fn as_f64(&self) -> Option<f64> {
        self.as_str().parse::<f64>().ok().filter(|f| f.is_finite())
    }

    /// `true` if the lexeme denotes a negative value (`-0` is not negative,
    /// `-0.0` is).
    pub(crate) fn is_negative_integer(&self) -> bool {
        let b = self.lexeme.as_bytes();
        self.is_integer() && b.first() == Some(&b'-') && b.iter().skip(1).any(|c| *c != b'0')
    }
}

impl fmt::Debug for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An ordered map with unique string keys, in insertion order.
///
/// Inserting an existing key replaces its value in place, which is how a
/// Python `dict` built by `json.loads` treats duplicate keys.
#[derive(Clone, PartialEq, Eq)]
pub struct Map<V> {
    entries: Vec<(String, V)>,
}

impl<V> Default for Map<V> {
    fn default() -> Self {
        Map {
            entries: Vec::new(),
        }
    }
}

impl<V> Map<V> {
    /// An empty map.
    pub fn new() -> Self {
        Map {
            entries: Vec::new(),
        }
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        Map {
            entries: Vec::with_capacity(n),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// `true` if there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.entries.iter().position(|(k, _)| k == key)
    }

    /// The value for `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value for `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// `true` if `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key` to `value`. An existing key keeps its position and the old
    /// value is returned; a new key goes last.
    pub fn insert(&mut self, key: impl Into<String>, value: V) -> Option<V> {
        let key = key.into();
        match self.position(&key) {
            Some(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// Removes `key`, keeping the order of the others.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        let i = self.position(key)?;
        Some(self.entries.remove(i).1)
    }

    /// The entries in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &V)> + '_ {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The entries in order, values mutable.
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = (&str, &mut V)> + '_ {
        self.entries.iter_mut().map(|(k, v)| (k.as_str(), v))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// The values in order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &V> + '_ {
        self.entries.iter().map(|(_, v)| v)
    }

    pub(crate) fn entries(&self) -> &[(String, V)] {
        &self.entries
    }

    /// Appends without checking for duplicates: the caller guarantees the key
    /// is new.
    pub(crate) fn push_unique(&mut self, key: String, value: V) {
        self.entries.push((key, value));
    }

    pub(crate) fn replace_at(&mut self, index: usize, value: V) {
        self.entries[index].1 = value;
    }
}

impl<V> IntoIterator for Map<V> {
    type Item = (String, V);
    type IntoIter = std::vec::IntoIter<(String, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<K: Into<String>, V> FromIterator<(K, V)> for Map<V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = Map::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl<K: Into<String>, V> Extend<(K, V)> for Map<V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<V: fmt::Debug> fmt::Debug for Map<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Builds a [`Json`] value with JSON-like syntax. Values may be nested
/// arrays and objects, `null`, or any Rust expression of a scalar type
/// (`bool`, integers, `f64`, strings, [`Json`], [`Object`], [`Number`]).
///
/// ```
/// use magma_protocol::json;
/// let steps = 3;
/// let v = json!({"say": "hi", "n": [1, -2.5, null, true], "steps": steps + 1, "o": {}});
/// assert_eq!(v.to_json_string(), r#"{"say":"hi","n":[1,-2.5,null,true],"steps":4,"o":{}}"#);
/// ```
#[macro_export]
macro_rules! json {
    // Arrays: munch one element at a time, up to each top-level comma.
    (@array [$($done:expr,)*]) => { vec![$($done,)*] };
    (@array [$($done:expr,)*] null $(, $($rest:tt)*)?) => {
        $crate::json!(@array [$($done,)* $crate::json::Json::Null,] $($($rest)*)?)
    };
    (@array [$($done:expr,)*] [$($inner:tt)*] $(, $($rest:tt)*)?) => {
        $crate::json!(@array [$($done,)* $crate::json!([$($inner)*]),] $($($rest)*)?)
    };
    (@array [$($done:expr,)*] {$($inner:tt)*} $(, $($rest:tt)*)?) => {
        $crate::json!(@array [$($done,)* $crate::json!({$($inner)*}),] $($($rest)*)?)
    };
    (@array [$($done:expr,)*] $next:expr $(, $($rest:tt)*)?) => {
        $crate::json!(@array [$($done,)* $crate::json::Json::from_scalar($next),] $($($rest)*)?)
    };
    // Objects: `"key": value` pairs.
    (@object $o:ident) => {};
    (@object $o:ident $key:literal : null $(, $($rest:tt)*)?) => {
        $o.insert($key, $crate::json::Json::Null);
        $crate::json!(@object $o $($($rest)*)?);
    };
    (@object $o:ident $key:literal : [$($inner:tt)*] $(, $($rest:tt)*)?) => {
        $o.insert($key, $crate::json!([$($inner)*]));
        $crate::json!(@object $o $($($rest)*)?);
    };
    (@object $o:ident $key:literal : {$($inner:tt)*} $(, $($rest:tt)*)?) => {
        $o.insert($key, $crate::json!({$($inner)*}));
        $crate::json!(@object $o $($($rest)*)?);
    };
    (@object $o:ident $key:literal : $value:expr $(, $($rest:tt)*)?) => {
        $o.insert($key, $crate::json::Json::from_scalar($value));
        $crate::json!(@object $o $($($rest)*)?);
    };
    (null) => { $crate::json::Json::Null };
    ([ $($tt:tt)* ]) => { $crate::json::Json::Array($crate::json!(@array [] $($tt)*)) };
    ({ $($tt:tt)* }) => {{
        #[allow(unused_mut)]
        let mut object = $crate::json::Object::new();
        $crate::json!(@object object $($tt)*);
        $crate::json::Json::Object(object)
    }};
    ($other:expr) => { $crate::json::Json::from_scalar($other) };
}

/// Scalars the [`json!`] macro accepts.
#[doc(hidden)]
pub trait IntoScalar {
    fn into_json(self) -> Json;
}

impl Json {
    #[doc(hidden)]
    pub fn from_scalar<T: IntoScalar>(v: T) -> Json {
        v.into_json()
    }
}

impl IntoScalar for f64 {
    fn into_json(self) -> Json {
        Number::from_f64(self).map_or(Json::Null, Json::Number)
    }
}

macro_rules! scalar_via_from {
    ($($t:ty)*) => {$(
        impl IntoScalar for $t {
            fn into_json(self) -> Json { Json::from(self) }
        }
    )*};
}
scalar_via_from!(bool String &str i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize Json Object Number);
