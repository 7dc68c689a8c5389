//! `PUT /v1/coaching/sessions/{run_id}`: [`CoachingSessionConfig`] and its
//! [`CoachingBackendConfig`]s; the validator, the equality of the
//! reference's `==`, and the writer.

use crate::error::{Error, ErrorKind, Issue};
use crate::json::write::{write_bool, write_str, write_u64};
use crate::json::{Json, Location, Map, Number, Shape, WriteJson, to_value};
use crate::limits::READ;
use crate::validate::{
    Fields, Validate, Validation, model_map, model_object, non_negative_u64, positive_float,
    str_map, strict_bool, strict_str,
};

/// The default `timeout` of a backend, in seconds.
const DEFAULT_TIMEOUT: f64 = 30.0;
/// The default `max_retry` of a backend.
const DEFAULT_MAX_RETRY: u64 = 3;

/// One LLM endpoint the caller hands over for the session's coach.
///
/// Equality is the reference's `==`: `headers` compare as maps (order does
/// not matter), `timeout` as a float (`30` equals `30.0`).
#[derive(Debug, Clone)]
pub struct CoachingBackendConfig {
    kind: String,
    endpoint: String,
    default_model: String,
    headers: Map<String>,
    timeout: f64,
    max_retry: u64,
}

impl CoachingBackendConfig {
    /// A backend with the reference's defaults: no headers, a 30 s timeout,
    /// 3 retries.
    pub fn new(
        kind: impl Into<String>,
        endpoint: impl Into<String>,
        default_model: impl Into<String>,
    ) -> Self {
        CoachingBackendConfig {
            kind: kind.into(),
            endpoint: endpoint.into(),
            default_model: default_model.into(),
            headers: Map::new(),
            timeout: DEFAULT_TIMEOUT,
            max_retry: DEFAULT_MAX_RETRY,
        }
    }

    /// Sets the headers sent to the backend.
    pub fn with_headers(mut self, headers: Map<String>) -> Self {
        self.headers = headers;
        self
    }

    /// Sets the timeout in seconds; fails unless it is finite and greater
    /// than 0, with the error the parser gives.
    pub fn with_timeout(mut self, seconds: f64) -> Result<Self, Error> {
        let mut cx = Validation::new("CoachingBackendConfig");
        let input = Number::from_f64(seconds).map_or(Json::Null, Json::Number);
        let timeout = cx.at_field("timeout", |cx| positive_float(input, cx));
        let timeout = cx.finish_opt(timeout)?;
        self.timeout = timeout;
        Ok(self)
    }

    /// Sets how many times a call is retried.
    pub fn with_max_retry(mut self, max_retry: u64) -> Self {
        self.max_retry = max_retry;
        self
    }

    /// `type`: the kind of backend (e.g. `openai`, `vllm`).
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The backend's URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The model to ask.
    pub fn default_model(&self) -> &str {
        &self.default_model
    }

    /// Headers to send (credentials among them: do not log them).
    pub fn headers(&self) -> &Map<String> {
        &self.headers
    }

    /// The timeout of one call, in seconds (finite, greater than 0).
    pub fn timeout(&self) -> f64 {
        self.timeout
    }

    /// How many times a call is retried.
    pub fn max_retry(&self) -> u64 {
        self.max_retry
    }
}

impl PartialEq for CoachingBackendConfig {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.endpoint == other.endpoint
            && self.default_model == other.default_model
            && maps_equal(&self.headers, &other.headers)
            && self.timeout == other.timeout
            && self.max_retry == other.max_retry
    }
}

/// Python's `dict ==`: same keys, equal values, any order.
fn maps_equal<V: PartialEq>(a: &Map<V>, b: &Map<V>) -> bool {
    a.len() == b.len() && a.iter().all(|(k, v)| b.get(k) == Some(v))
}

/// The body of `PUT /v1/coaching/sessions/{run_id}`: the backends (at least
/// one, which is why the fields are reached through methods) and whether
/// the coach's logs are captured.
///
/// Equality is the reference's `==` on the model: backends compare as a
/// map (order does not matter), each as [`CoachingBackendConfig`] does. A
/// server compares configs this way to make a repeated `PUT` idempotent.
#[derive(Debug, Clone)]
pub struct CoachingSessionConfig {
    backends: Map<CoachingBackendConfig>,
    capture_logs: bool,
}

impl CoachingSessionConfig {
    /// A config capturing logs; fails, as the parser would, without backends.
    pub fn new(backends: Map<CoachingBackendConfig>) -> Result<Self, Error> {
        let config = CoachingSessionConfig {
            backends,
            capture_logs: true,
        };
        let mut cx = Validation::new("CoachingSessionConfig");
        if let Some(issue) = backends_issue(&config) {
            cx.push(issue);
        }
        cx.finish(config)
    }

    /// Sets `capture_logs`.
    pub fn with_capture_logs(mut self, capture_logs: bool) -> Self {
        self.capture_logs = capture_logs;
        self
    }

    /// The backends, by name, in the order given (never empty).
    pub fn backends(&self) -> &Map<CoachingBackendConfig> {
        &self.backends
    }

    /// Whether the coach's logs go back in the replies (default `true`).
    pub fn capture_logs(&self) -> bool {
        self.capture_logs
    }
}

impl PartialEq for CoachingSessionConfig {
    fn eq(&self, other: &Self) -> bool {
        self.capture_logs == other.capture_logs && maps_equal(&self.backends, &other.backends)
    }
}

// ---------------------------------------------------------------------------
// Validation, field by field in the reference's declaration order

