//! Whether `redis-server` is there, for the tests of the shared coaching
//! store only (this file is not in the published package, so users never
//! run it).
//!
//! The tests start their own `redis-server` (Debian's package; `.ci/run`
//! installs it). When it is not found (`$MAGMA_REDIS_SERVER`, else `PATH`)
//! and `CI=true` is not set, those tests are built as ignored, so that
//! `cargo test` lists them as skipped with the reason instead of `ok` having
//! checked nothing. Under `CI=true` they run, and a missing binary fails them.
//! Installed later? `cargo clean -p magma-rs-server` (or set
//! `MAGMA_REDIS_SERVER`) to look again.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(redis_server_missing)");
    for var in ["MAGMA_REDIS_SERVER", "CI"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let named = std::env::var_os("MAGMA_REDIS_SERVER").is_some_and(|v| !v.is_empty());
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join("redis-server").is_file()));
    if !ci && !named && !on_path {
        println!("cargo::rustc-cfg=redis_server_missing");
    }
}
