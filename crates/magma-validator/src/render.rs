//! Output formats: human text, JSON and JUnit XML, for reports and probes.

use std::fmt::Write as _;

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

/// Text allowed in XML 1.0, escaped.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
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
    let failures = usize::from(errors > 0);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let suite = format!("magma-validate {command}");
    let _ = writeln!(
        out,
        "<testsuites name=\"magma-validate\" tests=\"1\" failures=\"{failures}\" errors=\"0\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"1\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        xml(&suite)
    );
    let _ = writeln!(
        out,
        "    <testcase classname=\"{}\" name=\"{}\">",
        xml(&suite),
        xml(&format!(
            "{} {source} conforms to protocol 2.0",
            report.kind
        ))
    );
    if errors > 0 {
        let errs: Vec<&Finding> = report.errors().collect();
        let _ = writeln!(
            out,
            "      <failure type=\"contract\" message=\"{}\">{}</failure>",
            xml(&format!(
                "{}: {}",
                plural(errors, "error", "errors"),
                errs[0]
            )),
            xml(&findings_text(&errs))
        );
    }
    let warns: Vec<&Finding> = report.warnings().collect();
    if !warns.is_empty() || !report.notes.is_empty() {
        let mut text = findings_text(&warns);
        for n in &report.notes {
            let _ = writeln!(text, "note: {n}");
        }
        let _ = writeln!(out, "      <system-out>{}</system-out>", xml(&text));
    }
    out.push_str("    </testcase>\n  </testsuite>\n</testsuites>\n");
    out
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
    out.push('\n');
    let width = report
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for c in &report.checks {
        let tag = match c.status {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        };
        let _ = writeln!(out, "{tag}  {:width$}  {}", c.name, c.reason);
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
    let s = &report.summary;
    let _ = writeln!(
        out,
        "{}: {} passed, {} failed, {}, {} skipped",
        plural(s.total, "check", "checks"),
        s.passed,
        s.failed,
        plural(s.warnings, "warning", "warnings"),
        s.skipped
    );
    out
}

/// The probe report as one JSON object: `target`, `agent`, `summary`
/// (`passed`, `failed`, `warnings`, `skipped`, `total`) and `checks`.
pub fn probe_json(report: &ProbeReport) -> String {
    serde_json::to_string_pretty(report).unwrap_or_default() + "\n"
}

/// JUnit XML for a probe report: one test case per check; warnings in
/// `system-out`, skipped checks as `skipped`.
pub fn probe_junit(report: &ProbeReport) -> String {
    let s = &report.summary;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let time: f64 = report
        .checks
        .iter()
        .map(|c| c.duration_ms as f64)
        .sum::<f64>()
        / 1000.0;
    let _ = writeln!(
        out,
        "<testsuites name=\"magma-validate\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{time:.3}\">",
        s.total, s.failed, s.skipped
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{time:.3}\">",
        xml(&format!("magma-validate probe {}", report.target)),
        s.total,
        s.failed,
        s.skipped
    );
    for c in &report.checks {
        let errors: Vec<&Finding> = c.findings.iter().filter(|f| f.is_error()).collect();
        let warnings: Vec<&Finding> = c.findings.iter().filter(|f| !f.is_error()).collect();
        let mut inner = String::new();
        match c.status {
            Status::Fail => {
                let _ = writeln!(
                    inner,
                    "      <failure type=\"{}\" message=\"{}\">{}</failure>",
                    xml(errors.first().map_or("fail", |f| f.code.as_str())),
                    xml(&c.reason),
                    xml(&findings_text(&errors))
                );
            }
            Status::Skip => {
                let _ = writeln!(inner, "      <skipped message=\"{}\"/>", xml(&c.reason));
            }
            Status::Pass | Status::Warn => {}
        }
        if !warnings.is_empty() {
            let _ = writeln!(
                inner,
                "      <system-out>{}</system-out>",
                xml(&findings_text(&warnings))
            );
        }
        let open = format!(
            "    <testcase classname=\"magma-validate.probe\" name=\"{}\" time=\"{:.3}\"",
            xml(&c.name),
            c.duration_ms as f64 / 1000.0
        );
        if inner.is_empty() {
            let _ = writeln!(out, "{open}/>");
        } else {
            let _ = write!(out, "{open}>\n{inner}    </testcase>\n");
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_drops_forbidden_characters() {
        assert_eq!(
            xml("a<b>&\"'\u{0}\n"),
            "a&lt;b&gt;&amp;&quot;&apos;\u{FFFD}\n"
        );
    }
}
