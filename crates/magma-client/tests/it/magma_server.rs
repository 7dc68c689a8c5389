//! Against the real `magma-server` (its demo agent), over HTTP and, with
//! the `tls` feature, HTTPS and mutual TLS.

use std::net::SocketAddr;
#[cfg(feature = "tls")]
use std::path::Path;
use std::time::Duration;

use magma_client::magma_protocol::{AgentInfo, AgentInput, AgentInstruction, AgentRequest, Json};
use magma_client::{Client, ErrorKind, RawRequest};
#[cfg(feature = "tls")]
use magma_server::TlsConfig;
use magma_server::demo::DemoAgent;
use magma_server::{Agent, Candidate, Config, Readiness, ReadyFlag, Rejection};

#[cfg(feature = "tls")]
use magma_testkit::TempDir;
#[cfg(feature = "tls")]
use magma_testkit::pki::Ca;
use magma_testkit::stub::Background;

use crate::support::{request, says};

/// The demo agent behind a readiness flag.
struct Demo {
    demo: DemoAgent,
    ready: ReadyFlag,
}

impl Agent for Demo {
    fn info(&self) -> AgentInfo {
        self.demo.info()
    }

    fn readiness(&self) -> Readiness {
        self.ready.get()
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        self.demo.respond(input).await
    }
}

/// `magma_server::Server` on its own thread and runtime.
struct Running {
    addr: SocketAddr,
    https: bool,
    _background: Background,
}

impl Running {
    fn start(config: Config, ready: ReadyFlag) -> Running {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let https = config.tls.is_some();
        let background = Background::spawn(move |stop| async move {
            let server = magma_server::Server::from_listener(listener, config).unwrap();
            let agent = Demo {
                demo: DemoAgent::new(),
                ready,
            };
            server.serve(agent, stop).await;
        });
        Running {
            addr,
            https,
            _background: background,
        }
    }

    fn url(&self) -> String {
        format!(
            "{}://{}",
            if self.https { "https" } else { "http" },
            self.addr
        )
    }
}

#[cfg(feature = "tls")]
fn tls_config(dir: &TempDir, ca: &Ca, client_ca: Option<&Path>) -> TlsConfig {
    let leaf = ca.server_leaf();
    let cert = dir.write("server.pem", &leaf.cert_pem);
    let key = dir.write("server.key", &leaf.key_pem);
    TlsConfig::from_pem_files(cert, key, client_ca).unwrap()
}

#[cfg(feature = "tls")]
fn https_config(tls: TlsConfig) -> Config {
    let mut config = Config::default();
    config.shutdown_grace = Duration::from_secs(1);
    config.tls = Some(tls);
    config
}

