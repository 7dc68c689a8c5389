//! `magma-validate`: checks documents, exchanges and live agents against the
//! MAGMA Agent HTTP Contract (protocol 2.0).
#![allow(clippy::print_stdout, clippy::print_stderr)] // a CLI prints its results

use std::ffi::OsStr;
use std::io::{self, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use magma_validator::magma_protocol::routes::Endpoint;
use magma_validator::probe::{self, ProbeConfig, ProbeReport, Progress};
use magma_validator::proxy;
use magma_validator::render::{self, Format};
use magma_validator::{
    DocumentKind, Report, check_coaching_exchange, check_document, check_exchange, run_batch,
};

const AFTER_HELP: &str = "\
Exit status: 0 conformant (warnings allowed), 1 findings (a contract error or a failed
probe check), 2 usage or I/O error, or a probe stopped before a verdict (an agent that
cannot be reached, refuses the TLS handshake, is not ready within --ready-timeout, or a
wrong base URL); probe still writes its JSON or JUnit document then. `batch` exits 0 once
every line has its verdict. Every check and lint is described in docs/validator.md.";

/// Checks documents, exchanges and live agents against the MAGMA Agent HTTP Contract
/// (protocol 2.0), and says which consumer (BENCH, GEN) would break and how.
#[derive(Debug, Parser)]
#[command(name = "magma-validate", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check one document: every contract error at once, plus lints (warnings)
    Check {
        /// What the document is
        #[arg(long, value_parser = KindParser)]
        kind: DocumentKind,
        /// With --kind response: the request it answers, for the candidate sequence and the
        /// lints that need it (unknown tool or robot, memory_list dropped); with --kind
        /// coaching_response: the coaching request it answers (validate_request)
        #[arg(long, value_name = "FILE")]
        request: Option<PathBuf>,
        /// Output format
        #[arg(long, value_enum, default_value_t = FormatArg::Human)]
        format: FormatArg,
        /// The document, or - for standard input
        #[arg(value_name = "FILE|-")]
        file: PathBuf,
    },
    /// Check a request and its response together: both documents, the candidate sequence
    /// (where it first differs) and the lints that need both
    Exchange {
        /// The request (POST /v1/responses body), or - for standard input
        #[arg(long, value_name = "FILE")]
        request: PathBuf,
        /// The response, or - for standard input
        #[arg(long, value_name = "FILE")]
        response: PathBuf,
        /// The pair is a coaching request (POST /v1/coaching body) and its reply: both
        /// documents, then whether the reply answers the request (validate_request)
        #[arg(long)]
        coaching: bool,
        /// Output format
        #[arg(long, value_enum, default_value_t = FormatArg::Human)]
        format: FormatArg,
    },
    /// Read JSON Lines cases {"kind","doc","request"?} on stdin; print one
    /// {"verdict":"accept"|"reject","reason":"..."} line per input line, in order
    Batch,
    /// Run the conformance suite against a live agent
    Probe {
        /// The agent's base URL, e.g. http://127.0.0.1:8888 or https://host/prefix
        url: String,
        /// PEM file of CA certificates to trust for https (self-signed or private CA)
        #[arg(long, value_name = "PEM")]
        cacert: Option<PathBuf>,
        /// Seconds one call may take
        #[arg(long, value_name = "S", default_value = "60", value_parser = seconds)]
        timeout: Duration,
        /// Seconds the whole run may take, the wait for readiness included; checks not run by
        /// then fail with code deadline [default: 10 x --timeout]
        #[arg(long, value_name = "S", value_parser = seconds)]
        deadline: Option<Duration>,
        /// Seconds to wait for GET /health to answer 200 (connection refused or 503) before
        /// the health check fails
        #[arg(long, value_name = "S", default_value = "30", value_parser = seconds)]
        ready_timeout: Duration,
        /// Approximate size of the large request, in bytes
        #[arg(long, value_name = "N", default_value_t = 1 << 20)]
        large_request_bytes: usize,
        /// Largest answer body read, in bytes; a larger one fails its check (body_too_large)
        #[arg(long, value_name = "N", default_value_t = magma_client::DEFAULT_MAX_RESPONSE_BYTES)]
        max_response_bytes: u64,
        /// Steps of the memory round trip (at least 2)
        #[arg(long, value_name = "N", default_value_t = 4,
              value_parser = clap::value_parser!(u16).range(2..))]
        memory_steps: u16,
        /// An input that makes the agent think a while, for the concurrency checks: one
        /// AgentInput as JSON, or @FILE [default: extra_keys.delay_ms, else large requests]
        #[arg(long, value_name = "JSON|@FILE", value_parser = slow_input_arg)]
        slow_input: Option<magma_protocol::AgentInput>,
        /// Output format
        #[arg(long, value_enum, default_value_t = FormatArg::Human)]
        format: FormatArg,
        /// Write the report (in --format) to FILE, and the human report to standard output
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        /// Warnings count as failures (exit 1), except checks softened with --warn
        #[arg(long)]
        strict: bool,
        /// Do not run the check CHECK (repeatable); the report lists it as waived
        #[arg(long, value_name = "CHECK")]
        skip: Vec<String>,
        /// Count the faults of check CHECK as warnings (repeatable); the report lists it
        #[arg(long, value_name = "CHECK")]
        warn: Vec<String>,
        /// Send this header with every call (repeatable), e.g. 'Authorization: Bearer ...'
        #[arg(long, short = 'H', value_name = "NAME: VALUE", value_parser = header_arg)]
        header: Vec<(String, String)>,
        /// PEM client certificate (chain, leaf first) for agents behind mutual TLS
        #[arg(long, value_name = "PEM", requires = "key")]
        cert: Option<PathBuf>,
        /// PEM private key of --cert
        #[arg(long, value_name = "PEM", requires = "cert")]
        key: Option<PathBuf>,
        /// Progress lines on standard error while the probe waits and as each check ends
        #[arg(long, value_enum, default_value_t = ProgressArg::Auto)]
        progress: ProgressArg,
    },
    /// Stand between a consumer (BENCH, GEN) and an agent: forward every exchange unchanged,
    /// check each one, print a line per finding, and a summary at SIGINT, SIGTERM or --duration
    Proxy {
        /// The agent's base URL, e.g. http://127.0.0.1:8888 or https://host/prefix
        #[arg(long, value_name = "URL")]
        upstream: String,
        /// The address to listen on; the consumer is pointed at it (port 0 picks a free one)
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8890")]
        listen: String,
        /// PEM file of CA certificates to trust for an https upstream
        #[arg(long, value_name = "PEM")]
        cacert: Option<PathBuf>,
        /// PEM client certificate (chain, leaf first) for an upstream behind mutual TLS
        #[arg(long, value_name = "PEM", requires = "key")]
        cert: Option<PathBuf>,
        /// PEM private key of --cert
        #[arg(long, value_name = "PEM", requires = "cert")]
        key: Option<PathBuf>,
        /// PEM certificate chain: listen with HTTPS (with --tls-key)
        #[arg(long, value_name = "PEM", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// PEM private key of --tls-cert
        #[arg(long, value_name = "PEM", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Seconds one upstream call may take, its wait for a call thread included (then 504
        /// with a JSON detail)
        #[arg(long, value_name = "S", default_value = "360", value_parser = seconds)]
        timeout: Duration,
        /// Upstream calls under way at once (the proxy's call threads); further requests wait
        #[arg(long, value_name = "N", default_value_t = magma_validator::proxy::DEFAULT_MAX_CONCURRENT_CALLS)]
        max_concurrent_calls: usize,
        /// Requests that wait for a call thread; past them, 503 with a JSON detail
        #[arg(long, value_name = "N", default_value_t = magma_validator::proxy::DEFAULT_MAX_QUEUED_CALLS)]
        max_queued_calls: usize,
        /// Largest request body forwarded, in bytes (larger: 413), as magma-server's default
        #[arg(long, value_name = "N", default_value_t = magma_validator::proxy::DEFAULT_MAX_BODY_BYTES)]
        max_body_bytes: u64,
        /// Largest answer body read from the agent, in bytes (larger: 502)
        #[arg(long, value_name = "N", default_value_t = magma_client::DEFAULT_MAX_RESPONSE_BYTES)]
        max_response_bytes: u64,
        /// Memory budget of the bodies held at once, each counted twice (bytes and parse), as
        /// magma-server's; a request reserves for itself and its answer, and gets 503 if that
        /// finds no room within 1 s (at least 4 x --max-body-bytes)
        #[arg(long, value_name = "N", default_value_t = magma_validator::proxy::DEFAULT_MAX_TOTAL_BODY_BYTES)]
        max_total_body_bytes: u64,
        /// Write every exchange as a JSON line (a case of `batch`, with status, timing, findings)
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// Bodies over this size are recorded by SHA-256 digest
        #[arg(long, value_name = "N", default_value_t = magma_validator::proxy::DEFAULT_RECORD_BODY_LIMIT)]
        record_body_limit: usize,
        /// A memory key whose value is written as `"[redacted]"` in the recording (repeatable)
        #[arg(long, value_name = "KEY")]
        redact: Vec<String>,
        /// Stop after S seconds (otherwise at SIGINT or SIGTERM)
        #[arg(long, value_name = "S", value_parser = seconds)]
        duration: Option<Duration>,
        /// Serve the counters for Prometheus at GET /metrics on this address (plain HTTP, a
        /// listener of its own; port 0 picks a free one)
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<String>,
        /// Format of the summary
        #[arg(long, value_enum, default_value_t = FormatArg::Human)]
        format: FormatArg,
        /// Write the summary (in --format) to FILE, and the human summary to standard output
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Send the requests of a `proxy --record` file to an agent; report its contract findings
    /// and how its decisions differ from the recorded ones
    Replay {
        /// The recording
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// The agent's base URL
        #[arg(long, value_name = "URL")]
        agent: String,
        /// PEM file of CA certificates to trust for https
        #[arg(long, value_name = "PEM")]
        cacert: Option<PathBuf>,
        /// PEM client certificate for mutual TLS
        #[arg(long, value_name = "PEM", requires = "key")]
        cert: Option<PathBuf>,
        /// PEM private key of --cert
        #[arg(long, value_name = "PEM", requires = "cert")]
        key: Option<PathBuf>,
        /// Seconds one call may take
        #[arg(long, value_name = "S", default_value = "360", value_parser = seconds)]
        timeout: Duration,
        /// Output format (human or json)
        #[arg(long, value_enum, default_value_t = FormatArg::Human)]
        format: FormatArg,
    },
}

