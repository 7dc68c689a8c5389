//! Counters of a proxy run and its summary in the probe's formats.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use quick_junit::{NonSuccessKind, Report as JunitReport, TestCase, TestCaseStatus, TestSuite};
use serde::Serialize;

use super::inspect::Checked;

/// How many exchange ids a finding keeps as examples.
const EXAMPLE_IDS: usize = 5;

/// What the proxy saw, summed over the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProxySummary {
    /// The upstream base URL.
    pub upstream: String,
    /// Exchanges forwarded (or answered by the proxy itself).
    pub exchanges: u64,
    /// Seconds the proxy ran.
    pub duration_s: f64,
    /// Answers per HTTP status (the upstream's, or the proxy's `502`/`504`/`413`).
    pub statuses: BTreeMap<u16, u64>,
    /// Per check: exchanges checked, passed and failed.
    pub checks: BTreeMap<String, CheckCount>,
    /// The distinct findings, with how often they occurred.
    pub findings: Vec<FindingCount>,
    /// Latency of the forwarded exchanges, in milliseconds.
    pub latency_ms: Percentiles,
    /// Faults of the proxy itself that left an exchange unchecked (its
    /// answer did not fit in the memory budget). Recording faults are in
    /// the log only.
    pub proxy_faults: Vec<String>,
}

/// The counts of one check.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CheckCount {
    /// Exchanges on which it ran.
    pub checked: u64,
    /// Of those, exchanges with at least one error.
    pub failed: u64,
    /// Of those, exchanges with warnings only.
    pub warned: u64,
}

/// One distinct finding (check, severity, code, location) of the run.
#[derive(Debug, Clone, Serialize)]
pub struct FindingCount {
    /// The check.
    pub check: String,
    /// `error` or `warning`.
    pub severity: String,
    /// The code.
    pub code: String,
    /// Where.
    pub location: String,
    /// The message of its first occurrence.
    pub message: String,
    /// What it breaks (BENCH, GEN).
    pub impact: String,
    /// How to fix it.
    pub fix: String,
    /// How many times.
    pub count: u64,
    /// The first exchange ids it occurred in.
    pub exchanges: Vec<u64>,
}

/// Latency percentiles (nearest rank), in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl ProxySummary {
    /// `true` when no exchange had an error finding.
    pub fn is_clean(&self) -> bool {
        self.checks.values().all(|c| c.failed == 0)
    }

    /// The exit code of `magma-validate proxy`: 0 clean, 1 findings.
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.is_clean())
    }
}

/// The running counters.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) summary: ProxySummary,
    pub(crate) latencies: Vec<f64>,
}

