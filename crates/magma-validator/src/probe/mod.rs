//! `probe`: a conformance suite against a live agent, in any language.
//!
//! [`run`] calls the agent the way BENCH and GEN do (a new connection per
//! call, `Content-Type: application/json`, requests shaped like theirs) and
//! returns one [`CheckResult`] per check: pass, warn, fail, or skip. Every
//! check has a [`CheckSeverity`] written in its definition: *fail* where a
//! consumer breaks or the contract is violated on input the consumers
//! send, *warn* where the contract says otherwise but BENCH and GEN cannot
//! trigger it. [`ProbeConfig::strict`] turns warnings into failures;
//! [`ProbeConfig::skip`] and [`ProbeConfig::warn`] waive or soften one
//! check, and the report lists what was waived. The list of checks is
//! [`checks`]; what each catches is in `docs/validator.md`.

mod checks;
mod requests;
mod session;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::report::{Finding, Severity};

pub use checks::{CheckInfo, checks};

/// How to run the probe.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProbeConfig {
    /// The agent's base URL (`http://host:8888`, `https://host/prefix`).
    pub url: String,
    /// Longest time one call may take. Default 60 s.
    pub timeout: Duration,
    /// Longest time the whole run may take, the wait for readiness
    /// included. `None` (the default) means ten times
    /// [`timeout`](Self::timeout). Every call is given at most the time
    /// left; once it has passed, the checks not yet run fail with code
    /// `deadline` instead of calling the agent.
    pub deadline: Option<Duration>,
    /// How long to wait for `GET /health` to answer 200 (while the agent
    /// refuses connections or answers 503) before the run stops as not
    /// ready. Default 30 s.
    pub ready_timeout: Duration,
    /// A PEM file of CA certificates to trust for `https` URLs (for a
    /// self-signed or private-CA agent), in addition to the webpki roots.
    pub cacert: Option<PathBuf>,
    /// A client certificate chain and its private key (PEM files), for
    /// agents behind mutual TLS.
    pub client_identity: Option<(PathBuf, PathBuf)>,
    /// Headers sent with every call (`Authorization`, a proxy's key), as
    /// name and value.
    pub headers: Vec<(String, String)>,
    /// Approximate size in bytes of the large request's memory. Default
    /// 1 MiB.
    pub large_request_bytes: usize,
    /// The largest answer body read, in bytes; a larger one fails its
    /// check with code `body_too_large`. Default 64 MiB (magma-client's).
    /// The probe's memory stays under about twice this whatever the agent
    /// answers (`docs/security.md`).
    pub max_response_bytes: u64,
    /// Steps of the memory round trip. Default 4.
    pub memory_steps: usize,
    /// An input that makes the agent think a while, for the concurrency
    /// checks (`--slow-input`); its `id` is replaced by 0 and a marker key
    /// is added to its memory. `None` (the default): a BENCH-like input
    /// with `extra_keys.delay_ms`, or a large one when the agent does not
    /// take that as a delay.
    pub slow_input: Option<magma_protocol::AgentInput>,
    /// Warnings count as failures (except checks softened with `warn`).
    pub strict: bool,
    /// Checks not run (waived), by name.
    pub skip: Vec<String>,
    /// Checks whose failures count as warnings, by name.
    pub warn: Vec<String>,
}

impl ProbeConfig {
    /// The defaults for `url`.
    pub fn new(url: impl Into<String>) -> ProbeConfig {
        ProbeConfig {
            url: url.into(),
            timeout: Duration::from_secs(60),
            ready_timeout: Duration::from_secs(30),
            deadline: None,
            cacert: None,
            client_identity: None,
            headers: Vec::new(),
            large_request_bytes: 1 << 20,
            max_response_bytes: magma_client::DEFAULT_MAX_RESPONSE_BYTES,
            memory_steps: 4,
            slow_input: None,
            strict: false,
            skip: Vec::new(),
            warn: Vec::new(),
        }
    }

    /// Sets [`timeout`](Self::timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets [`max_response_bytes`](Self::max_response_bytes).
    pub fn max_response_bytes(mut self, bytes: u64) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Sets [`deadline`](Self::deadline).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The run's deadline: [`deadline`](Self::deadline), else ten times
    /// [`timeout`](Self::timeout).
    pub fn effective_deadline(&self) -> Duration {
        self.deadline.unwrap_or(self.timeout.saturating_mul(10))
    }

    /// Sets [`ready_timeout`](Self::ready_timeout).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// Sets [`cacert`](Self::cacert).
    pub fn cacert(mut self, path: impl Into<PathBuf>) -> Self {
        self.cacert = Some(path.into());
        self
    }

    /// Sets [`client_identity`](Self::client_identity).
    pub fn client_identity(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client_identity = Some((cert.into(), key.into()));
        self
    }

