//! Metrics (feature `metrics`): the `metrics` facade with the Prometheus
//! exporter as its recorder, served on `GET /metrics`.

use std::fmt;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, Key, KeyName, Label, Level, Metadata, Recorder, SetRecorderError,
    SharedString, Unit,
};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

use crate::reply::Failure;
use crate::routes::Route;

fn failure_label(failure: Failure) -> &'static str {
    match failure {
        Failure::Timeout => "timeout",
        Failure::Panic => "panic",
        Failure::Miscount => "miscount",
        Failure::Rejection => "rejection",
        Failure::Oversized => "oversized",
    }
}

/// Statuses whose counters are kept at hand; others are looked up.
const STATUSES: [u16; 12] = [200, 400, 404, 405, 408, 413, 415, 422, 500, 503, 504, 204];

const REQUESTS: &str = "magma_requests_total";
const DURATION: &str = "magma_request_duration_seconds";
const RUNNING: &str = "magma_inferences_running";
const WAITING: &str = "magma_inferences_waiting";
const CANDIDATES: &str = "magma_candidates_total";
const FAILURES: &str = "magma_inference_failures_total";
const EXPIRED: &str = "magma_coaching_sessions_expired_total";
const ERROR_CANDIDATES: &str = "magma_error_candidates_total";

/// Latency buckets, in seconds: from half a millisecond (health, info) to
/// the 360 s BENCH allows an inference.
const BUCKETS: [f64; 19] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0, 300.0, 600.0,
];

/// How often samples of the latency histogram are folded into its buckets
/// when nobody scrapes (a scrape does it too), so that memory stays flat.
const UPKEEP: Duration = Duration::from_secs(5);

/// The server's metrics, in the Prometheus text format on `GET /metrics`
/// (under the path prefix, if any) when set as
/// [`Config::metrics`](crate::Config::metrics).
///
/// | metric | type | labels |
/// |---|---|---|
/// | `magma_requests_total` | counter | `route` (`/health`, `/v1/info`, `/v1/responses`, `/v1/coaching`, `/v1/coaching/sessions/{run_id}`, `/openapi.json`, `/metrics`, `unmatched`), `status` |
/// | `magma_request_duration_seconds` | histogram | `route` |
/// | `magma_inferences_running` | gauge | |
/// | `magma_inferences_waiting` | gauge (waiting for a slot) | |
/// | `magma_candidates_total` | counter | `status` (`completed`, `error`) |
/// | `magma_error_candidates_total` | counter | `code` (the error candidates' `error.code`, cut to 64 characters) |
/// | `magma_inference_failures_total` | counter | `kind` (`timeout`, `panic`, `miscount`, `rejection`, `oversized`) |
///
/// Each `Metrics` has its own registry. [`install_global`](Metrics::install_global)
/// makes it the process's `metrics` recorder as well, so that what an agent
/// records with the `metrics` macros (`metrics::counter!("tokens_total")`)
/// is served on the same endpoint. Clones share the registry.
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

struct Inner {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// `[route][status index]`, registered on first use.
    requests: [[OnceLock<Counter>; STATUSES.len()]; Route::COUNT],
    duration: [Histogram; Route::COUNT],
    running: Gauge,
    waiting: Gauge,
    completed: Counter,
    errors: Counter,
    failures: [Counter; Failure::COUNT],
    expired: Counter,
    upkeep: OnceLock<()>,
}

fn metadata() -> Metadata<'static> {
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()))
}

fn key(name: &'static str, labels: &[(&'static str, &'static str)]) -> Key {
    let labels: Vec<Label> = labels.iter().map(|(k, v)| Label::new(*k, *v)).collect();
    Key::from_parts(name, labels)
}

