//! The free-form scanner: checks a free-form object as validation would,
//! without building anything, so that a clean one can be kept as its text.

use super::KeyFilter;
use super::key_set::{KeySet, offsets_fit};
#[cfg(doc)]
use super::lex::number_end;
use super::lex::{Limits, hex4, plain_run_end, ws_end};

/// Buffers reused across the free-form scans of one document.
#[derive(Default)]
pub(crate) struct ScanBuffers {
    /// The open containers around the innermost one, `{` or `[`: the
    /// innermost is kept in a local of the scan.
    containers: Vec<u8>,
    /// Spans of the keys of the open objects of up to [`SCAN_KEY_LIMIT`]
    /// keys, for duplicate checks.
    keys: Vec<(usize, usize)>,
    /// The open objects around the innermost one.
    frames: Vec<ScanFrame>,
    /// The key sets of the open objects of more than [`SCAN_KEY_LIMIT`]
    /// keys, innermost last: an object's set is made once the objects
    /// inside it are closed, and dropped when it closes, so they stack as
    /// the objects do. Kept apart from the frames so that a frame is plain
    /// data: a frame that owned its set cost every nested object a call to
    /// drop it and an out-of-line push.
    sets: Vec<KeySet>,
}

impl ScanBuffers {
    /// Room for the usual free-form object (a few levels, a few dozen keys
    /// open at once), so that scanning one does not grow the buffers.
    pub(crate) fn with_room() -> ScanBuffers {
        ScanBuffers {
            containers: Vec::with_capacity(16),
            keys: Vec::with_capacity(64),
            frames: Vec::with_capacity(16),
            sets: Vec::new(),
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

/// Keys per object checked for duplicates by comparing them with their
/// siblings' in [`ScanBuffers::keys`]; a larger object moves its keys into
/// a [`KeySet`] (a few bytes a key), so that an object of millions of keys
/// is kept as text too, at a cost that grows with its text only.
const SCAN_KEY_LIMIT: usize = 64;

/// An object being read by [`scan_free_object`]: where its keys start in
/// [`ScanBuffers::keys`], the [`KeyFilter`] of its keys so far, so that most
/// keys need no comparison, and, past [`SCAN_KEY_LIMIT`] keys, whether the
/// last of [`ScanBuffers::sets`] holds them instead.
#[derive(Clone, Copy)]
struct ScanFrame {
    from: usize,
    seen: KeyFilter,
    many: bool,
}

/// Scans the object at `start` (a `{`) without building anything. Returns the
/// end of the object, and the [`KeyFilter`] of its keys, when it is
/// valid JSON, holds only finite numbers, nests no deeper than a free-form
/// value may, has unique unescaped keys and no surrogate escapes: exactly the
/// objects that would parse and validate cleanly. Returns `None` for anything
/// else: the caller then writes the normal text of an object whose keys
/// repeat or are escaped (`normal.rs`), and parses anything else as a tree,
/// which reports any problem with its location.
///
/// The innermost container and object frame live in locals, the enclosing
/// ones in `sc`: most values are read without touching the buffers.
pub(crate) fn scan_free_object(
    src: &[u8],
    start: usize,
    depth_before: usize,
    limits: Limits,
    sc: &mut ScanBuffers,
) -> Option<(usize, KeyFilter)> {
    let scanned = scan_object(src, start, depth_before, limits, sc);
    if scanned.is_none() {
        // A scan that gave up inside large objects frees their key sets
        // now, before the caller builds the object as a tree (a clean one
        // frees each as its object closes).
        sc.sets.clear();
    }
    scanned
}

/// [`scan_free_object`], but for the key sets it may leave behind when it
/// gives up. Freeing them here, after the loop, rather than clearing them
/// as the loop starts, also cut 5% of the inference parse's instructions,
/// all in the loop's own code (the loop no longer begins by dropping a
/// vector of sets).
#[inline(always)]
fn scan_object(
    src: &[u8],
    start: usize,
    depth_before: usize,
    limits: Limits,
    sc: &mut ScanBuffers,
) -> Option<(usize, KeyFilter)> {
    sc.containers.clear();
    sc.keys.clear();
    sc.frames.clear();
    let mut i = ws_end(src, start + 1);
    if src.get(i) == Some(&b'}') {
        return Some((i + 1, KeyFilter::EMPTY));
    }
    // The innermost open container, and how many are open: the free-form
    // object itself is the first.
    let mut top = b'{';
    let mut level = 1usize;
    let mut frame = ScanFrame {
        from: 0,
        seen: KeyFilter::EMPTY,
        many: false,
    };
    // The bounds of `level`, worked out once: a value inside more than
    // `free_form_depth` containers below the free-form object is refused by
    // validation, and a container may open only while the document stays
    // within `depth` (`depth_before + level + 1 <= depth`).
    let free_form_levels = limits.free_form_depth.saturating_add(1);
    let open_levels = limits.depth.saturating_sub(depth_before + 1);
    i = scan_key(src, i, sc, &mut frame)?;
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
                    sc.containers.push(top);
                    top = open;
                    level += 1;
                    // The only place `level` grows: the values inside are
                    // at this level, checked once here, not at each value.
                    if level > free_form_levels {
                        return None;
                    }
                    if open == b'{' {
                        let inner = ScanFrame {
                            from: sc.keys.len(),
                            seen: KeyFilter::EMPTY,
                            many: false,
                        };
                        sc.frames.push(std::mem::replace(&mut frame, inner));
                        i = scan_key(src, i, sc, &mut frame)?;
                    }
                    continue 'value;
                }
            }
            b'"' => i = scan_string(src, i)?,
            b'-' | b'0'..=b'9' => i = scan_number(src, i)?,
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
                    i = scan_key(src, i, sc, &mut frame)?;
                    continue 'value;
                }
                (b',', _) => {
                    i += 1;
                    continue 'value;
                }
                (b'}', b'{') => {
                    i += 1;
                    level -= 1;
                    if frame.many {
                        sc.sets.pop();
                    }
                    if level == 0 {
                        return Some((i, frame.seen));
                    }
                    sc.keys.truncate(frame.from);
                    frame = sc.frames.pop()?;
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

/// A key and its `:`; `None` for escaped keys and duplicates. Inlined into
/// its three call sites: a request has a few hundred free-form keys, and the
/// call cost about a fifth of a key's work. Keys past the
/// [`SCAN_KEY_LIMIT`]th of an object go to [`many_keys`], out of line.
#[inline(always)]
fn scan_key(src: &[u8], i: usize, sc: &mut ScanBuffers, frame: &mut ScanFrame) -> Option<usize> {
    if src.get(i) != Some(&b'"') {
        return None;
    }
    let start = i + 1;
    let mut j = plain_run_end(src, start);
    if src.get(j) != Some(&b'"') {
        return None;
    }
    let key = &src[start..j];
    let filter = KeyFilter::of(key);
    let siblings = sc.keys.get(frame.from..)?;
    if frame.many || siblings.len() >= SCAN_KEY_LIMIT {
        many_keys(src, start, sc, frame)?;
    } else {
        // Only a key the filter may hold can repeat a sibling.
        if frame.seen.covers(filter) {
            let same = |&(a, b): &(usize, usize)| b - a == key.len() && &src[a..b] == key;
            if siblings.iter().any(same) {
                return None;
            }
        }
        sc.keys.push((start, j));
    }
    frame.seen.add(filter);
    j = ws_end(src, j + 1);
    (src.get(j) == Some(&b':')).then_some(j + 1)
}

/// Adds the plain key that starts at `start` (after its quote) to an object
/// of more than [`SCAN_KEY_LIMIT`] keys, moving the keys compared so far
/// into a [`KeySet`] the first time; `None` for a duplicate.
#[cold]
#[inline(never)]
fn many_keys(src: &[u8], start: usize, sc: &mut ScanBuffers, frame: &mut ScanFrame) -> Option<()> {
    let ScanBuffers { keys, sets, .. } = sc;
    if !frame.many {
        if !offsets_fit(src) {
            return None;
        }
        let mut set = KeySet::new(src);
        for &(a, _) in keys.get(frame.from..)? {
            set.insert_plain(src, a - 1);
        }
        keys.truncate(frame.from);
        sets.push(set);
        frame.many = true;
    }
    sets.last_mut()?.insert_plain(src, start - 1).then_some(())
}

/// A number value: its end, the lexeme [`number_end`] reads, found in the
/// same pass that notes whether it has a fraction or an exponent (steps are
/// dense with numbers: a second pass over each lexeme cost about a third of
/// a number's work); `None` unless it reads as a finite `f64`.
#[inline(always)]
pub(super) fn scan_number(src: &[u8], start: usize) -> Option<usize> {
    let digits_end = |mut i: usize| {
        while src.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = start + usize::from(src.get(start) == Some(&b'-'));
    match src.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits_end(i + 1),
        _ => return None,
    }
    // A fraction or exponent counts only when complete, as in `number_end`.
    let mut fraction = false;
    if src.get(i) == Some(&b'.') && src.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i = digits_end(i + 2);
        fraction = true;
    }
    let mut exponent = false;
    if matches!(src.get(i), Some(b'e' | b'E')) {
        let j = i + 1 + usize::from(matches!(src.get(i + 1), Some(b'+' | b'-')));
        if src.get(j).is_some_and(u8::is_ascii_digit) {
            i = digits_end(j + 1);
            exponent = true;
        }
    }
    // Only a float with an exponent, or with over 300 digits, can overflow
    // to infinity; plain integers and decimals are the usual case and need
    // no second look.
    if exponent || (fraction && i - start >= 300) {
        let text = std::str::from_utf8(&src[start..i]).ok()?;
        if !text.parse::<f64>().ok()?.is_finite() {
            return None;
        }
    }
    Some(i)
}

/// A string (a value, or a key of [`super::normal`]); `None` unless the
/// tree parser would read it cleanly. Returns the end of its closing quote.
/// Inlined: out of line, the call cost the scan of the usual request about
/// 1% of its instructions (callgrind).
#[inline(always)]
pub(super) fn scan_string(src: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j = plain_run_end(src, j);
        match *src.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => match *src.get(j + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => j += 2,
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

#[cfg(test)]
mod tests {
    use super::super::TEST_LIMITS;
    use super::super::parse::parse;
    use super::*;

    fn scan(text: &str) -> Option<usize> {
        let mut sc = ScanBuffers::with_room();
        scan_free_object(text.as_bytes(), 0, 0, TEST_LIMITS, &mut sc).map(|(end, _)| end)
    }

    /// `{"k0":0,...}` of `n` distinct keys, then `tail` members.
    fn keys(n: usize, tail: &str) -> String {
        let members: Vec<String> = (0..n).map(|i| format!(r#""k{i}":{i}"#)).collect();
        let sep = if tail.is_empty() || n == 0 { "" } else { "," };
        format!("{{{}{sep}{tail}}}", members.join(","))
    }

    /// Numbers at the edges of the lexeme: the scan keeps exactly the
    /// objects the tree parser reads and validation accepts (finite
    /// numbers only), and ends where the parser ends.
    #[test]
    fn numbers_are_kept_exactly_when_the_parser_reads_them() {
        let long = format!("0.{}", "1".repeat(400));
        let huge = format!("{}.5", "9".repeat(400));
        for n in [
            "0", "-0", "7", "-12", "1.5", "-0.25", "1e5", "1E+5", "2.5e-3", "1e400", "-1e400",
            "1e-400", "01", "-", "-a", "1.", "1.e5", "1e", "1e+", "1ee", ".5", "+1", &long, &huge,
        ] {
            for text in [
                format!(r#"{{"n":{n}}}"#),
                format!(r#"{{"a":[{n},0],"n":{n} }}"#),
            ] {
                let scanned = scan(&text);
                let parsed = parse(text.as_bytes(), TEST_LIMITS);
                let infinite = ["1e400", "-1e400", &huge].contains(&n);
                assert_eq!(
                    scanned.is_some(),
                    parsed.is_ok() && !infinite,
                    "{text}: {parsed:?}"
                );
                assert!(scanned.is_none_or(|end| end == text.len()), "{text}");
            }
        }
    }

    #[test]
    fn objects_of_any_size_are_kept_when_their_keys_are_unique() {
        for n in [SCAN_KEY_LIMIT - 1, SCAN_KEY_LIMIT, SCAN_KEY_LIMIT + 1, 5000] {
            let text = keys(n, "");
            assert_eq!(scan(&text), Some(text.len()), "{n} keys");
            // Nested, and next to siblings that are large too.
            let nested = format!(r#"{{"a":{text},"b":[{text},{text}],"k1":{text}}}"#);
            assert_eq!(scan(&nested), Some(nested.len()), "{n} keys, nested");
            let outer = keys(n, &format!(r#""inner":{text}"#));
            assert_eq!(scan(&outer), Some(outer.len()), "{n} keys around");
        }
    }

    #[test]
    fn a_repeat_anywhere_in_a_large_object_is_found() {
        for n in [SCAN_KEY_LIMIT, SCAN_KEY_LIMIT + 1, 5000] {
            // A repeat of the first key, of one just past the compared
            // ones, of the last one, and of a key moved into the set when
            // it was made.
            for repeat in [0, SCAN_KEY_LIMIT - 1, n - 1] {
                let text = keys(n, &format!(r#""k{repeat}":"again""#));
                assert_eq!(scan(&text), None, "{n} keys, k{repeat} repeated");
                let nested = format!(r#"{{"x":[{text}]}}"#);
                assert_eq!(scan(&nested), None, "{n} keys, nested");
            }
            // A key of the same bytes in a nested object is not a repeat;
            // one after that nested object, in the large one, is.
            let inner = keys(3, "");
            let text = keys(n, &format!(r#""in":{inner},"k2":0"#));
            assert_eq!(scan(&text), None);
            let text = keys(n, &format!(r#""in":{inner},"k{n}":0"#));
            assert_eq!(scan(&text), Some(text.len()));
        }
    }

    #[test]
    fn escaped_keys_in_a_large_object_are_left_to_the_parser() {
        let text = keys(1000, r#""\u006b1":0"#);
        assert_eq!(scan(&text), None);
        // Which reads it, repeat included, as the reference does.
        let tree = parse(text.as_bytes(), TEST_LIMITS).unwrap();
        let object = tree.as_object().unwrap();
        assert_eq!(object.len(), 1000);
        assert_eq!(object.get("k1").unwrap().to_json_string(), "0");
    }

    /// What a document of one large free-form object reads as: kept as
    /// text, the same values as the tree, written back byte for byte.
    #[test]
    fn a_large_free_form_object_is_read_as_its_text() {
        use super::super::parse::{Shape, parse_shaped};
        const SHAPE: Shape = Shape::Fields(&[("memory", Shape::FreeObject)]);
        let memory = keys(200_000, r#""nested":{"a":[1,{"b":2.50}],"k1":"x"}"#);
        let doc = format!(r#"{{"memory":{memory}}}"#);
        let shaped = parse_shaped(doc.as_bytes(), &SHAPE, TEST_LIMITS).unwrap();
        let kept = shaped.get("memory").and_then(|m| m.as_object()).unwrap();
        assert!(kept.is_validated_text());
        assert_eq!(kept.raw_text(), Some(memory.as_str()));
        assert_eq!(kept.get("k199999").unwrap().to_json_string(), "199999");
        assert_eq!(kept.get("k200000"), None);
        assert_eq!(shaped.to_json_string(), doc);
        let tree = parse(doc.as_bytes(), TEST_LIMITS).unwrap();
        assert_eq!(shaped, tree);
        assert_eq!(kept.len(), 200_001);

        // A repeat: the scan refuses it, and it is kept as its normal
        // text (`normal.rs`), which reads as the parser's tree does, the
        // last value at the first place, and writes as it does.
        let memory = keys(5000, r#""k7":"last""#);
        let doc = format!(r#"{{"memory":{memory}}}"#);
        let shaped = parse_shaped(doc.as_bytes(), &SHAPE, TEST_LIMITS).unwrap();
        let read = shaped.get("memory").and_then(|m| m.as_object()).unwrap();
        assert!(read.is_validated_text());
        let tree = parse(doc.as_bytes(), TEST_LIMITS).unwrap();
        assert_eq!(shaped, tree);
        assert_eq!(shaped.to_json_string(), tree.to_json_string());
        assert_eq!(read.len(), 5000);
        assert_eq!(read.keys().nth(7), Some("k7"));
        assert_eq!(read.get("k7").and_then(|v| v.as_str()), Some("last"));
    }

    #[test]
    fn large_scans_do_not_keep_their_buffers() {
        let mut sc = ScanBuffers::with_room();
        let text = keys(100_000, "");
        let end = scan_free_object(text.as_bytes(), 0, 0, TEST_LIMITS, &mut sc);
        assert_eq!(end.map(|(e, _)| e), Some(text.len()));
        // The keys went to a set of their own, not to the shared buffer.
        assert!(sc.keys.capacity() <= 2 * SCAN_KEY_LIMIT);
        assert!(sc.worth_keeping());
        // A scan that gives up inside large objects (one in another) frees
        // their sets too.
        let inner = keys(1000, "");
        let repeated = keys(1000, &format!(r#""in":{inner},"k5":0"#));
        assert_eq!(
            scan_free_object(repeated.as_bytes(), 0, 0, TEST_LIMITS, &mut sc),
            None
        );
        assert!(sc.sets.is_empty() && sc.worth_keeping());
        let inner = keys(1000, r#""k7":"again""#);
        let repeated = keys(1000, &format!(r#""in":{inner}"#));
        assert_eq!(
            scan_free_object(repeated.as_bytes(), 0, 0, TEST_LIMITS, &mut sc),
            None
        );
        assert!(sc.sets.is_empty());
    }
}
