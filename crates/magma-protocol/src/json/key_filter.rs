//! [`KeyFilter`]: which keys an object may hold, in 64 bits.

/// A filter of the top-level keys of an object: each key sets two of 64
/// bits, from its length and its first and last bytes. A key whose bits are
/// not all set is certainly not in the object; one whose bits are set may
/// be. Lookups of missing keys and duplicate checks answer most questions
/// from it without comparing keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyFilter(u64);

impl KeyFilter {
    /// No key.
    pub(crate) const EMPTY: KeyFilter = KeyFilter(0);

    /// Keys not known: every key may be there.
    pub(crate) const ANY: KeyFilter = KeyFilter(u64::MAX);

    /// The filter of one key. Always inlined: the free-form scan computes
    /// one per key, and the call cost about a third of the work.
    #[inline(always)]
    pub(crate) fn of(key: &[u8]) -> KeyFilter {
        let first = key.first().copied().unwrap_or(0);
        let last = key.last().copied().unwrap_or(0);
        let mixed = (key.len() as u64 | u64::from(first) << 32 | u64::from(last) << 40)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        KeyFilter(1 << (mixed >> 58) | 1 << ((mixed >> 52) & 63))
    }

    /// Adds the keys behind `other`.
    #[inline]
    pub(crate) fn add(&mut self, other: KeyFilter) {
        self.0 |= other.0;
    }

    /// `true` when every key behind `other` may be among these keys.
    #[inline]
    pub(crate) fn covers(self, other: KeyFilter) -> bool {
        self.0 & other.0 == other.0
    }

    /// `false` when `key` is certainly not among these keys.
    #[inline]
    pub(crate) fn may_contain(self, key: &str) -> bool {
        self.covers(KeyFilter::of(key.as_bytes()))
    }
}
