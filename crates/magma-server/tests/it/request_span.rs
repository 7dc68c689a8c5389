//! Every event an agent emits is tied to its request: the request span
//! carries the body's `request_id` and an incoming `X-Request-Id`, and
//! `RequestContext` reaches `respond` and `respond_batch`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use magma_server::{
    Agent, AgentDecision, AgentInfo, AgentInput, AgentRequest, Candidate, Rejection, RequestContext,
};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

use crate::support::{TestServer, send, user_request};

/// Field name to value, as text.
#[derive(Debug, Default, Clone)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// One event with the spans it happened in, innermost first.
#[derive(Debug, Clone)]
struct Captured {
    fields: Fields,
    spans: Vec<(String, Fields)>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.0.get(name).map(String::as_str)
    }

    /// A field of the enclosing `request` span.
    fn request_field(&self, name: &str) -> Option<&str> {
        self.spans
            .iter()
            .find(|(span, _)| span == "request")
            .and_then(|(_, f)| f.0.get(name).map(String::as_str))
    }
}

/// Events with a `marker` field, from every test of this binary.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

/// The capture, installed once as the process's subscriber: a scoped
/// subscriber races with the callsite cache of tests running without one.
fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture = Capture::default();
        tracing::subscriber::set_global_default(Registry::default().with(capture.clone()))
            .expect("no other subscriber in this test binary");
        capture
    })
}

