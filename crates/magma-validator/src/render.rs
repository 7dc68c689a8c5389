//! Output formats: human text, JSON and JUnit XML, for reports and probes.

use std::fmt::Write as _;
use std::time::Duration;

use quick_junit::{
    NonSuccessKind, Property, Report as JunitReport, TestCase, TestCaseStatus, TestSuite,
};
use serde::Serialize;

use crate::probe::{ProbeReport, Status};
use crate::report::{Finding, Report};

/// How to print results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// Lines for a terminal.
    #[default]
    Human,
    /// One JSON object.
    Json,
    /// JUnit XML, for CI systems.
    Junit,
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn finding_lines(out: &mut String, f: &Finding, indent: &str, impact: bool) {
    let _ = writeln!(out, "{indent}{f}");
    if impact && !f.impact.is_empty() {
        let _ = writeln!(out, "{indent}  consumers: {}", f.impact);
    }
    if !f.fix.is_empty() {
        let _ = writeln!(out, "{indent}  fix: {}", f.fix);
    }
}

/// Human text for a `check` or `exchange` report of `source`.
pub fn report_human(report: &Report, source: &str) -> String {
    let mut out = String::new();
    let (errors, warnings) = report.counts();
    let verdict = if errors == 0 { "valid" } else { "NOT valid" };
    let _ = writeln!(
        out,
        "{source}: {} {verdict}: {}, {}",
        report.kind,
        plural(errors, "error", "errors"),
        plural(warnings, "warning", "warnings")
    );
    // Errors of one document share their impact: print it once, after them.
    let mut impacts: Vec<&str> = Vec::new();
    for f in report.errors() {
        finding_lines(&mut out, f, "  ", false);
        if !f.impact.is_empty() && !impacts.contains(&f.impact.as_str()) {
            impacts.push(&f.impact);
        }
    }
    for impact in impacts {
        let _ = writeln!(out, "  consumers: {impact}");
    }
    for f in report.warnings() {
        finding_lines(&mut out, f, "  ", true);
    }
    for note in &report.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    out
}

#[derive(Serialize)]
struct ReportJson<'a> {
    command: &'a str,
    source: &'a str,
    kind: &'a str,
    conformant: bool,
    summary: CountsJson,
    findings: &'a [Finding],
    notes: &'a [String],
}

#[derive(Serialize)]
struct CountsJson {
    errors: usize,
    warnings: usize,
}

/// One JSON object for a `check` or `exchange` report: `command`, `source`,
/// `kind`, `conformant`, `summary` (`errors`, `warnings`), `findings`,
/// `notes`.
pub fn report_json(report: &Report, command: &str, source: &str) -> String {
    let (errors, warnings) = report.counts();
    let doc = ReportJson {
        command,
        source,
        kind: &report.kind,
        conformant: report.is_conformant(),
        summary: CountsJson { errors, warnings },
        findings: &report.findings,
        notes: &report.notes,
    };
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

fn findings_text(findings: &[&Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        finding_lines(&mut out, f, "", true);
    }
    out
}

/// JUnit XML for a `check` or `exchange` report: one test case, failed
/// when there are errors; warnings in its `system-out`.
pub fn report_junit(report: &Report, command: &str, source: &str) -> String {
    let (errors, _) = report.counts();
    let suite_name = format!("magma-validate {command}");
    let status = if errors > 0 {
        let errs: Vec<&Finding> = report.errors().collect();
        let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
        st.set_type("contract")
            .set_message(format!(
                "{}: {}",
                plural(errors, "error", "errors"),
                errs[0]
            ))
            .set_description(findings_text(&errs));
        st
    } else {
        TestCaseStatus::success()
    };
    let mut case = TestCase::new(
        format!("{} {source} conforms to protocol 2.0", report.kind),
        status,
    );
    case.set_classname(suite_name.clone());
    let warns: Vec<&Finding> = report.warnings().collect();
    if !warns.is_empty() || !report.notes.is_empty() {
        let mut text = findings_text(&warns);
        for n in &report.notes {
            let _ = writeln!(text, "note: {n}");
        }
        case.set_system_out(text);
    }
    let mut suite = TestSuite::new(suite_name);
    suite.add_test_case(case);
    let mut doc = JunitReport::new("magma-validate");
    doc.add_test_suite(suite);
    junit_text(&doc)
}

/// The XML text of a JUnit report.
fn junit_text(doc: &JunitReport) -> String {
    // Writing to a String fails only on a bug of the writer; say so in the document.
    doc.to_string().unwrap_or_else(|e| {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- cannot write the report: {e} -->\n"
        )
    })
}

