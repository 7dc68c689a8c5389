//! `--metrics-listen ADDR`: the proxy's counters for Prometheus, as the
//! text exposition format (version 0.0.4) at `GET /metrics` on a listener
//! of their own, so that the agent's paths, which the proxy forwards, are
//! never shadowed.
//!
//! The counters are the summary's, read while the proxy runs: exchanges,
//! answers per status, per check the exchanges that passed, warned and
//! failed, findings per check, severity and code, proxy faults, and the
//! latency as a histogram (Prometheus computes its quantiles from the
//! buckets). An exchange is counted once its checks are done, a moment
//! after its answer reached the consumer.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::summary::Stats;
use super::{Checking, serve_until_stopped};

/// The upper bounds of the latency histogram's buckets, in seconds: from a
/// fast agent's milliseconds to a model's minutes, up to the default
/// `--timeout` of 360 s.
const LATENCY_BUCKETS_S: [f64; 16] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 360.0,
];

/// The content type of the text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves `GET /metrics` on `listener` until `stop` turns true.
pub(super) async fn serve(
    listener: TcpListener,
    checking: Arc<Checking>,
    started: Instant,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => Some(accepted),
            _ = stop.wait_for(|s| *s) => None,
        };
        let Some(accepted) = accepted else {
            return;
        };
        let Ok((tcp, _)) = accepted else {
            // Out of file descriptors, say: the metrics wait, the traffic
            // does not depend on them.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let checking = Arc::clone(&checking);
        let svc = service_fn(move |req: Request<Incoming>| {
            let checking = Arc::clone(&checking);
            async move { Ok::<_, Infallible>(answer(&req, &checking, started)) }
        });
        tokio::spawn(serve_until_stopped(tcp, svc, stop.clone()));
    }
}

fn answer(req: &Request<Incoming>, checking: &Checking, started: Instant) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = header::HeaderValue::from_str(content_type) {
            r.headers_mut().insert(header::CONTENT_TYPE, v);
        }
        r
    };
    if req.uri().path() != "/metrics" {
        return reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "only /metrics is served here\n".to_owned(),
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "GET /metrics\n".to_owned(),
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let stats = checking
        .stats
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let text = render(&stats, started.elapsed().as_secs_f64());
    reply(StatusCode::OK, CONTENT_TYPE, text)
}