/// When to print progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProgressArg {
    /// When standard error is a terminal
    Auto,
    /// Always
    Always,
    /// Never
    Never,
}

fn slow_input_arg(s: &str) -> Result<magma_protocol::AgentInput, String> {
    let text = match s.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?,
        None => s.to_owned(),
    };
    probe::parse_slow_input(&text)
}

fn header_arg(s: &str) -> Result<(String, String), String> {
    let Some((name, value)) = s.split_once(':') else {
        return Err(format!("{s:?} is not NAME: VALUE"));
    };
    probe::validate_header(name, value)?;
    Ok((name.trim().to_owned(), value.trim().to_owned()))
}

/// `--kind`: a document kind of magma-protocol's registry by its name, the
/// name `batch` uses (`coaching_request`); `-` works for `_` too.
#[derive(Debug, Clone, Copy)]
struct KindParser;

impl TypedValueParser for KindParser {
    type Value = DocumentKind;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<DocumentKind, clap::Error> {
        let name = value.to_str().map(|v| v.replace('-', "_"));
        if let Some(kind) = name.and_then(|n| n.parse().ok()) {
            return Ok(kind);
        }
        // Anything else gets clap's message, which lists the kinds.
        let names = PossibleValuesParser::new(DocumentKind::ALL.map(DocumentKind::name));
        let name = names.parse_ref(cmd, arg, value)?;
        name.parse()
            .map_err(|e| clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{e}\n")))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        let kinds = DocumentKind::ALL.into_iter();
        Some(Box::new(kinds.map(|k| PossibleValue::new(k.name()))))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FormatArg {
    Human,
    Json,
    Junit,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Human => Format::Human,
            FormatArg::Json => Format::Json,
            FormatArg::Junit => Format::Junit,
        }
    }
}

fn seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        return Err("must be greater than 0 and at most 86400".to_owned());
    }
    Ok(Duration::from_secs_f64(v))
}

