//! Every way an agent can answer wrongly, and the typed error for each.

use std::time::Duration;

use magma_client::magma_protocol::{
    self as magma_protocol, ErrorKind as IssueKind, IncompatibleAgent, Json, json,
};
use magma_client::{Client, ErrorKind, TransportCause};

use crate::support::{RawServer, Reply, StubServer, agent, free_port, request};

fn client(server: &StubServer) -> Client {
    Client::new(server.url()).unwrap()
}

#[test]
fn candidates_in_the_wrong_order_are_a_mismatch_that_says_where() {
    let server = StubServer::start(agent(|items| items.swap(1, 2)));
    let err = client(&server)
        .respond(&request("r-order", 2, 2))
        .unwrap_err();
    let ErrorKind::CandidateMismatch(m) = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(m.position, 1);
    let (expected, found) = (m.expected.as_ref().unwrap(), m.found.as_ref().unwrap());
    assert_eq!((expected.source_id, expected.candidate_index), (10, 1));
    assert_eq!((found.source_id, found.candidate_index), (11, 0));
    assert_eq!(
        err.url(),
        Some(format!("{}/v1/responses", server.url()).as_str())
    );
    assert!(err.to_string().starts_with("POST http://"), "{err}");
    assert!(err.to_string().contains("candidate 1 should be"), "{err}");
}

#[test]
fn a_missing_or_extra_candidate_is_a_mismatch() {
    let server = StubServer::start(agent(|items| {
        items.pop();
    }));
    let err = client(&server)
        .respond(&request("r-count", 2, 2))
        .unwrap_err();
    let ErrorKind::CandidateMismatch(m) = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(m.position, 3);
    assert!(m.found.is_none());
    assert_eq!(m.expected.as_ref().unwrap().source_id, 11);

    let server = StubServer::start(agent(|items| {
        let copy = items[0].clone();
        items.push(copy);
    }));
    let err = client(&server)
        .respond(&request("r-extra", 1, 1))
        .unwrap_err();
    let ErrorKind::CandidateMismatch(m) = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!((m.position, m.expected.is_none()), (1, true));
}

#[test]
fn a_wrong_request_id_is_a_mismatch() {
    let server = StubServer::start(agent(|items| {
        if let Json::Object(o) = &mut items[0] {
            o.insert("request_id", Json::from("someone-else"));
        }
    }));
    let err = client(&server).respond(&request("mine", 1, 1)).unwrap_err();
    let ErrorKind::CandidateMismatch(m) = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(m.position, 0);
    assert_eq!(m.expected.as_ref().unwrap().request_id, "mine");
    assert_eq!(m.found.as_ref().unwrap().request_id, "someone-else");
}

#[test]
fn an_invalid_field_is_an_invalid_body_with_its_location() {
    // A string source_id in the second candidate, and an unknown key.
    let server = StubServer::start(agent(|items| {
        if let Json::Object(o) = &mut items[1] {
            o.insert("source_id", Json::from("10"));
            o.insert("confidence", Json::from(1));
        }
    }));
    let err = client(&server)
        .respond(&request("r-field", 1, 2))
        .unwrap_err();
    let ErrorKind::InvalidBody(e) = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(e.model(), "AgentResponse");
    let found: Vec<_> = e
        .issues()
        .iter()
        .map(|i| (i.location().to_string(), i.kind()))
        .collect();
    assert!(
        found.contains(&("[1].source_id".to_owned(), IssueKind::IntType)),
        "{found:?}"
    );
    assert!(
        found.contains(&("[1].confidence".to_owned(), IssueKind::ExtraForbidden)),
        "{found:?}"
    );
    assert!(err.to_string().contains("[1].source_id"), "{err}");
    // The protocol error is the source.
    let source = std::error::Error::source(&err).unwrap();
    assert!(source.downcast_ref::<magma_protocol::Error>().is_some());
}

#[test]
fn a_completed_candidate_without_decision_and_non_json_are_invalid_bodies() {
    let server = StubServer::start(agent(|items| {
        if let Json::Object(o) = &mut items[0] {
            o.insert("output", Json::Null);
        }
    }));
    let err = client(&server).respond(&request("r", 1, 1)).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::InvalidBody(_)), "{err:?}");

    let server = StubServer::start(|_: &_| Reply::json(200, "<html>hello</html>"));
    let err = client(&server).respond(&request("r", 1, 1)).unwrap_err();
    let ErrorKind::InvalidBody(e) = err.kind() else {
        panic!("{err:?}")
    };
    assert!(e.is_syntax());
    let err = client(&server).health().unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::InvalidBody(e) if e.model() == "AgentHealth"));
}

