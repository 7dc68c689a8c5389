//! `llm-agent`: a MAGMA agent backed by a language model behind any
//! OpenAI-compatible chat completions endpoint (vLLM, llama.cpp's server,
//! Ollama, hosted providers). See this crate's README.
//!
//! ```sh
//! cargo run -p magma-llm-agent -- --base-url http://127.0.0.1:11434/v1 --model qwen2.5:7b
//! ```

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{CommandFactory, FromArgMatches, Parser};
use magma_server::cli::{AFTER_HELP, ServerArgs, run_with_loading, version_string};

mod agent;
mod coach;
mod export;
mod provider;

use agent::{LlmAgent, Settings};
use provider::{Provider, Reachability};

const DEFAULT_SYSTEM_PROMPT: &str = "You command the robots of a MAGMA scenario. Answer the \
     user in plain text, or act by calling the tools; every tool call names, in target_robot, \
     the robot that runs it. After a tool call you receive environment feedback: continue, \
     correct, or report to the user.";

/// A MAGMA agent backed by a language model behind an OpenAI-compatible chat
/// completions endpoint (vLLM, llama.cpp's server, Ollama, hosted providers).
///
/// Each candidate is one provider call; tools are offered as function tools
/// with a `target_robot` argument limited to `attributes.known_robots`;
/// `memory.memory_list` gives standing rules and `memory.history` the
/// conversation; `extra_keys.inference_mode: true` asks for deterministic
/// decoding. `/health` answers 503 until the provider answers `GET /models`.
///
/// `llm-agent export` runs the agent's dataset exporter instead (GEN's export examples as
/// JSON lines on standard input, results on standard output; `llm-agent export --help`).
#[derive(Debug, Parser)]
#[command(name = "llm-agent", after_help = AFTER_HELP)]
struct Cli {
    /// Base URL of the provider's OpenAI-compatible API, up to `/v1`
    #[arg(
        long,
        env = "OPENAI_BASE_URL",
        value_name = "URL",
        default_value = "http://127.0.0.1:8000/v1"
    )]
    base_url: String,

    /// The model to ask, as the provider names it
    #[arg(long, env = "OPENAI_MODEL", value_name = "NAME")]
    model: String,

    /// API key, sent as `Authorization: Bearer KEY` (local servers usually need none)
    #[arg(
        long,
        env = "OPENAI_API_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    api_key: Option<String>,

    /// Sampling temperature when `extra_keys.inference_mode` is not true
    #[arg(long, value_name = "T", default_value_t = 0.7)]
    temperature: f64,

    /// Most tokens per answer [default: the provider's]
    #[arg(long, value_name = "N")]
    max_tokens: Option<u32>,

    /// System prompt; the robots and the scenario's memory_list rules are appended
    #[arg(long, value_name = "TEXT", default_value = DEFAULT_SYSTEM_PROMPT, hide_default_value = true)]
    system_prompt: String,

    /// Provider calls running at once at most, across all requests
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,

    /// Seconds one provider attempt may take
    #[arg(long, value_name = "SECS", default_value_t = 90,
          value_parser = clap::value_parser!(u64).range(1..))]
    provider_timeout_secs: u64,

    /// Retries of a provider call after a transport error, 429 or 5xx
    #[arg(long, value_name = "N", default_value_t = 2)]
    max_retries: u32,

    /// First pause before a retry, doubled each time (at most 8 s; a Retry-After header wins)
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    retry_backoff_ms: u64,

    /// Seconds to wait at start for the provider to answer `GET /models` before giving up
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    ready_timeout_secs: u64,

    #[command(flatten)]
    server: ServerArgs,
}

#[allow(
    clippy::print_stderr,
    reason = "a command-line program reports to the terminal"
)]
fn main() -> ExitCode {
    // `llm-agent export`: the dataset exporter GEN's export runs, no provider.
    if let Some(args) = export::invocation() {
        return export::run(&args, DEFAULT_SYSTEM_PROMPT);
    }
    let command = Cli::command().version(version_string(env!("CARGO_PKG_VERSION")));
    let cli = Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit());
    let provider = match Provider::new(
        &cli.base_url,
        cli.api_key.as_deref(),
        Duration::from_secs(cli.provider_timeout_secs),
        cli.max_retries,
        Duration::from_millis(cli.retry_backoff_ms),
    ) {
        Ok(provider) => provider,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let settings = Settings {
        model: cli.model.clone(),
        system_prompt: cli.system_prompt,
        temperature: cli.temperature,
        max_tokens: cli.max_tokens,
    };
    let agent = LlmAgent::new(provider, settings, usize::from(cli.concurrency));
    let ready_timeout = Duration::from_secs(cli.ready_timeout_secs);
    let model = cli.model;
    run_with_loading(agent, cli.server, move |agent: Arc<LlmAgent>| {
        wait_for_provider(agent, model, ready_timeout)
    })
}

/// Start-up: `/health` answers 503 until the provider answers `GET /models`
/// (a local model server may still be loading its weights).
async fn wait_for_provider(
    agent: Arc<LlmAgent>,
    model: String,
    timeout: Duration,
) -> Result<(), String> {
    let started = Instant::now();
    let url = agent.provider().base_url().to_owned();
    tracing::info!("waiting for the provider at {url} (model {model})");
    let mut logged = false;
    loop {
        let probe = agent.provider().clone();
        let model_name = model.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = tx.send(probe.reachability(&model_name));
        });
        match rx.await {
            Ok(Reachability::Ready(note)) => {
                tracing::info!("provider at {url} answers: {note}");
                return Ok(());
            }
            Ok(Reachability::Refused(why)) => return Err(why),
            Ok(Reachability::NotYet(why)) => {
                if started.elapsed() >= timeout {
                    return Err(format!(
                        "the provider at {url} did not answer within {timeout:?}: {why}"
                    ));
                }
                if !logged {
                    tracing::warn!("provider at {url} not ready yet ({why}); retrying");
                    logged = true;
                }
            }
            Err(_) => return Err("the provider check ended without an answer".to_owned()),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
