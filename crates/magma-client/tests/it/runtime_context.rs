//! Calling the blocking client from inside an async runtime returns an
//! error at once instead of blocking (or deadlocking) that runtime.

use std::time::Duration;

use magma_client::{Client, ErrorKind};

use crate::support::{StubServer, echo_agent, request};

#[test]
fn calls_inside_a_tokio_runtime_return_an_error_without_sending() {
    let server = StubServer::start(echo_agent());
    let client = Client::new(server.url()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // In `block_on` itself.
    let c = client.clone();
    let errors = rt.block_on(async move {
        vec![
            c.health().unwrap_err(),
            c.respond(&request("r", 1, 1)).unwrap_err(),
            c.wait_ready(Duration::from_secs(5)).unwrap_err(),
        ]
    });
    for err in errors {
        assert!(
            matches!(err.kind(), ErrorKind::InsideAsyncRuntime),
            "{err:?}"
        );
        assert!(err.to_string().contains("inside an async runtime"), "{err}");
    }

    // In a spawned task, and in spawn_blocking (which carries the runtime's
    // context too).
    let c = client.clone();
    let task = rt.block_on(async move { tokio::spawn(async move { c.info() }).await.unwrap() });
    assert!(matches!(
        task.unwrap_err().kind(),
        ErrorKind::InsideAsyncRuntime
    ));
    let c = client.clone();
    let blocking = rt
        .block_on(async move { tokio::task::spawn_blocking(move || c.health()).await })
        .unwrap();
    assert!(matches!(
        blocking.unwrap_err().kind(),
        ErrorKind::InsideAsyncRuntime
    ));

    assert!(
        server.requests().is_empty(),
        "nothing may be sent from inside a runtime"
    );

    // Building and dropping inside a runtime is fine (no panic, no hang).
    let url = server.url();
    rt.block_on(async move {
        let c = Client::new(url).unwrap();
        drop(c);
    });

    // A plain thread started from async code works, and so does this one.
    let c = client.clone();
    let from_thread = rt.block_on(async move {
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = tx.send(c.health().is_ok());
        });
        rx.await.unwrap()
    });
    assert!(from_thread);
    client.health().unwrap();
}
