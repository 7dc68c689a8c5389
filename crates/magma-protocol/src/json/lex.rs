//! Lexing: the byte-level pieces every reader of this layer shares
//! (whitespace, plain string runs, number lexemes, skipping a value of
//! validated text), and the types they share: the [`Limits`] a reading
//! applies and [`PResult`], a syntax error's offset and message.

/// The limits a reading applies: the caller names them (the crate's
/// `limits.rs`); this layer only applies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The deepest container nesting of a document; deeper is a syntax error.
    pub(crate) depth: usize,
    /// How many containers may enclose a value below a free-form object;
    /// a free-form object nested deeper is not kept as text.
    pub(crate) free_form_depth: usize,
}

impl Limits {
    /// No limit: for text that was validated before it was kept.
    pub(crate) const NONE: Limits = Limits {
        depth: usize::MAX,
        free_form_depth: usize::MAX,
    };
}

/// A reader's result: the value, or where the syntax error lies and what it is.
pub(crate) type PResult<T> = Result<T, (usize, &'static str)>;

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

/// The character of a one-letter escape (`\n`, `\"`, ...) after its
/// backslash; `None` for `u` and for what JSON does not allow. The parser
/// and the normal-text writer (`normal.rs`) decode escapes alike.
#[inline]
pub(crate) fn short_escape(b: u8) -> Option<char> {
    Some(match b {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

/// The value of the four hex digits of a `\uXXXX` escape at `at` in `src`
/// (after its `\u`); `None` unless all four are there and hex.
#[inline]
pub(crate) fn hex4(src: &[u8], at: usize) -> Option<u32> {
    src.get(at..at.checked_add(4)?)?
        .iter()
        .try_fold(0u32, |v, &c| Some(v * 16 + (c as char).to_digit(16)?))
}

/// The character of the UTF-16 surrogate pair `hi`, `lo` (checked by the
/// caller to be a high and a low surrogate).
pub(crate) fn surrogate_pair(hi: u32, lo: u32) -> Option<char> {
    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
}

/// `true` if `text` is exactly one JSON number lexeme.
pub(crate) fn is_number_lexeme(text: &[u8]) -> bool {
    number_end(text, 0) == Some(text.len())
}

/// Where the string content at `i` ends: its closing quote, a raw control
/// character or the end of `src`. An escape is skipped as a backslash and the
/// byte after it (the rest of a `\uXXXX` is plain), without checking it: this
/// sizes a buffer, and skips strings in validated text.
#[inline]
pub(crate) fn escaped_string_end(src: &[u8], mut i: usize) -> usize {
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

/// The content of a string of validated text, alone in `text`, if it has
/// no escapes: it reads as it is written.
pub(crate) fn plain_string(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let last = b.len().checked_sub(1)?;
    (b.first() == Some(&b'"') && plain_run_end(b, 1) == last).then(|| &text[1..last])
}

/// The end of the value at `i` in text known to be valid JSON: strings and
/// containers are skipped without checking them again.
pub(crate) fn skip_validated_value(src: &[u8], i: usize) -> Option<usize> {
    // A string, and a compact list of strings (names, tags: what a lookup
    // of a later key skips most), without the general loop's steps.
    match src.get(i)? {
        b'"' => {
            let end = escaped_string_end(src, i + 1);
            return (src.get(end) == Some(&b'"')).then_some(end + 1);
        }
        b'[' => {
            if let Some(end) = skip_string_list(src, i) {
                return Some(end);
            }
        }
        _ => {}
    }
    skip_any_value(src, i)
}

/// The end of the compact list of strings at `i` (its `[`) in validated
/// text; `None` for any other value, which the general loop skips.
#[inline]
fn skip_string_list(src: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        if src.get(j) != Some(&b'"') {
            return None;
        }
        j = escaped_string_end(src, j + 1);
        if src.get(j) != Some(&b'"') {
            return None;
        }
        match src.get(j + 1)? {
            b',' => j += 2,
            b']' => return Some(j + 2),
            _ => return None,
        }
    }
}

/// [`skip_validated_value`] for any value.
fn skip_any_value(src: &[u8], mut i: usize) -> Option<usize> {
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
