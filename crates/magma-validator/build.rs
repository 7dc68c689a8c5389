//! Whether the public corpora of reference verdicts are there, for the tests
//! only (this file is not in the published package, so users never run it).
//!
//! The corpora live beside the repository (`shared/conformance/`) or where
//! `MAGMA_PUBLIC_CORPUS` / `MAGMA_COACHING_CORPUS` point. When one is absent
//! and neither variable nor `CI=true` is set, its tests are compiled as
//! ignored, so that `cargo test` lists them as skipped, with the reason,
//! instead of `ok` having checked nothing. Under `CI=true`, or with a
//! variable set, they run, and a missing file fails them.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(public_corpus_missing)");
    println!("cargo::rustc-check-cfg=cfg(coaching_corpus_missing)");
    for var in ["MAGMA_PUBLIC_CORPUS", "MAGMA_COACHING_CORPUS", "CI"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let set = |var: &str| std::env::var_os(var).is_some_and(|v| !v.is_empty());
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let beside = Path::new(&manifest).join("../../../shared/conformance");
    if !ci && !set("MAGMA_PUBLIC_CORPUS") && !beside.join("public.jsonl").is_file() {
        println!("cargo::rustc-cfg=public_corpus_missing");
    }
    if !ci
        && !set("MAGMA_PUBLIC_CORPUS")
        && !set("MAGMA_COACHING_CORPUS")
        && !beside.join("coaching-public.jsonl").is_file()
    {
        println!("cargo::rustc-cfg=coaching_corpus_missing");
    }
}