impl Stats {
    pub(crate) fn add(
        &mut self,
        id: u64,
        status: u16,
        latency_ms: Option<f64>,
        checks: &[&'static str],
        findings: &[Checked],
    ) {
        let s = &mut self.summary;
        s.exchanges += 1;
        *s.statuses.entry(status).or_default() += 1;
        if let Some(ms) = latency_ms {
            self.latencies.push(ms);
        }
        let mut all: Vec<&str> = checks.to_vec();
        for f in findings {
            if !all.contains(&f.check) {
                all.push(f.check);
            }
        }
        for check in all {
            let count = s.checks.entry(check.to_owned()).or_default();
            count.checked += 1;
            let mine = findings.iter().filter(|f| f.check == check);
            let (mut errors, mut warnings) = (0, 0);
            for f in mine {
                if f.finding.is_error() {
                    errors += 1;
                } else {
                    warnings += 1;
                }
            }
            if errors > 0 {
                count.failed += 1;
            } else if warnings > 0 {
                count.warned += 1;
            }
        }
        for c in findings {
            let f = &c.finding;
            let severity = f.severity.as_str();
            let existing = s.findings.iter_mut().find(|e| {
                e.check == c.check
                    && e.code == f.code
                    && e.location == f.location
                    && e.severity == severity
            });
            match existing {
                Some(e) => {
                    e.count += 1;
                    if e.exchanges.len() < EXAMPLE_IDS && e.exchanges.last() != Some(&id) {
                        e.exchanges.push(id);
                    }
                }
                None => s.findings.push(FindingCount {
                    check: c.check.to_owned(),
                    severity: severity.to_owned(),
                    code: f.code.clone(),
                    location: f.location.clone(),
                    message: f.message.clone(),
                    impact: f.impact.clone(),
                    fix: f.fix.clone(),
                    count: 1,
                    exchanges: vec![id],
                }),
            }
        }
    }

    pub(crate) fn finish(mut self, duration_s: f64) -> ProxySummary {
        self.latencies.sort_by(f64::total_cmp);
        let rank = |q: f64| -> f64 {
            if self.latencies.is_empty() {
                return 0.0;
            }
            let n = self.latencies.len();
            // Nearest rank: the smallest value with at least q of the values at or below it.
            let i = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
            self.latencies[i]
        };
        self.summary.latency_ms = Percentiles {
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            max: self.latencies.last().copied().unwrap_or(0.0),
        };
        self.summary.duration_s = duration_s;
        self.summary
    }
}

/// The summary as text.
pub fn summary_human(s: &ProxySummary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "magma-validate proxy: {} exchanges with {} in {:.1} s",
        s.exchanges, s.upstream, s.duration_s
    );
    let statuses: Vec<String> = s
        .statuses
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let _ = writeln!(out, "statuses: {}", statuses.join(", "));
    let l = s.latency_ms;
    let _ = writeln!(
        out,
        "latency ms: p50 {:.2}, p90 {:.2}, p99 {:.2}, max {:.2}",
        l.p50, l.p90, l.p99, l.max
    );
    for (name, c) in &s.checks {
        let tag = if c.failed > 0 {
            "FAIL"
        } else if c.warned > 0 {
            "WARN"
        } else {
            "PASS"
        };
        let _ = writeln!(
            out,
            "[{tag}] {name}: {} checked, {} failed, {} with warnings",
            c.checked, c.failed, c.warned
        );
        for f in s.findings.iter().filter(|f| &f.check == name) {
            finding_text(&mut out, f);
        }
    }
    for fault in &s.proxy_faults {
        let _ = writeln!(out, "proxy fault: {fault}");
    }
    let verdict = if s.is_clean() {
        "no contract errors"
    } else {
        "contract errors found"
    };
    let _ = writeln!(out, "{verdict}");
    out
}

fn finding_text(out: &mut String, f: &FindingCount) {
    let at = if f.location.is_empty() {
        String::new()
    } else {
        format!(" at {}", f.location)
    };
    let ids: Vec<String> = f.exchanges.iter().map(u64::to_string).collect();
    let _ = writeln!(
        out,
        "    {} {}{at}: {} ({} times; exchanges {})",
        f.severity,
        f.code,
        f.message,
        f.count,
        ids.join(", ")
    );
    if !f.impact.is_empty() {
        let _ = writeln!(out, "      impact: {}", f.impact);
    }
    if !f.fix.is_empty() {
        let _ = writeln!(out, "      fix: {}", f.fix);
    }
}

/// The summary as JSON.
pub fn summary_json(s: &ProxySummary) -> String {
    let mut text = serde_json::to_string_pretty(s)
        .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
    text.push('\n');
    text
}

/// The summary as a JUnit document: one test case per check, failed when an
/// exchange had an error finding of that check.
pub fn summary_junit(s: &ProxySummary) -> String {
    let mut suite = TestSuite::new("magma-validate proxy");
    for (name, c) in &s.checks {
        let mine: Vec<&FindingCount> = s.findings.iter().filter(|f| &f.check == name).collect();
        let errors: Vec<&&FindingCount> = mine.iter().filter(|f| f.severity == "error").collect();
        let status = if c.failed > 0 {
            let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let codes: Vec<&str> = errors.iter().map(|f| f.code.as_str()).collect();
            let mut text = String::new();
            for f in &mine {
                finding_text(&mut text, f);
            }
            st.set_type("contract")
                .set_message(format!(
                    "{} of {} exchanges failed: {}",
                    c.failed,
                    c.checked,
                    codes.join(", ")
                ))
                .set_description(text);
            st
        } else {
            TestCaseStatus::success()
        };
        let mut case = TestCase::new(name.clone(), status);
        case.set_classname("magma-validate proxy");
        if c.failed == 0 && !mine.is_empty() {
            let mut text = String::new();
            for f in &mine {
                finding_text(&mut text, f);
            }
            case.set_system_out(text);
        }
        suite.add_test_case(case);
    }
    let mut doc = JunitReport::new("magma-validate");
    doc.add_test_suite(suite);
    doc.to_string().unwrap_or_else(|e| {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- cannot write the report: {e} -->\n"
        )
    })
}