/// Human text for a probe report.
pub fn probe_human(report: &ProbeReport) -> String {
    let mut out = String::new();
    let _ = write!(out, "probe {}", report.target);
    if let Some(a) = &report.agent {
        let _ = write!(
            out,
            ": agent {} {} (protocol {})",
            a.agent_id, a.agent_version, a.protocol_version
        );
    }
    if report.strict {
        out.push_str(" [--strict: warnings fail]");
    }
    out.push('\n');
    if let Some(stopped) = &report.stopped {
        let _ = writeln!(out, "STOPPED ({}): {}", stopped.kind, stopped.message);
        return out;
    }
    let width = report
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for c in &report.checks {
        let _ = writeln!(out, "{}  {:width$}  {}", tag(c.status), c.name, c.reason);
        if matches!(c.status, Status::Fail | Status::Warn) {
            // Consumers and fix once per code; repeats get their line only.
            let mut explained: Vec<&str> = Vec::new();
            for f in &c.findings {
                let first = !explained.contains(&f.code.as_str());
                if first {
                    explained.push(&f.code);
                    finding_lines(&mut out, f, "        ", true);
                } else {
                    let _ = writeln!(out, "        {f}");
                }
            }
        }
    }
    if !report.waived.is_empty() {
        let list: Vec<String> = report
            .waived
            .iter()
            .map(|w| format!("{} (--{})", w.check, w.waiver.as_str()))
            .collect();
        let _ = writeln!(out, "waived: {}", list.join(", "));
    }
    out.push_str(&probe_summary_line(report));
    out
}

/// `PASS`, `WARN`, `FAIL` or `SKIP`.
pub fn tag(status: Status) -> &'static str {
    match status {
        Status::Pass => "PASS",
        Status::Warn => "WARN",
        Status::Fail => "FAIL",
        Status::Skip => "SKIP",
    }
}

/// The last line of the human report: the counts.
pub fn probe_summary_line(report: &ProbeReport) -> String {
    if let Some(stopped) = &report.stopped {
        return format!("stopped before a verdict ({})\n", stopped.kind);
    }
    let s = &report.summary;
    format!(
        "{}: {} passed, {} failed, {}, {} skipped\n",
        plural(s.total, "check", "checks"),
        s.passed,
        s.failed,
        plural(s.warnings, "warning", "warnings"),
        s.skipped
    )
}

/// The probe report as one JSON object: `target`, `agent`, `strict`,
/// `summary` (`passed`, `failed`, `warnings`, `skipped`, `total`),
/// `waived`, `stopped` and `checks`.
pub fn probe_json(report: &ProbeReport) -> String {
    serde_json::to_string_pretty(report).unwrap_or_default() + "\n"
}

/// JUnit XML for a probe report: one test case per check; warnings in
/// `system-out`, skipped and waived checks as `skipped`; a run stopped
/// before a verdict is one test case in error, naming what stopped it.
pub fn probe_junit(report: &ProbeReport) -> String {
    let mut suite = TestSuite::new(format!("magma-validate probe {}", report.target));
    if let Some(stopped) = &report.stopped {
        let mut st = TestCaseStatus::non_success(NonSuccessKind::Error);
        st.set_type(stopped.kind.clone())
            .set_message(stopped.message.clone())
            .set_description(stopped.message.clone());
        let mut case = TestCase::new("probe", st);
        case.set_classname("magma-validate.probe");
        suite.add_test_case(case);
    }
    let mut total = Duration::ZERO;
    for c in &report.checks {
        let errors: Vec<&Finding> = c.findings.iter().filter(|f| f.is_error()).collect();
        let warnings: Vec<&Finding> = c.findings.iter().filter(|f| !f.is_error()).collect();
        let status = match c.status {
            Status::Fail => {
                let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                st.set_type(errors.first().map_or("fail", |f| f.code.as_str()))
                    .set_message(c.reason.clone())
                    .set_description(findings_text(&errors));
                st
            }
            Status::Skip => {
                let mut st = TestCaseStatus::skipped();
                st.set_message(c.reason.clone());
                st
            }
            Status::Pass | Status::Warn => TestCaseStatus::success(),
        };
        let mut case = TestCase::new(c.name.clone(), status);
        let time = Duration::from_millis(c.duration_ms);
        total += time;
        case.set_classname("magma-validate.probe").set_time(time);
        if !warnings.is_empty() {
            case.set_system_out(findings_text(&warnings));
        }
        suite.add_test_case(case);
    }
    suite.set_time(total);
    if !report.waived.is_empty() {
        for w in &report.waived {
            suite.add_property(Property::new(
                format!("waived.{}", w.check),
                w.waiver.as_str(),
            ));
        }
    }
    if report.strict {
        suite.add_property(Property::new("strict", "true"));
    }
    let mut doc = JunitReport::new("magma-validate");
    doc.set_time(total);
    doc.add_test_suite(suite);
    junit_text(&doc)
}
