//! One client shared by many threads.

use magma_client::Client;
use magma_client::magma_protocol::{AgentInput, AgentInstruction, AgentRequest};

use crate::support::{StubServer, echo_agent, says};

#[test]
fn sixteen_threads_share_one_client_and_every_response_is_checked() {
    const THREADS: usize = 16;
    const CALLS: usize = 8;
    let server = StubServer::start(echo_agent());
    let client = Client::new(server.url()).unwrap();
    client
        .wait_ready(std::time::Duration::from_secs(10))
        .unwrap();

    let barrier = std::sync::Barrier::new(THREADS);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            // Half the threads use a clone, half borrow the same handle.
            let own = client.clone();
            let (client, barrier) = (&client, &barrier);
            scope.spawn(move || {
                barrier.wait();
                let c = if t % 2 == 0 { &own } else { client };
                for call in 0..CALLS {
                    let inputs = (0..(1 + call % 3))
                        .map(|i| {
                            let content = format!("t{t} c{call} i{i}");
                            let mut input =
                                AgentInput::new(i as i64, AgentInstruction::user(content));
                            input.num_outputs =
                                std::num::NonZeroU64::new(1 + (t % 2) as u64).unwrap();
                            input
                        })
                        .collect();
                    let req = AgentRequest::new(format!("t{t}-c{call}"), inputs).unwrap();
                    let response = c.respond(&req).unwrap();
                    let mut expected = Vec::new();
                    for i in 0..(1 + call % 3) {
                        for k in 0..(1 + t % 2) {
                            expected.push(format!("echo: t{t} c{call} i{i} #{k}"));
                        }
                    }
                    assert_eq!(says(&response), expected);
                    assert!(
                        response
                            .candidates()
                            .iter()
                            .all(|c| c.request_id == *req.request_id())
                    );
                }
            });
        }
    });
    let posts = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count();
    assert_eq!(posts, THREADS * CALLS);
    // Connections are reused: far fewer than one per call (the pool may open
    // a few more than there are threads when a checkout races a return).
    assert!(
        server.accepted() < THREADS * CALLS / 2,
        "accepted {}",
        server.accepted()
    );
}