impl Validate for CoachingBackendConfig {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "CoachingBackendConfig", cx)?;
        let mut f = Fields::new(obj, &["type", "endpoint", "default_model"], cx);
        let kind = f.required("type", cx, strict_str);
        let endpoint = f.required("endpoint", cx, strict_str);
        let model = f.required("default_model", cx, strict_str);
        let headers = f.optional("headers", cx, Map::new, str_map);
        let timeout = f.optional("timeout", cx, || DEFAULT_TIMEOUT, positive_float);
        let retry = f.optional("max_retry", cx, || DEFAULT_MAX_RETRY, non_negative_u64);
        f.finish(cx).then_some(())?;
        Some(CoachingBackendConfig {
            kind: kind?,
            endpoint: endpoint?,
            default_model: model?,
            headers: headers?,
            timeout: timeout?,
            max_retry: retry?,
        })
    }
}

fn session(v: Json, cx: &mut Validation) -> Option<CoachingSessionConfig> {
    let obj = model_object(v, "CoachingSessionConfig", cx)?;
    let mut f = Fields::new(obj, &[], cx);
    let backends = f.optional("backends", cx, Map::new, |v, cx| {
        model_map(v, cx, CoachingBackendConfig::validate)
    });
    let capture_logs = f.optional("capture_logs", cx, || true, strict_bool);
    f.finish(cx).then_some(())?;
    let config = CoachingSessionConfig {
        backends: backends?,
        capture_logs: capture_logs?,
    };
    if let Some(issue) = backends_issue(&config) {
        cx.push(issue);
        return None;
    }
    Some(config)
}

/// The reference's `validate_backends` rule, reported at the root.
fn backends_issue(config: &CoachingSessionConfig) -> Option<Issue> {
    config.backends.is_empty().then(|| {
        Issue::new(
            ErrorKind::ValueError,
            Location::root(),
            "Value error, LLM coaching requires at least one backend",
        )
        .with_input(to_value(config, READ))
    })
}

// ---------------------------------------------------------------------------
// Writing, every field in the reference's order (`timeout` as Python
// writes a float: `30.0`)

impl WriteJson for CoachingBackendConfig {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"type\":");
        write_str(out, &self.kind);
        out.push_str(",\"endpoint\":");
        write_str(out, &self.endpoint);
        out.push_str(",\"default_model\":");
        write_str(out, &self.default_model);
        out.push_str(",\"headers\":");
        self.headers.write_json(out);
        out.push_str(",\"timeout\":");
        match Number::from_f64(self.timeout) {
            Some(n) => n.write_json(out),
            None => out.push_str("null"),
        }
        out.push_str(",\"max_retry\":");
        write_u64(out, self.max_retry);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        130 + self.kind.len()
            + self.endpoint.len()
            + self.default_model.len()
            + self.headers.size_hint()
    }
}

impl WriteJson for CoachingSessionConfig {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"backends\":");
        self.backends.write_json(out);
        out.push_str(",\"capture_logs\":");
        write_bool(out, self.capture_logs);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        36 + self.backends.size_hint()
    }
}

document!(CoachingSessionConfig, &Shape::Any, session);
document!(
    CoachingBackendConfig,
    &Shape::Any,
    CoachingBackendConfig::validate
);

// ---------------------------------------------------------------------------
// JSON Schema (feature `schema`)

#[cfg(feature = "schema")]
mod json_schema {
    use super::{CoachingBackendConfig, CoachingSessionConfig};
    use crate::json::{Json, Object};
    use crate::json_schema::{HasSchema, Refs, S, integer, model};

    impl HasSchema for CoachingBackendConfig {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "CoachingBackendConfig",
                "One LLM endpoint the caller hands over for the session's coach.",
                vec![
                    ("type", S::ty("string").doc("The kind of backend.")),
                    ("endpoint", S::ty("string").doc("The backend's URL.")),
                    ("default_model", S::ty("string").doc("The model to ask.")),
                    (
                        "headers",
                        S::ty("object")
                            .set("additionalProperties", S::ty("string"))
                            .set("default", Object::new())
                            .doc("Headers to send; values are strings (`null` is refused)."),
                    ),
                    (
                        "timeout",
                        S::ty("number")
                            .set("exclusiveMinimum", 0)
                            .set("default", 30)
                            .doc(
                                "Seconds per call; an integer is accepted, a string or a \
                                  boolean is not, and the value must stay above 0 once read \
                                  as a float (`1e-400` is 0).",
                            ),
                    ),
                    (
                        "max_retry",
                        S::ty("integer")
                            .set("minimum", 0)
                            .set("maximum", u64::MAX)
                            .set("default", 3)
                            .doc(&integer("How many times a call is retried.", "unsigned ")),
                    ),
                ],
                &["type", "endpoint", "default_model"],
            )
        }
    }

    impl HasSchema for CoachingSessionConfig {
        fn schema(refs: &Refs<'_>) -> Object {
            model(
                "CoachingSessionConfig",
                "The body of `PUT /v1/coaching/sessions/{run_id}`. Not expressible here: at \
                 least one backend (the reference's `validate_backends`).",
                vec![
                    (
                        "backends",
                        S::ty("object")
                            .set("additionalProperties", refs.to("CoachingBackendConfig"))
                            .set("default", Object::new())
                            .doc("The backends, by name."),
                    ),
                    (
                        "capture_logs",
                        S::ty("boolean")
                            .set("default", Json::Bool(true))
                            .doc("Whether the coach's logs go back in the replies."),
                    ),
                ],
                &[],
            )
        }
    }
}