/// The calls every test makes: readiness, BENCH's check, a multi-input
/// multi-candidate request, the memory counter, an error candidate and the
/// demo agent's 422.
fn exercise(client: &Client) {
    client.health().unwrap();
    let info = client.check_compatible().unwrap();
    assert_eq!(info.agent_id, "magma-demo-agent");

    // The demo samples: candidate 1 of each input is another branch.
    let response = client.respond(&request("ms-1", 3, 2)).unwrap();
    assert_eq!(
        says(&response),
        [
            "echo: m0",
            "echo: m0 (branch 1)",
            "echo: m1",
            "echo: m1 (branch 1)",
            "echo: m2",
            "echo: m2 (branch 1)"
        ]
    );
    assert!(
        response
            .candidates()
            .iter()
            .all(|c| c.memory.get("steps") == Some(&Json::from(1)))
    );

    let failing = AgentInput::new(0, AgentInstruction::user("__error__"));
    let response = client
        .respond(&AgentRequest::new("ms-err", vec![failing]).unwrap())
        .unwrap();
    assert!(response.candidates()[0].outcome.error().is_some());

    // The demo agent refuses a bad delay_ms with a string detail.
    let mut slow = AgentInput::new(0, AgentInstruction::user("x"));
    slow.extra_keys.insert("delay_ms", Json::from("soon"));
    let err = client
        .respond(&AgentRequest::new("ms-422", vec![slow]).unwrap())
        .unwrap_err();
    let status = err.http_status().unwrap_or_else(|| panic!("{err:?}"));
    assert_eq!(status.status().as_u16(), 422);
    assert!(status.detail().and_then(Json::as_str).is_some(), "{err}");

    // And answers an invalid body with the FastAPI list.
    let raw = client
        .execute(RawRequest::post("/v1/responses").json(r#"{"request_id":"","inputs":[]}"#))
        .unwrap();
    assert_eq!(raw.status().as_u16(), 422);
    let loc = raw
        .json()
        .unwrap()
        .get("detail")
        .unwrap()
        .as_array()
        .unwrap()[0]
        .get("loc")
        .unwrap()
        .to_json_string();
    assert_eq!(loc, r#"["body","request_id"]"#);
}

#[test]
fn over_http_with_waiting_through_503() {
    let ready = ReadyFlag::not_ready("Models are not ready");
    let mut config = Config::default();
    config.shutdown_grace = Duration::from_secs(1);
    let server = Running::start(config, ready.clone());
    let client = Client::new(server.url()).unwrap();

    let err = client.health().unwrap_err();
    let ErrorKind::NotReady(s) = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(s.detail_message().as_deref(), Some("Models are not ready"));
    assert!(
        client
            .respond(&request("early", 1, 1))
            .unwrap_err()
            .is_not_ready()
    );
    assert_eq!(client.info().unwrap().agent_id, "magma-demo-agent");

    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        ready.set_ready();
    });
    client.wait_ready(Duration::from_secs(30)).unwrap();
    setter.join().unwrap();
    exercise(&client);
}

/// Acceptance: `--inference-timeout-secs 1` and a 3 s inference give `504`
/// with a JSON detail, which the client reports as a timeout of its own
/// kind, neither "not ready" nor transient for a `POST`.
#[test]
fn an_inference_past_the_servers_timeout_is_a_504_timeout_not_a_not_ready() {
    let mut config = Config::default();
    config.shutdown_grace = Duration::from_secs(1);
    config.inference_timeout = Some(Duration::from_secs(1));
    let server = Running::start(config, ReadyFlag::ready());
    let client = Client::new(server.url()).unwrap();

    let mut slow = AgentInput::new(0, AgentInstruction::user("x"));
    slow.extra_keys.insert("delay_ms", Json::from(3000));
    let started = std::time::Instant::now();
    let err = client
        .respond(&AgentRequest::new("too-slow", vec![slow]).unwrap())
        .unwrap_err();
    let waited = started.elapsed();
    let ErrorKind::InferenceTimeout(status) = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(status.status().as_u16(), 504);
    let detail = status.detail_message().unwrap_or_else(|| panic!("{err:?}"));
    assert!(detail.contains("did not finish within"), "{detail}");
    assert!(err.is_timeout(), "{err}");
    assert!(!err.is_not_ready(), "{err}");
    assert!(!err.is_transient(), "a POST that timed out is not retried");
    assert!(err.to_string().contains("timeout"), "{err}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_millis(2900),
        "answered after {waited:?}, before the 3 s inference would have ended"
    );
    // The server is fine afterwards.
    client.respond(&request("after", 1, 1)).unwrap();
}

#[cfg(feature = "tls")]
#[test]
fn over_https_with_the_ca_file() {
    let dir = TempDir::new("ms-https");
    let ca = Ca::new("magma-server test CA");
    let server = Running::start(
        https_config(tls_config(&dir, &ca, None)),
        ReadyFlag::ready(),
    );
    assert!(server.url().starts_with("https://"));
    let ca_file = dir.write("ca.pem", &ca.pem);
    let client = Client::builder(server.url())
        .ca_file(ca_file)
        .build()
        .unwrap();
    exercise(&client);

    // Not trusting the CA: refused with a clear message.
    let err = Client::new(server.url()).unwrap().health().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Tls(w) if w.contains("not trusted")),
        "{err:?}"
    );
}

#[cfg(feature = "tls")]
#[test]
fn over_mutual_tls_with_and_without_a_client_certificate() {
    let dir = TempDir::new("ms-mtls");
    let server_ca = Ca::new("magma-server test CA");
    let client_ca = Ca::new("bench clients CA");
    let client_ca_file = dir.write("client-ca.pem", &client_ca.pem);
    let tls = tls_config(&dir, &server_ca, Some(&client_ca_file));
    assert!(tls.requires_client_certificate());
    let server = Running::start(https_config(tls), ReadyFlag::ready());

    let me = client_ca.client_leaf();
    let client = Client::builder(server.url())
        .ca_pem(server_ca.pem.clone())
        .client_identity_pem(me.cert_pem, me.key_pem)
        .build()
        .unwrap();
    exercise(&client);

    let anonymous = Client::builder(server.url())
        .ca_pem(server_ca.pem.clone())
        .build()
        .unwrap();
    let err = anonymous.health().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Tls(w) if w.contains("client certificate")),
        "{err:?}"
    );

    let stranger = Ca::new("stranger CA").client_leaf();
    let wrong = Client::builder(server.url())
        .ca_pem(server_ca.pem)
        .client_identity_pem(stranger.cert_pem, stranger.key_pem)
        .build()
        .unwrap();
    let err = wrong.respond(&request("r", 1, 1)).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Tls(w) if w.contains("client certificate")),
        "{err:?}"
    );
}