/// A label value with `\`, `"` and line feeds escaped, as the format asks.
fn label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The metrics of `stats`, `uptime_s` seconds after the proxy started.
pub(super) fn render(stats: &Stats, uptime_s: f64) -> String {
    let s = &stats.summary;
    let mut out = String::new();
    family(
        &mut out,
        "magma_proxy_uptime_seconds",
        "gauge",
        "Seconds since the proxy started.",
    );
    let _ = writeln!(out, "magma_proxy_uptime_seconds {uptime_s:.3}");
    family(
        &mut out,
        "magma_proxy_exchanges_total",
        "counter",
        "Exchanges forwarded (or answered by the proxy itself) and checked.",
    );
    let _ = writeln!(out, "magma_proxy_exchanges_total {}", s.exchanges);
    family(
        &mut out,
        "magma_proxy_answers_total",
        "counter",
        "Answers by HTTP status (the agent's, or the proxy's own 413, 502, 503, 504).",
    );
    for (status, n) in &s.statuses {
        let _ = writeln!(out, "magma_proxy_answers_total{{status=\"{status}\"}} {n}");
    }
    family(
        &mut out,
        "magma_proxy_checks_total",
        "counter",
        "Exchanges a check ran on, by result: passed, warned (warnings only) or failed (an error).",
    );
    for (check, c) in &s.checks {
        let check = label(check);
        let passed = c.checked.saturating_sub(c.failed + c.warned);
        for (result, n) in [
            ("passed", passed),
            ("warned", c.warned),
            ("failed", c.failed),
        ] {
            let _ = writeln!(
                out,
                "magma_proxy_checks_total{{check=\"{check}\",result=\"{result}\"}} {n}"
            );
        }
    }
    family(
        &mut out,
        "magma_proxy_findings_total",
        "counter",
        "Findings by check, severity and code (all locations together).",
    );
    let mut findings: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
    for f in &s.findings {
        *findings
            .entry((f.check.as_str(), f.severity.as_str(), f.code.as_str()))
            .or_default() += f.count;
    }
    for ((check, severity, code), n) in findings {
        let _ = writeln!(
            out,
            "magma_proxy_findings_total{{check=\"{}\",severity=\"{}\",code=\"{}\"}} {n}",
            label(check),
            label(severity),
            label(code)
        );
    }
    family(
        &mut out,
        "magma_proxy_faults_total",
        "counter",
        "Exchanges the proxy forwarded unchecked (their answer did not fit in the memory budget).",
    );
    let _ = writeln!(out, "magma_proxy_faults_total {}", s.proxy_faults.len());
    family(
        &mut out,
        "magma_proxy_latency_seconds",
        "histogram",
        "From a request's arrival to the agent's whole answer, for the forwarded exchanges.",
    );
    // From the latencies the summary keeps for its percentiles.
    for bound in LATENCY_BUCKETS_S {
        let at_or_below = stats
            .latencies
            .iter()
            .filter(|ms| **ms / 1000.0 <= bound)
            .count();
        let _ = writeln!(
            out,
            "magma_proxy_latency_seconds_bucket{{le=\"{bound}\"}} {at_or_below}"
        );
    }
    let count = stats.latencies.len();
    let _ = writeln!(
        out,
        "magma_proxy_latency_seconds_bucket{{le=\"+Inf\"}} {count}"
    );
    let _ = writeln!(
        out,
        "magma_proxy_latency_seconds_sum {:.6}",
        stats.latencies.iter().sum::<f64>() / 1000.0
    );
    let _ = writeln!(out, "magma_proxy_latency_seconds_count {count}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::inspect::Checked;
    use crate::report::Finding;

    #[test]
    fn counters_buckets_and_labels_as_the_format_wants() {
        let mut stats = Stats::default();
        let warning = Checked {
            check: "response",
            finding: Finding::warning("response", "empty_decision", "[0].output", "m"),
        };
        let error = Checked {
            check: "response",
            finding: Finding::error("response", "missing", "[0].memory", "m"),
        };
        stats.add(1, 200, Some(3.0), &["request", "response"], &[warning]);
        stats.add(2, 200, Some(700.0), &["request", "response"], &[error]);
        stats.add(3, 502, None, &["upstream"], &[]);
        let text = render(&stats, 1.5);
        for line in [
            "magma_proxy_exchanges_total 3",
            "magma_proxy_answers_total{status=\"200\"} 2",
            "magma_proxy_answers_total{status=\"502\"} 1",
            "magma_proxy_checks_total{check=\"response\",result=\"passed\"} 0",
            "magma_proxy_checks_total{check=\"response\",result=\"warned\"} 1",
            "magma_proxy_checks_total{check=\"response\",result=\"failed\"} 1",
            "magma_proxy_checks_total{check=\"request\",result=\"passed\"} 2",
            "magma_proxy_findings_total{check=\"response\",severity=\"error\",code=\"missing\"} 1",
            "magma_proxy_findings_total{check=\"response\",severity=\"warning\",code=\"empty_decision\"} 1",
            "magma_proxy_latency_seconds_bucket{le=\"0.005\"} 1",
            "magma_proxy_latency_seconds_bucket{le=\"0.5\"} 1",
            "magma_proxy_latency_seconds_bucket{le=\"1\"} 2",
            "magma_proxy_latency_seconds_bucket{le=\"+Inf\"} 2",
            "magma_proxy_latency_seconds_sum 0.703000",
            "magma_proxy_latency_seconds_count 2",
            "magma_proxy_uptime_seconds 1.500",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        // Every sample line belongs to a family declared before it.
        let mut declared = Vec::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                declared.push(rest.split(' ').next().unwrap().to_owned());
            } else if !l.starts_with('#') {
                let name = l.split(['{', ' ']).next().unwrap();
                assert!(
                    declared.iter().any(|d| name == d
                        || name
                            .strip_prefix(d.as_str())
                            .is_some_and(|s| { matches!(s, "_bucket" | "_sum" | "_count") })),
                    "{l}"
                );
            }
        }
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