/// A failure that ends the program with exit code 2.
struct Fatal(String);

fn read_input(path: &Path) -> Result<Vec<u8>, Fatal> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        io::stdin()
            .lock()
            .read_to_end(&mut buf)
            .map_err(|e| Fatal(format!("cannot read standard input: {e}")))?;
        return Ok(buf);
    }
    std::fs::read(path).map_err(|e| Fatal(format!("cannot read {}: {e}", path.display())))
}

fn source_name(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    }
}

fn emit(text: &str) -> Result<(), Fatal> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Fatal(format!("cannot write the output: {e}")))
}

fn emit_report(report: &Report, command: &str, source: &str, format: Format) -> Result<u8, Fatal> {
    let text = match format {
        Format::Human => render::report_human(report, source),
        Format::Json => render::report_json(report, command, source),
        Format::Junit => render::report_junit(report, command, source),
    };
    emit(&text)?;
    Ok(u8::from(!report.is_conformant()))
}

fn run(cli: Cli) -> Result<u8, Fatal> {
    match cli.command {
        Command::Check {
            kind,
            request,
            format,
            file,
        } => {
            if let Some(req_path) = &request {
                if !matches!(
                    kind,
                    DocumentKind::Response | DocumentKind::CoachingResponse
                ) {
                    return Err(Fatal(
                        "--request goes with --kind response or coaching_response only".to_owned(),
                    ));
                }
                if file.as_os_str() == "-" && req_path.as_os_str() == "-" {
                    return Err(Fatal(
                        "only one of the documents can come from standard input".to_owned(),
                    ));
                }
            }
            let doc = read_input(&file)?;
            let report = match request {
                Some(req_path) if kind == DocumentKind::CoachingResponse => {
                    check_coaching_exchange(&read_input(&req_path)?, &doc)
                }
                Some(req_path) => check_exchange(&read_input(&req_path)?, &doc),
                None => check_document(kind, &doc),
            };
            emit_report(&report, "check", &source_name(&file), format.into())
        }
        Command::Exchange {
            request,
            response,
            coaching,
            format,
        } => {
            if request.as_os_str() == "-" && response.as_os_str() == "-" {
                return Err(Fatal(
                    "only one of the documents can come from standard input".to_owned(),
                ));
            }
            let req = read_input(&request)?;
            let resp = read_input(&response)?;
            let report = if coaching {
                check_coaching_exchange(&req, &resp)
            } else {
                check_exchange(&req, &resp)
            };
            let source = format!("{} + {}", source_name(&request), source_name(&response));
            emit_report(&report, "exchange", &source, format.into())
        }
        Command::Batch => {
            let input = BufReader::with_capacity(1 << 20, io::stdin().lock());
            let output = BufWriter::with_capacity(1 << 16, io::stdout().lock());
            run_batch(input, output).map_err(|e| Fatal(format!("batch: {e}")))?;
            Ok(0)
        }
        Command::Probe {
            url,
            cacert,
            timeout,
            deadline,
            ready_timeout,
            large_request_bytes,
            max_response_bytes,
            memory_steps,
            slow_input,
            format,
            output,
            strict,
            skip,
            warn,
            header,
            cert,
            key,
            progress,
        } => {
            let mut config = ProbeConfig::new(url)
                .timeout(timeout)
                .ready_timeout(ready_timeout)
                .large_request_bytes(large_request_bytes)
                .max_response_bytes(max_response_bytes)
                .memory_steps(usize::from(memory_steps))
                .strict(strict);
            config.deadline = deadline;
            config.slow_input = slow_input;
            config.skip = skip;
            config.warn = warn;
            config.headers = header;
            if let Some(ca) = cacert {
                config = config.cacert(ca);
            }
            if let (Some(cert), Some(key)) = (cert, key) {
                config = config.client_identity(cert, key);
            }
            let show = match progress {
                ProgressArg::Always => true,
                ProgressArg::Never => false,
                ProgressArg::Auto => io::stderr().is_terminal(),
            };
            let base = config.url.trim_end_matches('/').to_owned();
            let mut on_progress = |p: Progress<'_>| {
                if show {
                    print_progress(&base, p);
                }
            };
            let report = match probe::run_with_progress(&config, &mut on_progress) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("magma-validate: {e}");
                    ProbeReport::stopped(&config, &e)
                }
            };
            let format = Format::from(format);
            let text = match format {
                Format::Human => render::probe_human(&report),
                Format::Json => render::probe_json(&report),
                Format::Junit => render::probe_junit(&report),
            };
            match &output {
                Some(path) => {
                    std::fs::write(path, &text).map_err(|e| {
                        Fatal(format!(
                            "cannot write the report to {}: {e}",
                            path.display()
                        ))
                    })?;
                    emit(&render::probe_human(&report))?;
                }
                // The reason is on standard error already.
                None if format == Format::Human && report.stopped.is_some() => {}
                None => emit(&text)?,
            }
            Ok(report.exit_code())
        }
        Command::Proxy {
            upstream,
            listen,
            cacert,
            cert,
            key,
            tls_cert,
            tls_key,
            timeout,
            max_concurrent_calls,
            max_queued_calls,
            max_body_bytes,
            max_response_bytes,
            max_total_body_bytes,
            record,
            record_body_limit,
            redact,
            duration,
            metrics_listen,
            format,
            output,
        } => {
            let mut config = proxy::ProxyConfig::new(upstream, listen);
            config.metrics_listen = metrics_listen;
            config.cacert = cacert;
            config.client_identity = cert.zip(key);
            config.tls = tls_cert.zip(tls_key);
            config.timeout = timeout;
            config.max_concurrent_calls = max_concurrent_calls;
            config.max_queued_calls = max_queued_calls;
            config.max_body_bytes = max_body_bytes;
            config.max_response_bytes = max_response_bytes;
            config.max_total_body_bytes = max_total_body_bytes;
            config.record = record;
            config.record_body_limit = record_body_limit;
            config.redact = redact;
            config.duration = duration;
            run_proxy(config, format.into(), output.as_deref())
        }
        Command::Replay {
            file,
            agent,
            cacert,
            cert,
            key,
            timeout,
            format,
        } => {
            let mut config = proxy::ReplayConfig::new(agent);
            config.cacert = cacert;
            config.client_identity = cert.zip(key);
            config.timeout = timeout;
            let input = std::fs::File::open(&file)
                .map_err(|e| Fatal(format!("cannot read {}: {e}", file.display())))?;
            let report = proxy::replay(BufReader::new(input), &config)
                .map_err(|e| Fatal(format!("replay: {e}")))?;
            let text = match format {
                FormatArg::Json => proxy::replay_json(&report),
                FormatArg::Human | FormatArg::Junit => proxy::replay_human(&report),
            };
            emit(&text)?;
            Ok(report.exit_code())
        }
    }
}

