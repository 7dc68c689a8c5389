//! `magma-server`: serves the bundled deterministic demo agent.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use magma_server::Agent;
use magma_server::cli::{ServerArgs, run_with, version_string};
use magma_server::demo::DemoAgent;

/// Serves the bundled deterministic demo agent (MAGMA Agent HTTP Contract, protocol 2.0).
///
/// `user` instructions are echoed; `env` instructions with tools and
/// `attributes.known_robots` call the first tool on the first robot; memory comes back with
/// every key kept plus a `steps` counter; content `__error__` gives an error candidate;
/// `extra_keys.delay_ms` (0 to 60000) imitates model latency. Coaching is on unless
/// `--no-coaching`: `extra_keys.coaching` payloads (`replace_say`, `replace_decision`) are
/// applied, and a demo coach answers `failure`, `suboptimal` and `format` requests on
/// `/v1/coaching` (`additional_info.delay_ms` imitates a slow coach).
///
/// `magma-server export` runs the demo agent's dataset exporter instead of serving: GEN's
/// export examples as JSON lines on standard input, results on standard output
/// (`magma-server export --help`).
#[derive(Debug, clap::Parser)]
#[command(name = "magma-server", after_help = magma_server::cli::AFTER_HELP)]
struct Cli {
    #[command(flatten)]
    server: ServerArgs,
    /// Serve the demo agent without coaching: `/v1/info` advertises none, `extra_keys.coaching`
    /// is ignored and `POST /v1/coaching` answers 503.
    #[arg(env = "MAGMA_SERVER_NO_COACHING", long)]
    no_coaching: bool,
}

// With the `mimalloc` feature: the request path allocates many small
// values on every worker thread, where mimalloc's per-thread heaps beat the
// system allocator (measured in docs/performance.md). mimalloc is linked in
// its override mode (the `malloc` family of the whole process is
// mimalloc's) and Rust allocates through the system allocator, that is
// through `malloc`: `mimalloc::MiMalloc` calls mimalloc's aligned entry
// point for every allocation, which over-allocates each block above 1 KiB
// whose size is not a power of two and marks its page as holding interior
// pointers.
#[cfg(feature = "mimalloc")]
use mimalloc as _;

fn main() -> ExitCode {
    // `magma-server export`: the demo agent's dataset exporter, no server.
    let demo = DemoAgent::new();
    if let Some(args) = magma_server::cli::export_invocation(&demo.info()) {
        return magma_server::cli::run_export(&demo, &args);
    }
    // `--version` says which features this build has (TLS, allocator).
    let command = Cli::command().version(version_string(env!("CARGO_PKG_VERSION")));
    let cli = command
        .clone()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
        .unwrap_or_else(|e| magma_server::cli::exit_on_error(&command, e));
    let agent = match cli.no_coaching {
        true => DemoAgent::new().without_coaching(),
        false => DemoAgent::new(),
    };
    run_with(agent, cli.server)
}