    /// Adds a header to every call.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets [`large_request_bytes`](Self::large_request_bytes).
    pub fn large_request_bytes(mut self, bytes: usize) -> Self {
        self.large_request_bytes = bytes;
        self
    }

    /// Sets [`memory_steps`](Self::memory_steps) (at least 2).
    pub fn memory_steps(mut self, steps: usize) -> Self {
        self.memory_steps = steps.max(2);
        self
    }

    /// Sets [`slow_input`](Self::slow_input).
    pub fn slow_input(mut self, input: magma_protocol::AgentInput) -> Self {
        self.slow_input = Some(input);
        self
    }

    /// Sets [`strict`](Self::strict).
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Waives the check `name`: it is not run.
    pub fn skip(mut self, name: impl Into<String>) -> Self {
        self.skip.push(name.into());
        self
    }

    /// Softens the check `name`: its failures count as warnings.
    pub fn warn(mut self, name: impl Into<String>) -> Self {
        self.warn.push(name.into());
        self
    }
}

/// Why the suite could not run to a verdict (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The settings cannot be used: a bad URL, an unreadable `--cacert`,
    /// an unknown check name, a malformed header.
    #[error("cannot probe: {0}")]
    Config(String),
    /// Something accepted the connection but no HTTP answer came back.
    #[error("cannot reach the agent: {0}")]
    Unreachable(String),
    /// The TLS handshake failed; `hint` says what to do, when that is known.
    #[error("TLS handshake with the agent failed: {why}{}", hint_suffix(.hint))]
    Tls {
        /// What failed.
        why: String,
        /// What to do about it (empty when nothing specific is known).
        hint: String,
    },
    /// `GET /health` did not answer 200 within the ready timeout: nothing
    /// accepted connections, or the agent kept answering 503.
    #[error("the agent is not ready: {0}")]
    NotReady(String),
    /// `/health` and `/v1/info` both answered 404: the URL is not the
    /// agent's base URL.
    #[error("wrong base URL: {0}")]
    WrongBaseUrl(String),
}

fn hint_suffix(hint: &str) -> String {
    if hint.is_empty() {
        String::new()
    } else {
        format!(". {hint}")
    }
}

impl ProbeError {
    /// A stable name: `config`, `unreachable`, `tls`, `not_ready`,
    /// `wrong_base_url`.
    pub fn kind(&self) -> &'static str {
        match self {
            ProbeError::Config(_) => "config",
            ProbeError::Unreachable(_) => "unreachable",
            ProbeError::Tls { .. } => "tls",
            ProbeError::NotReady(_) => "not_ready",
            ProbeError::WrongBaseUrl(_) => "wrong_base_url",
        }
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Conformant.
    Pass,
    /// A warning: valid but harmful with a consumer, or a fault of a check
    /// whose severity is warn.
    Warn,
    /// A fault of a check whose severity is fail (or any warning with
    /// `strict`).
    Fail,
    /// Not run: waived, or an earlier failure makes it meaningless.
    Skip,
}

impl Status {
    /// `pass`, `warn`, `fail` or `skip`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// How much a check's fault counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckSeverity {
    /// A consumer breaks, or the contract is violated on input the
    /// consumers send: the check fails (exit 1).
    Fail,
    /// The contract says otherwise, but BENCH and GEN cannot trigger it:
    /// the check warns (exit 0 unless `strict`).
    Warn,
}

impl CheckSeverity {
    /// `fail` or `warn`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckSeverity::Fail => "fail",
            CheckSeverity::Warn => "warn",
        }
    }
}

/// How a check was waived by the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Waiver {
    /// Not run (`--skip`).
    Skip,
    /// Its faults count as warnings (`--warn`).
    Warn,
}

impl Waiver {
    /// `skip` or `warn`.
    pub fn as_str(self) -> &'static str {
        match self {
            Waiver::Skip => "skip",
            Waiver::Warn => "warn",
        }
    }
}

/// One check of the suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// Stable name (`health`, `ordering`, `invalid-request/nan`, ...).
    pub name: String,
    /// What it checks, in a few words.
    pub title: String,
    /// The severity it ran with: its definition's, or warn when softened.
    pub severity: CheckSeverity,
    /// Pass, warn, fail or skip.
    pub status: Status,
    /// Why, in one line: what was verified, or the first fault.
    pub reason: String,
    /// How the user waived it, if they did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waived: Option<Waiver>,
    /// Every error and warning, with consumer impact and fix.
    pub findings: Vec<Finding>,
    /// Wall time of the check in milliseconds.
    pub duration_ms: u64,
}

/// Counts over the checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Checks that passed without warnings.
    pub passed: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Checks that passed with warnings.
    pub warnings: usize,
    /// Checks not run.
    pub skipped: usize,
    /// All checks.
    pub total: usize,
}