impl Metrics {
    /// A new, empty registry with the server's metrics described.
    pub fn new() -> Metrics {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(DURATION.to_owned()), &BUCKETS)
            // Only fails for an empty list of buckets.
            .expect("buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        let m = metadata();
        let describe = |name: &'static str, unit: Option<Unit>, text: &'static str| {
            let name = KeyName::from_const_str(name);
            let text = SharedString::const_str(text);
            recorder.describe_counter(name, unit, text);
        };
        describe(REQUESTS, None, "Requests answered, by route and status");
        describe(
            CANDIDATES,
            None,
            "Candidates returned in 200 answers, by status",
        );
        describe(
            EXPIRED,
            None,
            "Coaching sessions closed for going without a request for the idle timeout",
        );
        describe(
            ERROR_CANDIDATES,
            None,
            "Error candidates returned in 200 answers, by error code",
        );
        describe(
            FAILURES,
            None,
            "Inferences answered without 200, by kind (timeout 504, panic, miscount and oversized 500, rejection 422)",
        );
        recorder.describe_histogram(
            KeyName::from_const_str(DURATION),
            Some(Unit::Seconds),
            SharedString::const_str("Time from the request head to the answer, by route"),
        );
        recorder.describe_gauge(
            KeyName::from_const_str(RUNNING),
            None,
            SharedString::const_str("Inferences running in the agent"),
        );
        recorder.describe_gauge(
            KeyName::from_const_str(WAITING),
            None,
            SharedString::const_str("Inferences waiting for a slot (max_concurrent_inferences)"),
        );
        let duration = Route::ALL
            .map(|r| recorder.register_histogram(&key(DURATION, &[("route", r.label())]), &m));
        let running = recorder.register_gauge(&key(RUNNING, &[]), &m);
        let waiting = recorder.register_gauge(&key(WAITING, &[]), &m);
        running.set(0.0);
        waiting.set(0.0);
        let completed = recorder.register_counter(&key(CANDIDATES, &[("status", "completed")]), &m);
        let errors = recorder.register_counter(&key(CANDIDATES, &[("status", "error")]), &m);
        let failures = Failure::ALL
            .map(|f| recorder.register_counter(&key(FAILURES, &[("kind", failure_label(f))]), &m));
        let expired = recorder.register_counter(&key(EXPIRED, &[]), &m);
        expired.increment(0);
        Metrics(Arc::new(Inner {
            requests: std::array::from_fn(|_| std::array::from_fn(|_| OnceLock::new())),
            duration,
            running,
            waiting,
            completed,
            errors,
            failures,
            expired,
            recorder,
            handle,
            upkeep: OnceLock::new(),
        }))
    }

    /// Everything recorded so far, in the Prometheus text format.
    pub fn render(&self) -> String {
        self.0.handle.render()
    }

    /// Makes this registry the process's `metrics` recorder, so that the
    /// `metrics` macros in agent code record into it. Fails if the process
    /// already has one.
    pub fn install_global(&self) -> Result<(), SetRecorderError<Metrics>> {
        metrics::set_global_recorder(self.clone())
    }

    /// Starts folding latency samples into their buckets every few seconds
    /// (once per registry; needs a Tokio runtime, does nothing without one).
    pub(crate) fn start_upkeep(&self) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        if self.0.upkeep.set(()).is_err() {
            return;
        }
        let weak: Weak<Inner> = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(UPKEEP);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match weak.upgrade() {
                    Some(inner) => inner.handle.run_upkeep(),
                    None => return,
                }
            }
        });
    }

    /// A request was answered.
    pub(crate) fn request(&self, route: Route, status: u16, elapsed: Duration) {
        let inner = &*self.0;
        let r = route.index();
        inner.duration[r].record(elapsed.as_secs_f64());
        match STATUSES.iter().position(|s| *s == status) {
            Some(s) => inner.requests[r][s]
                .get_or_init(|| self.requests_counter(route, status))
                .increment(1),
            None => self.requests_counter(route, status).increment(1),
        }
    }

    fn requests_counter(&self, route: Route, status: u16) -> Counter {
        let labels = vec![
            Label::new("route", route.label()),
            Label::new("status", status.to_string()),
        ];
        self.0
            .recorder
            .register_counter(&Key::from_parts(REQUESTS, labels), &metadata())
    }

    /// An inference waits for a slot until the guard is dropped.
    pub(crate) fn waiting(&self) -> GaugeGuard<'_> {
        GaugeGuard::new(&self.0.waiting)
    }

    /// An inference runs until the guard is dropped.
    pub(crate) fn running(&self) -> GaugeGuard<'_> {
        GaugeGuard::new(&self.0.running)
    }

    pub(crate) fn candidates(&self, completed: u64, errors: u64) {
        self.0.completed.increment(completed);
        self.0.errors.increment(errors);
    }

    /// `count` error candidates with `code`.
    pub(crate) fn error_candidates(&self, code: &str, count: u64) {
        let key = Key::from_parts(ERROR_CANDIDATES, vec![Label::new("code", code.to_owned())]);
        self.0
            .recorder
            .register_counter(&key, &metadata())
            .increment(count);
    }

    pub(crate) fn failure(&self, failure: Failure) {
        self.0.failures[failure as usize].increment(1);
    }

    /// A coaching session was closed for going without a request.
    pub(crate) fn coaching_session_expired(&self) {
        self.0.expired.increment(1);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Adds one to a gauge, and takes it back when dropped (also when the
/// request is cancelled).
pub(crate) struct GaugeGuard<'a>(&'a Gauge);

impl<'a> GaugeGuard<'a> {
    fn new(gauge: &'a Gauge) -> GaugeGuard<'a> {
        gauge.increment(1.0);
        GaugeGuard(gauge)
    }
}

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// The registry as a `metrics` recorder, e.g. for
/// [`metrics::with_local_recorder`] or a recorder layer of your own.
impl Recorder for Metrics {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.recorder.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.recorder.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.recorder.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        self.0.recorder.register_counter(key, metadata)
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        self.0.recorder.register_gauge(key, metadata)
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        self.0.recorder.register_histogram(key, metadata)
    }
}