#[test]
fn a_422_with_a_validation_list_keeps_the_decoded_detail() {
    let body = json!({"detail": [
        {"type": "int_type", "loc": ["body", "inputs", 0, "id"], "msg": "Input should be a valid integer", "input": "x"},
        {"type": "missing", "loc": ["body", "request_id"], "msg": "Field required", "input": {}}
    ]})
    .to_json_string();
    let server = StubServer::start(move |_: &_| Reply::json(422, body.clone()));
    let err = client(&server).respond(&request("r", 1, 1)).unwrap_err();
    let ErrorKind::Status(s) = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(s.status().as_u16(), 422);
    assert!(!s.is_not_ready() && !err.is_not_ready());
    assert_eq!(s.detail().unwrap().as_array().unwrap().len(), 2);
    assert_eq!(
        s.detail_message().unwrap(),
        "body.inputs.0.id: Input should be a valid integer; body.request_id: Field required"
    );
    assert!(s.body().starts_with(b"{\"detail\""));
    assert!(
        err.to_string()
            .contains("422 Unprocessable Entity: body.inputs.0.id"),
        "{err}"
    );
}

#[test]
fn a_422_with_a_string_detail_is_the_agents_own_refusal() {
    let server = StubServer::start(|_: &_| {
        Reply::json(
            422,
            r#"{"detail":"memory.history must be a list of objects"}"#,
        )
    });
    let err = client(&server).respond(&request("r", 1, 1)).unwrap_err();
    let s = err.http_status().unwrap();
    assert_eq!(
        s.detail_message().unwrap(),
        "memory.history must be a list of objects"
    );
    assert_eq!(
        s.detail().unwrap().as_str(),
        Some("memory.history must be a list of objects")
    );
}

#[test]
fn a_503_is_not_ready_on_every_endpoint() {
    let server =
        StubServer::start(|_: &_| Reply::json(503, r#"{"detail":"Models are not ready"}"#));
    let c = client(&server);
    for err in [
        c.health().unwrap_err(),
        c.respond(&request("r", 1, 1)).unwrap_err(),
        c.info().unwrap_err(),
    ] {
        assert!(err.is_not_ready(), "{err:?}");
        let ErrorKind::NotReady(s) = err.kind() else {
            panic!("{err:?}")
        };
        assert!(s.is_not_ready());
        assert_eq!(s.detail_message().as_deref(), Some("Models are not ready"));
        assert_eq!(s.body(), br#"{"detail":"Models are not ready"}"#);
        assert!(err.to_string().contains("agent not ready"), "{err}");
    }
}

#[test]
fn other_statuses_keep_the_raw_body_when_it_is_not_json() {
    let server = StubServer::start(|_: &_| Reply::json(500, "Internal Server Error"));
    let err = client(&server).health().unwrap_err();
    let s = err.http_status().unwrap();
    assert_eq!(s.status().as_u16(), 500);
    assert!(s.detail().is_none() && s.detail_message().is_none());
    assert_eq!(s.body(), b"Internal Server Error");
    assert!(
        err.to_string()
            .ends_with("HTTP 500 Internal Server Error: Internal Server Error"),
        "{err}"
    );
}

#[test]
fn info_is_parsed_strictly_and_checked_like_bench() {
    // A field 2.0.1 does not know (the docs' coaching_session_version).
    let server = StubServer::start(|_: &_| {
        Reply::json(
            200,
            r#"{"agent_id":"a","agent_version":"1","capabilities":{"inference":true},"coaching_session_version":"1"}"#,
        )
    });
    let err = client(&server).info().unwrap_err();
    let ErrorKind::InvalidBody(e) = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(e.model(), "AgentInfo");
    assert_eq!(e.first().location().to_string(), "coaching_session_version");

    let server = StubServer::start(|_: &_| {
        Reply::json(
            200,
            r#"{"protocol_version":"1.0","agent_id":"a","agent_version":"1","capabilities":{"inference":true}}"#,
        )
    });
    let c = client(&server);
    assert_eq!(c.info().unwrap().protocol_version, "1.0");
    let err = c.check_compatible().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Incompatible(IncompatibleAgent::ProtocolVersion(v)) if v == "1.0"),
        "{err:?}"
    );

    let server = StubServer::start(|_: &_| {
        Reply::json(
            200,
            r#"{"agent_id":"a","agent_version":"1","capabilities":{"inference":false}}"#,
        )
    });
    let err = client(&server).check_compatible().unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::Incompatible(IncompatibleAgent::NoInference)
    ));
    assert!(err.to_string().contains("/v1/info"), "{err}");
}