/// Who answered `/v1/info`, when it could be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentIdentity {
    /// `agent_id`.
    pub agent_id: String,
    /// `agent_version`.
    pub agent_version: String,
    /// `protocol_version`.
    pub protocol_version: String,
}

/// A check the user waived, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waived {
    /// The check's name.
    pub check: String,
    /// Skipped or softened.
    pub waiver: Waiver,
}

/// What stopped a run before a verdict (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stopped {
    /// [`ProbeError::kind`].
    pub kind: String,
    /// The whole message.
    pub message: String,
}

/// The result of a probe run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeReport {
    /// The URL probed.
    pub target: String,
    /// The agent, if `/v1/info` could be read.
    pub agent: Option<AgentIdentity>,
    /// Whether warnings counted as failures.
    pub strict: bool,
    /// Counts.
    pub summary: Summary,
    /// The checks the user waived.
    pub waived: Vec<Waived>,
    /// Set when the run stopped before a verdict; `checks` is then empty.
    pub stopped: Option<Stopped>,
    /// Every check, in the order run.
    pub checks: Vec<CheckResult>,
}

impl ProbeReport {
    pub(crate) fn new(
        target: String,
        agent: Option<AgentIdentity>,
        config: &ProbeConfig,
        checks: Vec<CheckResult>,
    ) -> Self {
        let mut summary = Summary {
            total: checks.len(),
            ..Summary::default()
        };
        for c in &checks {
            match c.status {
                Status::Pass => summary.passed += 1,
                Status::Warn => summary.warnings += 1,
                Status::Fail => summary.failed += 1,
                Status::Skip => summary.skipped += 1,
            }
        }
        let waived = checks
            .iter()
            .filter_map(|c| {
                c.waived.map(|waiver| Waived {
                    check: c.name.clone(),
                    waiver,
                })
            })
            .collect();
        ProbeReport {
            target,
            agent,
            strict: config.strict,
            summary,
            waived,
            stopped: None,
            checks,
        }
    }

    /// The report of a run that `error` stopped: no checks, and `stopped`
    /// naming what happened. What the CLI writes on exit code 2.
    pub fn stopped(config: &ProbeConfig, error: &ProbeError) -> ProbeReport {
        ProbeReport {
            target: config.url.trim_end_matches('/').to_owned(),
            agent: None,
            strict: config.strict,
            summary: Summary::default(),
            waived: Vec::new(),
            stopped: Some(Stopped {
                kind: error.kind().to_owned(),
                message: error.to_string(),
            }),
            checks: Vec::new(),
        }
    }

    /// `true` when the run reached a verdict and no check failed (exit
    /// code 0).
    pub fn is_conformant(&self) -> bool {
        self.stopped.is_none() && self.summary.failed == 0
    }

    /// The exit code of `magma-validate probe`: 0 conformant, 1 a check
    /// failed, 2 the run stopped before a verdict.
    pub fn exit_code(&self) -> u8 {
        if self.stopped.is_some() {
            2
        } else {
            u8::from(self.summary.failed > 0)
        }
    }

    /// The check named `name`.
    pub fn check(&self, name: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.name == name)
    }
}

/// What the probe reports while it runs.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// Still waiting for `GET /health` to answer 200.
    Waiting {
        /// Time spent waiting so far.
        elapsed: Duration,
        /// The ready timeout.
        limit: Duration,
        /// The last answer: `connection refused`, `503 ...`.
        last: &'a str,
    },
    /// A check has finished.
    Finished {
        /// Its position, from 1.
        index: usize,
        /// Number of checks.
        total: usize,
        /// Its result.
        check: &'a CheckResult,
    },
}

/// Checks that `name: value` can be sent as a header; the error says why
/// not.
pub fn validate_header(name: &str, value: &str) -> Result<(), String> {
    session::parse_header(name, value).map(|_| ())
}

/// Reads a `--slow-input`: one `AgentInput` as JSON (what goes in a
/// request's `inputs` array). The error names the location of the first
/// problem.
pub fn parse_slow_input(text: &str) -> Result<magma_protocol::AgentInput, String> {
    use magma_protocol::{AgentRequest, Json, Object};
    let value = Json::from_slice(text.trim().as_bytes()).map_err(|e| format!("not JSON: {e}"))?;
    if !matches!(value, Json::Object(_)) {
        return Err("not a JSON object (one AgentInput, as in a request's inputs)".to_owned());
    }
    let mut request = Object::new();
    request.insert("request_id", Json::from("slow-input"));
    request.insert("inputs", Json::Array(vec![value]));
    let request = AgentRequest::from_json(Json::Object(request)).map_err(|e| {
        format!(
            "not a valid AgentInput: {}",
            e.to_string()
                .replace("invalid AgentRequest: ", "")
                .replace("inputs[0].", "")
                .replace("inputs[0]", "input")
        )
    })?;
    request
        .inputs()
        .first()
        .cloned()
        .ok_or_else(|| "no input".to_owned())
}

