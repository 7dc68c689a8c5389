//! Findings and reports: what `check` and `exchange` produce.

use std::fmt;

use serde::Serialize;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Breaks the contract: a consumer refuses the document or the run stops.
    /// Sets the exit code to 1.
    Error,
    /// Valid, but harmful with a real consumer (a lint). Never changes the
    /// exit code.
    Warning,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem or lint, with where it is, which consumer it breaks and how
/// to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// The document it is in: `request`, `response`, `info`, `health`,
    /// `exchange` (the candidate sequence), or `http` in probe results.
    pub document: String,
    /// A stable code: the pydantic error type for contract errors
    /// (`int_type`, `extra_forbidden`, ...), `candidates_mismatch`, or a
    /// lint name (`say_with_tool_calls`, ...). See `docs/validator.md`.
    pub code: String,
    /// Where, from the document root (`inputs[0].id`, `[1].output`), or
    /// `line 3 column 7` for JSON syntax errors; empty when it is about the
    /// whole document.
    pub location: String,
    /// What is wrong.
    pub message: String,
    /// The offending value, compact and shortened, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Which consumer (BENCH, GEN) breaks, and how.
    pub impact: String,
    /// How to fix it.
    pub fix: String,
}

impl Finding {
    /// An error.
    pub fn error(
        document: impl Into<String>,
        code: impl Into<String>,
        location: impl Into<String>,
        message: impl Into<String>,
    ) -> Finding {
        Finding {
            severity: Severity::Error,
            document: document.into(),
            code: code.into(),
            location: location.into(),
            message: message.into(),
            input: None,
            impact: String::new(),
            fix: String::new(),
        }
    }

    /// A warning.
    pub fn warning(
        document: impl Into<String>,
        code: impl Into<String>,
        location: impl Into<String>,
        message: impl Into<String>,
    ) -> Finding {
        Finding {
            severity: Severity::Warning,
            ..Finding::error(document, code, location, message)
        }
    }

    /// Sets the consumer impact.
    pub fn with_impact(mut self, impact: impl Into<String>) -> Finding {
        self.impact = impact.into();
        self
    }

    /// Sets the fix.
    pub fn with_fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = fix.into();
        self
    }

    /// Sets the offending value.
    pub fn with_input(mut self, input: impl Into<String>) -> Finding {
        self.input = Some(input.into());
        self
    }

    /// `true` for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Finding {
    /// `error int_type at inputs[0].id: Input should be a valid integer`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.severity, self.code)?;
        if !self.location.is_empty() {
            write!(f, " at {}", self.location)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(input) = &self.input {
            write!(f, " (input: {input})")?;
        }
        Ok(())
    }
}

/// The result of `check` or `exchange`: every error and every lint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// What was checked: `request`, `response`, `info`, `health` or
    /// `exchange`.
    pub kind: String,
    /// Every finding: errors in the order the reference reports them, then
    /// warnings.
    pub findings: Vec<Finding>,
    /// Remarks that are not findings (e.g. a lint that could not run).
    pub notes: Vec<String>,
}

impl Report {
    /// An empty report for `kind`.
    pub fn new(kind: impl Into<String>) -> Report {
        Report {
            kind: kind.into(),
            findings: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// `true` when there is no error (warnings allowed): exit code 0.
    pub fn is_conformant(&self) -> bool {
        !self.findings.iter().any(Finding::is_error)
    }

    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.is_error())
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| !f.is_error())
    }

    /// Number of errors and of warnings.
    pub fn counts(&self) -> (usize, usize) {
        let errors = self.errors().count();
        (errors, self.findings.len() - errors)
    }

    /// Orders findings: errors first, each group in the order found.
    pub(crate) fn sort(&mut self) {
        self.findings.sort_by_key(|f| f.severity);
    }
}

/// Shortens a value for display: at most `max` characters, `...` after.
/// The start of a body, for messages: trimmed, at most 200 characters, or
/// `empty body`.
pub(crate) fn body_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        "empty body".to_owned()
    } else {
        shorten(text, 200)
    }
}

pub(crate) fn shorten(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).collect();
    if out.len() < text.len() {
        out.push_str("...");
    }
    out
}
