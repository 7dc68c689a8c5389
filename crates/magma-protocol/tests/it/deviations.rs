//! The deviation families and where the public corpus is: one list, shared
//! by the tests of magma-protocol and of magma-validator (which includes this
//! file with `#[path]`), so the two cannot drift apart.

use std::path::PathBuf;

/// The families where the project deliberately differs from the reference
/// (`docs/conformance.md`). Families are matched exactly or, when the entry
/// ends in `*`, by prefix.
pub(crate) const DEVIATIONS: &[&str] = &[
    "nonfinite.response_memory",
    "nonfinite.response_internal_steps",
    "nonfinite.exchange_response_memory",
    "dup.key.shadow_*",
    "str.lone_surrogate*",
    "int.beyond_i64",
    "int.beyond_u64",
    "int.huge",
    "dup.input_ids.big_distinct",
    "exchange.big_ids",
    "int.digit_limit",
];

pub(crate) fn is_deviation(family: &str) -> bool {
    DEVIATIONS.iter().any(|d| match d.strip_suffix('*') {
        Some(prefix) => family.starts_with(prefix),
        None => family == *d,
    })
}

/// The public corpus of reference verdicts: `$MAGMA_PUBLIC_CORPUS` (then it
/// must exist), else `shared/conformance/public.jsonl` beside the repository,
/// else `None`. `manifest_dir` is the calling crate's `CARGO_MANIFEST_DIR`.
pub(crate) fn public_corpus(manifest_dir: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MAGMA_PUBLIC_CORPUS") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "MAGMA_PUBLIC_CORPUS={} is not a file",
            p.display()
        );
        return Some(p);
    }
    let p = PathBuf::from(manifest_dir).join("../../../shared/conformance/public.jsonl");
    p.is_file().then_some(p)
}
