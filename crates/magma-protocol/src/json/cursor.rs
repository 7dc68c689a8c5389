//! [`Cursor`]: the parser's pieces for direct readers.
//!
//! A direct reader reads one usual shape of document straight into typed
//! values and gives up (`None`) at the first thing it does not expect; its
//! caller then takes the exact path (parse, then validate). The cursor
//! gives it the parser's own string decoding, number delimiting and
//! free-form scan, so that what it reads is what the parser would read.

use std::cell::Cell;

use super::Object;
use super::lex::{Limits, number_end, ws_end};
use super::parse::Parser;
use super::scan::{ScanBuffers, scan_free_object};
use super::shared_text::TextChunks;
use std::borrow::Cow;

thread_local! {
    /// The scan buffers of the last document read on this thread: a server
    /// reads one request after another, and need not allocate them each
    /// time.
    static SCRATCH: Cell<Option<ScanBuffers>> = const { Cell::new(None) };
}

/// A position in a document being read directly.
pub(crate) struct Cursor<'a> {
    p: Parser<'a>,
    src: &'a [u8],
    text: &'a str,
    limits: Limits,
    scratch: ScanBuffers,
    /// The copies of the document's text its small free-form objects share.
    chunks: TextChunks,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `src`; `None` when it is not UTF-8 or
    /// starts with a byte-order mark (the parser refuses both).
    pub(crate) fn new(src: &'a [u8], limits: Limits) -> Option<Cursor<'a>> {
        if src.starts_with("\u{feff}".as_bytes()) {
            return None;
        }
        let text = std::str::from_utf8(src).ok()?;
        Some(Cursor {
            p: Parser::new(src, text, limits),
            src,
            text,
            limits,
            scratch: SCRATCH.take().unwrap_or_else(ScanBuffers::with_room),
            chunks: TextChunks::default(),
        })
    }

    /// How far into the document the cursor is, in bytes.
    pub(crate) fn position(&self) -> usize {
        self.p.pos()
    }

    /// How many bytes of the document are left to read.
    pub(crate) fn remaining(&self) -> usize {
        self.src.len().saturating_sub(self.p.pos())
    }

    /// `true` when only whitespace is left.
    pub(crate) fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.p.pos() == self.src.len()
    }

    #[inline]
    fn skip_ws(&mut self) {
        self.p.set_pos(ws_end(self.src, self.p.pos()));
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.src.get(self.p.pos()).copied()
    }

    /// Skips whitespace, then consumes `b` if it is next.
    #[inline]
    pub(crate) fn eat(&mut self, b: u8) -> bool {
        self.skip_ws();
        if self.peek() == Some(b) {
            self.p.set_pos(self.p.pos() + 1);
            true
        } else {
            false
        }
    }

    /// Whitespace, a key without escapes that is one of `names`, whitespace
    /// and `:`. Returns the key's index in `names`. The names hold no `"`
    /// and no `\`, so a key that matches one of them and closes right
    /// after it is exactly that name, unescaped; any other key (unknown,
    /// escaped) is `None`.
    #[inline]
    fn key(&mut self, names: &[&str]) -> Option<usize> {
        self.skip_ws();
        let rest = self.src.get(self.p.pos()..)?;
        if rest.first() != Some(&b'"') {
            return None;
        }
        for (i, name) in names.iter().enumerate() {
            let n = name.len();
            // The closing quote first: it rules out most names in one byte.
            if rest.get(n + 1) == Some(&b'"') && rest.get(1..=n) == Some(name.as_bytes()) {
                self.p.set_pos(self.p.pos() + n + 2);
                return self.eat(b':').then_some(i);
            }
        }
        None
    }

    /// An object whose keys are among `names` (at most 32), each at most
    /// once; `member` reads the value of the key with the given index.
    #[inline]
    pub(crate) fn object(
        &mut self,
        names: &[&str],
        mut member: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        if !self.eat(b'{') {
            return None;
        }
        if self.eat(b'}') {
            return Some(());
        }
        let mut seen = 0u32;
        loop {
            let i = self.key(names)?;
            let bit = 1u32.checked_shl(u32::try_from(i).ok()?)?;
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            member(self, i)?;
            self.skip_ws();
            match self.peek()? {
                b',' => self.p.set_pos(self.p.pos() + 1),
                b'}' => {
                    self.p.set_pos(self.p.pos() + 1);
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array; `element` reads each element.
    #[inline]
    pub(crate) fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if !self.eat(b'[') {
            return None;
        }
        if self.eat(b']') {
            return Some(());
        }
        loop {
            element(self)?;
            self.skip_ws();
            match self.peek()? {
                b',' => self.p.set_pos(self.p.pos() + 1),
                b']' => {
                    self.p.set_pos(self.p.pos() + 1);
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string, decoded by the parser.
    #[inline]
    pub(crate) fn string(&mut self) -> Option<String> {
        self.string_cow().map(Cow::into_owned)
    }

    /// A string: borrowed from the document when it holds no escape,
    /// decoded by the parser otherwise. For values that keep short text
    /// without allocating (`NonEmptyString`). Always inlined, as the
    /// parser's fast path is: a string handed back through memory cost
    /// each name of a GEN decision a wait (a wide load of bytes the callee
    /// had just stored in narrower pieces cannot take them from the pending
    /// stores).
    #[inline(always)]
    pub(crate) fn string_cow(&mut self) -> Option<Cow<'a, str>> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return None;
        }
        self.p.string_cow().ok()
    }

    /// A string that is one of `names`; returns its index. Plain spellings
    /// are compared in place, escaped ones (`"\u0075ser"`) decoded first.
    #[inline]
    pub(crate) fn literal(&mut self, names: &[&str]) -> Option<usize> {
        self.skip_ws();
        let rest = self.src.get(self.p.pos()..)?;
        for (i, name) in names.iter().enumerate() {
            let n = name.len();
            if rest.first() == Some(&b'"')
                && rest.get(n + 1) == Some(&b'"')
                && rest.get(1..=n) == Some(name.as_bytes())
            {
                self.p.set_pos(self.p.pos() + n + 2);
                return Some(i);
            }
        }
        let decoded = self.string()?;
        names.iter().position(|name| *name == decoded)
    }

    /// Skips whitespace, then consumes `null` if it is next. What follows it
    /// is left to the enclosing object or array, which accepts only `,` or
    /// a closing bracket after whitespace (so `nullx` fails there).
    #[inline]
    pub(crate) fn null(&mut self) -> bool {
        self.skip_ws();
        let pos = self.p.pos();
        if self.src.get(pos..pos + 4) == Some(b"null") {
            self.p.set_pos(pos + 4);
            true
        } else {
            false
        }
    }

    /// An integer lexeme (no fraction, no exponent). What follows it is left
    /// to the enclosing object, which accepts only `,` or `}` after
    /// whitespace: anything else (`01`, `1.`, `1e`) fails there too.
    #[inline]
    pub(crate) fn integer(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let start = self.p.pos();
        let end = number_end(self.src, start)?;
        let lexeme = self.text.get(start..end)?;
        if lexeme.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')) {
            return None;
        }
        self.p.set_pos(end);
        Some(lexeme)
    }

    /// A free-form object that the parser would keep as validated text at
    /// this position (`depth_before` open containers).
    ///
    /// Never inlined: its nine callers in the direct readers share one copy.
    /// Inlined into each, it made a coaching step's reader so large
    /// that a step and the input reader around it no longer fit in the
    /// instruction cache together; out of line, the 50-step coaching
    /// request parses about 0.5% nearer the inference request's speed
    /// relative to `IgnoredAny`, and a body of 1,000 steps around tiny
    /// inputs 2-3% further from it (where a step is small, the call shows
    /// and the cache does not).
    #[inline(never)]
    pub(crate) fn free_object(&mut self, depth_before: usize) -> Option<Object> {
        self.skip_ws();
        if self.peek() != Some(b'{') {
            return None;
        }
        let start = self.p.pos();
        let (end, keys) = scan_free_object(
            self.src,
            start,
            depth_before,
            self.limits,
            &mut self.scratch,
        )?;
        if self.text.get(start..end)? == "{}" {
            // Common (`extra_keys`, `memory`), and kept as an empty map.
            self.p.set_pos(end);
            return Some(Object::new());
        }
        let text = self.chunks.keep(self.text, start..end, keys)?;
        self.p.set_pos(end);
        Some(Object::from_kept_text(text))
    }
}

impl Drop for Cursor<'_> {
    /// Keeps the scan buffers for the next document, unless a large one
    /// grew them past the usual size.
    fn drop(&mut self) {
        if self.scratch.worth_keeping() {
            SCRATCH.set(Some(std::mem::take(&mut self.scratch)));
        }
    }
}