#[test]
fn a_body_over_the_limit_is_refused_by_content_length_and_while_streaming() {
    let big = format!(r#"{{"status":"ready","pad":"{}"}}"#, "x".repeat(4000));
    let len = big.len() as u64;
    let server = StubServer::start(move |_: &_| Reply::json(200, big.clone()));
    let small = Client::builder(server.url())
        .max_response_bytes(1024)
        .build()
        .unwrap();
    let err = small.health().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::BodyTooLarge { limit: 1024 }),
        "{err:?}"
    );
    // At exactly the limit the body is read (and then refused as invalid
    // health, which proves it got through the limit).
    let exact = Client::builder(server.url())
        .max_response_bytes(len)
        .build()
        .unwrap();
    assert!(matches!(
        exact.health().unwrap_err().kind(),
        ErrorKind::InvalidBody(_)
    ));

    // Chunked, no Content-Length: the limit applies while streaming.
    let mut answer =
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for _ in 0..8 {
        answer.extend_from_slice(format!("400\r\n{}\r\n", "y".repeat(0x400)).as_bytes());
    }
    answer.extend_from_slice(b"0\r\n\r\n");
    let raw = RawServer::start(Some(answer));
    let c = Client::builder(raw.url())
        .max_response_bytes(4096)
        .build()
        .unwrap();
    let err = c.health().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::BodyTooLarge { limit: 4096 }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("larger than the limit of 4096 bytes"),
        "{err}"
    );
}

#[test]
fn connection_refused_is_its_own_kind() {
    let addr = free_port();
    let c = Client::new(format!("http://{addr}")).unwrap();
    let err = c.health().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ConnectionRefused),
        "{err:?}"
    );
    assert!(err.is_connect() && err.is_transient() && !err.is_timeout());
    assert_eq!(err.url(), Some(format!("http://{addr}/health").as_str()));
    // The hint names the server that was tried (the client also calls model
    // providers and proxies), not "the agent".
    assert_eq!(
        err.to_string(),
        format!("GET http://{addr}/health: connection refused (is the server at {addr} running?)")
    );
    let err = c.respond(&request("r", 1, 1)).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ConnectionRefused),
        "{err:?}"
    );
}

#[test]
fn a_post_is_not_retried_when_the_connection_drops() {
    // The server reads the request and closes without answering.
    let raw = RawServer::start(None);
    let c = Client::builder(raw.url())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let err = c.respond(&request("r", 1, 1)).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Transport(_)), "{err:?}");
    assert_eq!(raw.requests(), 1, "the POST must be sent exactly once");
}

#[test]
fn a_malformed_http_answer_is_a_transport_error() {
    let raw = RawServer::start(Some(b"this is not http\r\n\r\n".to_vec()));
    let err = Client::new(raw.url()).unwrap().health().unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Transport(_)), "{err:?}");
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn bad_configuration_is_refused_at_build() {
    let err = Client::new("localhost:8888").unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Config(m) if m.contains("scheme")),
        "{err}"
    );
    let err = Client::builder("http://127.0.0.1:1")
        .user_agent("bad\nagent")
        .build()
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Config(m) if m.contains("user agent")),
        "{err}"
    );
}

#[cfg(not(feature = "tls"))]
#[test]
fn https_without_the_tls_feature_is_a_clear_error() {
    let err = Client::new("https://agent.example:8443").unwrap_err();
    let ErrorKind::Config(m) = err.kind() else {
        panic!("{err:?}")
    };
    assert!(m.contains("`tls` feature"), "{m}");
}

/// Each way a connection can fail after it was made has its own cause, in
/// the error and in its text.
#[test]
fn transport_failures_name_their_cause() {
    let big_header = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Big: {}\r\n\r\n",
        "a".repeat(600_000)
    );
    let cases: Vec<(&str, Option<Vec<u8>>, TransportCause)> = vec![
        ("oversized head", Some(big_header.into_bytes()), TransportCause::HeadTooLarge),
        (
            "not HTTP",
            Some(b"this is not http\r\n\r\n".to_vec()),
            TransportCause::MalformedHead,
        ),
        ("closed without an answer", None, TransportCause::ClosedBeforeAnswer),
        (
            "bad chunk size",
            Some(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
                    .to_vec(),
            ),
            TransportCause::BadChunkedEncoding,
        ),
        (
            "body shorter than Content-Length",
            Some(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"status\"".to_vec()),
            TransportCause::TruncatedBody,
        ),
        (
            "chunked body without its last chunk",
            Some(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n12\r\n{\"status\":\"ready\"}\r\n"
                    .to_vec(),
            ),
            TransportCause::TruncatedBody,
        ),
    ];
    for (what, answer, cause) in cases {
        let raw = RawServer::start(answer);
        let err = Client::new(raw.url()).unwrap().health().unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Transport(c) if *c == cause),
            "{what}: {err:?}"
        );
        assert!(
            err.to_string().contains(&cause.to_string()),
            "{what}: {err}"
        );
    }
}

/// A peer that closes with unread data in its receive buffer sends a TCP
/// reset: `ConnectionReset`.
#[test]
fn a_reset_connection_is_named() {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        // Read a byte, leave the rest unread, and wait for all of it to
        // arrive: closing then resets the connection.
        let mut one = [0u8; 1];
        stream.read_exact(&mut one).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        drop(stream);
    });
    let err = Client::new(format!("http://{addr}"))
        .unwrap()
        .respond(&request("r", 1, 1))
        .unwrap_err();
    server.join().unwrap();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Transport(TransportCause::ConnectionReset)
        ),
        "{err:?}"
    );
    assert!(!err.is_timeout());
}
