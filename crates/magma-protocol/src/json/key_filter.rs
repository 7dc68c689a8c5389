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

    /// `false` when `key` is certainly not among these keys (objects keep
    /// the [folded](KeyFilter::folded) filter; the tests check the scan's).
    #[cfg(test)]
    pub(crate) fn may_contain(self, key: &str) -> bool {
        self.covers(KeyFilter::of(key.as_bytes()))
    }
}

/// A [`KeyFilter`] folded into 32 bits (its two halves or'ed): what an
/// object kept as text stores, so that the object stays five words. Folding
/// keeps every bit a key set, so a key it rules out is still certainly not
/// there; it only rules out fewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FoldedKeyFilter(u32);

impl KeyFilter {
    /// This filter in 32 bits.
    #[inline]
    pub(crate) fn folded(self) -> FoldedKeyFilter {
        FoldedKeyFilter(self.0 as u32 | (self.0 >> 32) as u32)
    }
}

impl FoldedKeyFilter {
    /// Adds the keys behind `other`.
    #[inline]
    pub(crate) fn add(&mut self, other: KeyFilter) {
        self.0 |= other.folded().0;
    }

    /// `false` when `key` is certainly not among these keys.
    #[inline]
    pub(crate) fn may_contain(self, key: &str) -> bool {
        let k = KeyFilter::of(key.as_bytes()).folded().0;
        self.0 & k == k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folded_filter_never_rules_out_a_key_it_holds() {
        let keys: Vec<String> = (0..200)
            .map(|i| format!("key_{i}_{}", "x".repeat(i % 7)))
            .collect();
        for n in [1, 2, 8, 64, 200] {
            let mut full = KeyFilter::EMPTY;
            for k in &keys[..n] {
                full.add(KeyFilter::of(k.as_bytes()));
            }
            let mut folded = full.folded();
            assert!(keys[..n].iter().all(|k| folded.may_contain(k)), "{n} keys");
            // Adding to the folded filter is adding before folding.
            folded.add(KeyFilter::of(b"late"));
            full.add(KeyFilter::of(b"late"));
            assert_eq!(folded, full.folded());
            assert!(folded.may_contain("late"));
        }
        // Few keys rule out most others.
        let mut one = KeyFilter::EMPTY;
        one.add(KeyFilter::of(b"name"));
        let ruled_out = keys.iter().filter(|k| !one.folded().may_contain(k)).count();
        assert!(ruled_out > 150, "{ruled_out} of 200 ruled out");
    }
}