impl Capture {
    fn events_with(&self, field: &str, value: &str) -> Vec<Captured> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.field(field) == Some(value))
            .cloned()
            .collect()
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        ctx.span(id).unwrap().extensions_mut().insert(fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let mut ext = span.extensions_mut();
        if let Some(fields) = ext.get_mut::<Fields>() {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if !fields.0.contains_key("marker") {
            return;
        }
        let spans = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .map(|span| {
                        let f = span.extensions().get::<Fields>().cloned();
                        (span.name().to_owned(), f.unwrap_or_default())
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.0.lock().unwrap().push(Captured { fields, spans });
    }
}

/// Logs from `respond` after a pause (so that concurrent requests
/// interleave) and answers with what `RequestContext` told it.
struct Chatty;

fn context_text() -> String {
    match RequestContext::current() {
        Some(c) => format!(
            "id={} header={} client={}",
            c.request_id(),
            c.x_request_id().unwrap_or("-"),
            c.client_ip().map_or("-".into(), |a| a.to_string())
        ),
        None => "no context".into(),
    }
}

impl Agent for Chatty {
    fn info(&self) -> AgentInfo {
        AgentInfo::new("chatty", "1.0.0")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        tokio::time::sleep(Duration::from_millis(40)).await;
        tracing::info!(marker = "from-the-agent", content = %input.instruction.content, "answering");
        let say = AgentDecision::say(context_text());
        Ok(vec![Candidate::new(input.memory.clone(), say)])
    }
}

/// Overrides `respond_batch` and logs from it.
struct Batcher;

impl Agent for Batcher {
    fn info(&self) -> AgentInfo {
        AgentInfo::new("batcher", "1.0.0")
    }

    async fn respond(&self, _: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        Err(Rejection::new("batch only"))
    }

    async fn respond_batch(
        &self,
        request: &AgentRequest,
    ) -> Result<Vec<Vec<Candidate>>, Rejection> {
        tracing::info!(marker = "from-the-batch", "batching");
        Ok(request
            .inputs()
            .iter()
            .map(|i| {
                let say = AgentDecision::say(context_text());
                vec![Candidate::new(i.memory.clone(), say)]
            })
            .collect())
    }
}

fn said(reply: &crate::support::Reply) -> String {
    let body = reply.json();
    let first = &body.as_array().expect("array")[0];
    first
        .as_object()
        .and_then(|o| o.get("output"))
        .and_then(|d| d.as_object()?.get("say"))
        .and_then(|s| s.as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no say in {}", reply.text()))
}

async fn post(server: &TestServer, body: String, header_id: Option<&str>) -> crate::support::Reply {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(id) = header_id {
        headers.push(("x-request-id", id));
    }
    send(
        server.addr,
        Method::POST,
        "/v1/responses",
        &headers,
        Bytes::from(body),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_events_carry_the_body_id_and_the_incoming_header_id() {
    let capture = capture();
    let server = TestServer::start(Chatty).await;

    // Two requests at once, one with an X-Request-Id of its own.
    let (plain, headed) = tokio::join!(
        post(&server, user_request("body-id-1", "first", 1), None),
        post(
            &server,
            user_request("body-id-2", "second", 1),
            Some("hdr-42")
        ),
    );
    assert_eq!(plain.header("x-request-id"), Some("body-id-1"));
    assert_eq!(headed.header("x-request-id"), Some("hdr-42"), "echoed");
    assert_eq!(said(&plain), "id=body-id-1 header=- client=127.0.0.1");
    assert_eq!(said(&headed), "id=body-id-2 header=hdr-42 client=127.0.0.1");

    // Other tests of this binary use the same agent with other contents.
    let events: Vec<Captured> = capture
        .events_with("marker", "from-the-agent")
        .into_iter()
        .filter(|e| matches!(e.field("content"), Some("first" | "second")))
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    for e in &events {
        let (want_id, want_header) = match e.field("content") {
            Some("first") => ("body-id-1", None),
            Some("second") => ("body-id-2", Some("hdr-42")),
            other => panic!("unexpected event {other:?}: {e:?}"),
        };
        assert_eq!(e.request_field("request_id"), Some(want_id), "{e:?}");
        assert_eq!(e.request_field("x_request_id"), want_header, "{e:?}");
        assert_eq!(e.request_field("method"), Some("POST"));
        assert_eq!(e.request_field("path"), Some("/v1/responses"));
    }
    server.stop().await;
}

#[tokio::test]
async fn respond_batch_sees_the_context_and_runs_in_the_span() {
    let capture = capture();
    let server = TestServer::start(Batcher).await;
    let reply = post(&server, user_request("b-1", "x", 1), Some("trace-7")).await;
    assert_eq!(said(&reply), "id=b-1 header=trace-7 client=127.0.0.1");
    let events = capture.events_with("marker", "from-the-batch");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].request_field("request_id"), Some("b-1"));
    assert_eq!(events[0].request_field("x_request_id"), Some("trace-7"));
    server.stop().await;
}

#[tokio::test]
async fn an_unusable_x_request_id_is_ignored_and_health_echoes_a_good_one() {
    let server = TestServer::start(Chatty).await;
    let long = "a".repeat(129);
    for bad in ["has space", long.as_str()] {
        let reply = post(&server, user_request("body-9", "x", 1), Some(bad)).await;
        assert_eq!(reply.header("x-request-id"), Some("body-9"), "{bad}");
        assert_eq!(said(&reply), "id=body-9 header=- client=127.0.0.1");
    }
    let reply = send(
        server.addr,
        Method::GET,
        "/health",
        &[("x-request-id", "probe-1")],
        Bytes::new(),
    )
    .await;
    assert_eq!(reply.header("x-request-id"), Some("probe-1"));
    // Without one, health gets a generated id.
    let reply = server.get("/health").await;
    assert!(reply.header("x-request-id").unwrap().starts_with("srv-"));
    assert!(
        RequestContext::current().is_none(),
        "no context outside an inference"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_trusted_proxys_forwarded_client_reaches_the_context() {
    let mut config = magma_server::Config::default();
    config.trusted_proxies = vec!["127.0.0.1".parse().unwrap(), "10.0.0.0/8".parse().unwrap()];
    let server = TestServer::with_config(Chatty, config).await;
    let cases = [
        ("x-forwarded-for", "203.0.113.9, 10.0.0.1", "203.0.113.9"),
        ("x-forwarded-for", "1.1.1.1, 198.51.100.2", "198.51.100.2"),
        (
            "forwarded",
            r#"for="[2001:db8::7]:4711";proto=https"#,
            "2001:db8::7",
        ),
    ];
    for (header, value, client) in cases {
        let reply = send(
            server.addr,
            Method::POST,
            "/v1/responses",
            &[("content-type", "application/json"), (header, value)],
            Bytes::from(user_request("fwd", "x", 1)),
        )
        .await;
        assert_eq!(
            said(&reply),
            format!("id=fwd header=- client={client}"),
            "{value}"
        );
    }
    server.stop().await;

    // Without trust, the headers are ignored.
    let server = TestServer::start(Chatty).await;
    let reply = send(
        server.addr,
        Method::POST,
        "/v1/responses",
        &[
            ("content-type", "application/json"),
            ("x-forwarded-for", "203.0.113.9"),
        ],
        Bytes::from(user_request("direct", "x", 1)),
    )
    .await;
    assert_eq!(said(&reply), "id=direct header=- client=127.0.0.1");
    server.stop().await;
}