/// Runs the whole suite against the agent at `config.url`.
///
/// Returns `Err` only when the suite cannot reach a verdict (bad settings,
/// nothing listening, TLS refused, not ready in time, wrong base URL);
/// every finding about the agent is in the report. Blocks the calling
/// thread; do not call it from inside an async runtime.
pub fn run(config: &ProbeConfig) -> Result<ProbeReport, ProbeError> {
    checks::run(config, &mut |_| {})
}

/// Like [`run`], calling `progress` while it waits for the agent and as
/// each check finishes.
pub fn run_with_progress(
    config: &ProbeConfig,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<ProbeReport, ProbeError> {
    checks::run(config, progress)
}

/// Builds a check's result from its findings.
#[derive(Debug)]
pub(crate) struct Check {
    name: &'static str,
    title: &'static str,
    findings: Vec<Finding>,
    verified: Vec<String>,
    skipped: Option<String>,
    context: String,
    started: std::time::Instant,
}

impl Check {
    pub(crate) fn new(name: &'static str, title: &'static str) -> Check {
        Check {
            name,
            title,
            findings: Vec::new(),
            verified: Vec::new(),
            skipped: None,
            context: String::new(),
            started: std::time::Instant::now(),
        }
    }

    /// The check's name.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn push(&mut self, mut finding: Finding) {
        if !self.context.is_empty() {
            finding.message = format!("{}: {}", self.context, finding.message);
        }
        self.findings.push(finding);
    }

    pub(crate) fn extend(&mut self, findings: impl IntoIterator<Item = Finding>) {
        for f in findings {
            self.push(f);
        }
    }

    /// Drops the findings with `code` (a lint that only repeats what the
    /// check itself reports).
    pub(crate) fn drop_code(&mut self, code: &str) {
        self.findings.retain(|f| f.code != code);
    }

    /// Prefixes the messages of the findings that follow (`step 2`), for
    /// checks that send several requests.
    pub(crate) fn context(&mut self, context: impl Into<String>) {
        self.context = context.into();
    }

    /// Records what passed, for the reason line.
    pub(crate) fn verified(&mut self, what: impl Into<String>) {
        self.verified.push(what.into());
    }

    /// Marks the check as not run.
    pub(crate) fn skip(&mut self, why: impl Into<String>) {
        self.skipped = Some(why.into());
    }

    pub(crate) fn failed(&self) -> bool {
        self.findings.iter().any(Finding::is_error)
    }

    pub(crate) fn warned(&self) -> bool {
        self.findings
            .iter()
            .any(|f| f.severity == Severity::Warning)
    }

    /// Sets every finding to `severity` (a softened check's errors become
    /// warnings; with `strict`, warnings become errors).
    pub(crate) fn regrade(&mut self, from: Severity, to: Severity) {
        for f in &mut self.findings {
            if f.severity == from {
                f.severity = to;
            }
        }
    }

    pub(crate) fn finish(self, severity: CheckSeverity, waived: Option<Waiver>) -> CheckResult {
        let errors: Vec<&Finding> = self.findings.iter().filter(|f| f.is_error()).collect();
        let warnings = self
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .count();
        let (status, reason) = if let Some(why) = &self.skipped {
            (Status::Skip, why.clone())
        } else if let Some(first) = errors.first() {
            let more = match errors.len() {
                1 => String::new(),
                n => format!(" (and {} more errors)", n - 1),
            };
            (
                Status::Fail,
                format!("{}: {}{more}", first.code, first.message),
            )
        } else if warnings > 0 {
            let first = self
                .findings
                .iter()
                .find(|f| !f.is_error())
                .map(|f| format!("{}: {}", f.code, f.message))
                .unwrap_or_default();
            let more = more_warnings(warnings);
            (Status::Warn, format!("{first}{more}"))
        } else {
            (Status::Pass, self.verified.join("; "))
        };
        CheckResult {
            name: self.name.to_owned(),
            title: self.title.to_owned(),
            severity,
            status,
            reason,
            waived,
            findings: self.findings,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// What follows the first of `warnings` warnings in a check's summary.
fn more_warnings(warnings: usize) -> String {
    match warnings {
        0 | 1 => String::new(),
        2 => " (and 1 more warning)".to_owned(),
        n => format!(" (and {} more warnings)", n - 1),
    }
}

#[cfg(test)]
mod summary_tests {
    #[test]
    fn one_more_warning_is_singular() {
        assert_eq!(super::more_warnings(1), "");
        assert_eq!(super::more_warnings(2), " (and 1 more warning)");
        assert_eq!(super::more_warnings(3), " (and 2 more warnings)");
    }
}