fn run_proxy(
    config: proxy::ProxyConfig,
    format: Format,
    output: Option<&Path>,
) -> Result<u8, Fatal> {
    let log: proxy::LogFn = Arc::new(|line: &str| eprintln!("{line}"));
    let server =
        proxy::Proxy::bind(config.clone(), log).map_err(|e| Fatal(format!("proxy: {e}")))?;
    eprintln!(
        "magma-validate proxy: listening on {} -> {}",
        server.url(),
        config.upstream
    );
    if let Some(addr) = server.metrics_addr() {
        eprintln!("magma-validate proxy: metrics at http://{addr}/metrics");
    }
    let summary = server.run();
    let text = match format {
        Format::Human => proxy::summary_human(&summary),
        Format::Json => proxy::summary_json(&summary),
        Format::Junit => proxy::summary_junit(&summary),
    };
    match output {
        Some(path) => {
            std::fs::write(path, &text).map_err(|e| {
                Fatal(format!(
                    "cannot write the summary to {}: {e}",
                    path.display()
                ))
            })?;
            emit(&proxy::summary_human(&summary))?;
        }
        None => emit(&text)?,
    }
    Ok(summary.exit_code())
}

/// One progress line on standard error.
fn print_progress(base: &str, p: Progress<'_>) {
    let line = match p {
        Progress::Waiting {
            elapsed,
            limit,
            last,
        } => format!(
            "magma-validate: waiting for {base}{health}: {last} ({:.1} s of {} s)",
            elapsed.as_secs_f64(),
            limit.as_secs_f64(),
            health = Endpoint::Health,
        ),
        Progress::Finished {
            index,
            total,
            check,
        } => format!(
            "[{index:>2}/{total}] {}  {} ({} ms)",
            render::tag(check.status),
            check.name,
            check.duration_ms
        ),
        _ => return,
    };
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{line}");
    let _ = err.flush();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(Fatal(msg)) => {
            eprintln!("magma-validate: {msg}");
            ExitCode::from(2)
        }
    }
}
