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
    // The coaching corpus (`coaching-public.jsonl`), for the same reasons.
    "coaching.dup.key.shadow_*",
    "coaching.str.lone_surrogate*",
    "coaching.int.beyond_i64",
    "coaching.int.beyond_u64",
    "coaching.int.huge",
    "coaching.ref.big_ids",
    "coaching.int.digit_limit",
];

pub(crate) fn is_deviation(family: &str) -> bool {
    DEVIATIONS.iter().any(|d| match d.strip_suffix('*') {
        Some(prefix) => family.starts_with(prefix),
        None => family == *d,
    })
}

/// The coaching corpus of reference verdicts, `coaching-public.jsonl`:
/// `$MAGMA_COACHING_CORPUS`, else beside `$MAGMA_PUBLIC_CORPUS` (then it must
/// exist in either case: CI sets the latter and checks both), else
/// `shared/conformance/coaching-public.jsonl` beside the repository, else
/// `None`.
pub(crate) fn coaching_corpus(manifest_dir: &str) -> Option<PathBuf> {
    let required = if let Some(p) = std::env::var_os("MAGMA_COACHING_CORPUS") {
        Some(PathBuf::from(p))
    } else {
        std::env::var_os("MAGMA_PUBLIC_CORPUS")
            .map(|p| PathBuf::from(p).with_file_name("coaching-public.jsonl"))
    };
    if let Some(p) = required {
        assert!(
            p.is_file(),
            "{} is not a file: set MAGMA_COACHING_CORPUS to coaching-public.jsonl",
            p.display()
        );
        return Some(p);
    }
    let p = PathBuf::from(manifest_dir).join("../../../shared/conformance/coaching-public.jsonl");
    p.is_file().then_some(p)
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
