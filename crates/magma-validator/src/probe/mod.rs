//! `probe`: a conformance suite against a live agent, in any language.
//!
//! [`run`] calls the agent the way BENCH and GEN do (a new connection per
//! call, `Content-Type: application/json`, requests shaped like theirs) and
//! returns one [`CheckResult`] per check: pass, warn (valid but harmful),
//! fail (a consumer breaks), or skip (an earlier failure makes the check
//! meaningless). The list of checks and what each catches is in
//! `docs/validator.md`.

mod requests;
mod session;
mod suite;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::report::{Finding, Severity};

/// How to run the probe.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProbeConfig {
    /// The agent's base URL (`http://host:8888`, `https://host/prefix`).
    pub url: String,
    /// Longest time one call may take. Default 60 s.
    pub timeout: Duration,
    /// How long to wait for `GET /health` to answer 200 (while the agent
    /// refuses connections or answers 503) before the health check fails.
    /// Default 30 s.
    pub ready_timeout: Duration,
    /// A PEM file of CA certificates to trust for `https` URLs (for a
    /// self-signed or private-CA agent), in addition to the webpki roots.
    pub cacert: Option<PathBuf>,
    /// Approximate size in bytes of the large request's memory. Default
    /// 1 MiB.
    pub large_request_bytes: usize,
    /// Steps of the memory round trip. Default 4.
    pub memory_steps: usize,
}

impl ProbeConfig {
    /// The defaults for `url`.
    pub fn new(url: impl Into<String>) -> ProbeConfig {
        ProbeConfig {
            url: url.into(),
            timeout: Duration::from_secs(60),
            ready_timeout: Duration::from_secs(30),
            cacert: None,
            large_request_bytes: 1 << 20,
            memory_steps: 4,
        }
    }

    /// Sets [`timeout`](Self::timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
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
}

/// Why the suite could not run at all (exit code 2): no verdict on the
/// agent is possible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The settings cannot be used: a bad URL, an unreadable `--cacert`,
    /// `https` without TLS support.
    #[error("cannot probe: {0}")]
    Config(String),
    /// Nothing answered at the URL within the ready timeout.
    #[error("cannot reach the agent: {0}")]
    Unreachable(String),
    /// The TLS handshake failed: the certificate is not trusted, or does not
    /// match the host, or the server does not speak TLS.
    #[error(
        "TLS handshake with the agent failed: {0}. BENCH and GEN (Python requests) verify \
         certificates the same way and would not connect either; pass the CA that signed \
         the agent's certificate with --cacert (and give it to the consumers with \
         REQUESTS_CA_BUNDLE)"
    )]
    Tls(String),
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Conformant.
    Pass,
    /// Conformant, with warnings: valid but harmful with a consumer.
    Warn,
    /// A consumer breaks.
    Fail,
    /// Not run, because an earlier failure makes it meaningless.
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

/// One check of the suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// Stable name (`health`, `ordering`, `invalid-request/nan`, ...).
    pub name: String,
    /// What it checks, in a few words.
    pub title: String,
    /// Pass, warn, fail or skip.
    pub status: Status,
    /// Why, in one line: what was verified, or the first failure.
    pub reason: String,
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

/// The result of a probe run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeReport {
    /// The URL probed.
    pub target: String,
    /// The agent, if `/v1/info` could be read.
    pub agent: Option<AgentIdentity>,
    /// Counts.
    pub summary: Summary,
    /// Every check, in the order run.
    pub checks: Vec<CheckResult>,
}

impl ProbeReport {
    pub(crate) fn new(
        target: String,
        agent: Option<AgentIdentity>,
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
        ProbeReport {
            target,
            agent,
            summary,
            checks,
        }
    }

    /// `true` when no check failed (exit code 0).
    pub fn is_conformant(&self) -> bool {
        self.summary.failed == 0
    }

    /// The check named `name`.
    pub fn check(&self, name: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.name == name)
    }
}

/// Runs the whole suite against the agent at `config.url`.
///
/// Returns `Err` only when the suite cannot run at all (bad settings,
/// nothing listening, TLS refused); every finding about the agent is in
/// the report. Blocks the calling thread; do not call it from inside an
/// async runtime.
pub fn run(config: &ProbeConfig) -> Result<ProbeReport, ProbeError> {
    suite::run(config)
}

/// Builds a check's result from its findings.
#[derive(Debug)]
pub(crate) struct Check {
    name: String,
    title: &'static str,
    findings: Vec<Finding>,
    verified: Vec<String>,
    skipped: Option<String>,
    context: String,
    started: std::time::Instant,
}

impl Check {
    pub(crate) fn new(name: impl Into<String>, title: &'static str) -> Check {
        Check {
            name: name.into(),
            title,
            findings: Vec::new(),
            verified: Vec::new(),
            skipped: None,
            context: String::new(),
            started: std::time::Instant::now(),
        }
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

    /// Prefixes the messages of the findings that follow (`step 2`), for
    /// checks that send several requests.
    pub(crate) fn context(&mut self, context: impl Into<String>) {
        self.context = context.into();
    }

    /// Records what passed, for the reason line.
    pub(crate) fn verified(&mut self, what: impl Into<String>) {
        self.verified.push(what.into());
    }

    pub(crate) fn skip(mut self, why: impl Into<String>) -> CheckResult {
        self.skipped = Some(why.into());
        self.finish()
    }

    pub(crate) fn failed(&self) -> bool {
        self.findings.iter().any(Finding::is_error)
    }

    pub(crate) fn finish(self) -> CheckResult {
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
            let more = match warnings {
                1 => String::new(),
                n => format!(" (and {} more warnings)", n - 1),
            };
            (Status::Warn, format!("{first}{more}"))
        } else {
            (Status::Pass, self.verified.join("; "))
        };
        CheckResult {
            name: self.name,
            title: self.title.to_owned(),
            status,
            reason,
            findings: self.findings,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}
