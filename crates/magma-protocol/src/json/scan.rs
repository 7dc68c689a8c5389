//! The free-form scanner: checks a free-form object as validation would,
//! without building anything, so that a clean one can be kept as its text.

use super::KeyFilter;
use super::lex::{number_end, plain_run_end, ws_end};
use super::parse::Limits;

/// Buffers reused across the free-form scans of one document.
#[derive(Default)]
pub(crate) struct ScanBuffers {
    /// The open containers around the innermost one, `{` or `[`: the
    /// innermost is kept in a local of the scan.
    containers: Vec<u8>,
    /// Spans of the keys of the open objects, for duplicate checks.
    keys: Vec<(usize, usize)>,
    /// The open objects around the innermost one: where their keys start in
    /// `keys`, and the [`KeyFilter`] of their keys, so that most keys
    /// need no comparison.
    frames: Vec<(usize, KeyFilter)>,
}

impl ScanBuffers {
    /// Room for the usual free-form object (a few levels, a few dozen keys
    /// open at once), so that scanning one does not grow the buffers.
    pub(crate) fn with_room() -> ScanBuffers {
        ScanBuffers {
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
/// [`ScanBuffers::keys`], and the [`KeyFilter`] of its keys so far.
struct ScanFrame {
    from: usize,
    seen: KeyFilter,
}

/// Scans the object at `start` (a `{`) without building anything. Returns the
/// end of the object, and the [`KeyFilter`] of its keys, when it is
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
    };
    // The bounds of `level`, worked out once: a value inside more than
    // `free_form_depth` containers below the free-form object is refused by
    // validation, and a container may open only while the document stays
    // within `depth` (`depth_before + level + 1 <= depth`).
    let free_form_levels = limits.free_form_depth.saturating_add(1);
    let open_levels = limits.depth.saturating_sub(depth_before + 1);
    i = scan_key(src, i, &mut sc.keys, &mut frame)?;
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
    let filter = KeyFilter::of(key);
    let siblings = keys.get(frame.from..)?;
    if siblings.len() >= SCAN_KEY_LIMIT {
        return None;
    }
    // Only a key the filter may hold can repeat a sibling.
    if frame.seen.covers(filter) {
        let same = |&(a, b): &(usize, usize)| b - a == key.len() && &src[a..b] == key;
        if siblings.iter().any(same) {
            return None;
        }
    }
    frame.seen.add(filter);
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
