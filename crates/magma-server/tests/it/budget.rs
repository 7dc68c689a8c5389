//! What one request may make the server hold: the response-size limit
//! before the agent runs and while its answer is written, and bounded `422`
//! error lists.

use magma_server::demo::DemoAgent;
use magma_server::{
    Agent, AgentDecision, AgentInfo, AgentInput, Candidate, Config, Json, Rejection, RequestContext,
};

use crate::support::{TestServer, check_response, user_request};

fn limited(bytes: u64) -> Config {
    let mut c = Config::default();
    c.max_response_bytes = bytes;
    c
}

fn request_with_memory(id: &str, memory_bytes: usize, num_outputs: u64) -> String {
    format!(
        r#"{{"request_id":"{id}","inputs":[{{"id":0,"instruction":{{"type":"user","content":"go"}},"num_outputs":{num_outputs},"memory":{{"blob":"{}"}}}}]}}"#,
        "m".repeat(memory_bytes)
    )
}

/// The amplification of the issue, scaled down: memory times candidates
/// over the limit is refused before the agent runs, just under it answered.
#[tokio::test]
async fn memory_times_candidates_over_the_response_limit_is_422_before_the_agent() {
    let server = TestServer::with_config(DemoAgent::new(), limited(100_000)).await;
    let bomb = request_with_memory("amp", 10_000, 1024);
    let detail = server.respond(bomb).await.expect_detail(422);
    assert!(detail.contains("100000 bytes"), "{detail}");
    assert!(detail.contains("at least"), "{detail}");

    // Nine candidates of 10 kB memory fit: answered whole, memory intact.
    let fits = request_with_memory("fits", 10_000, 9);
    let reply = server.respond(fits.clone()).await;
    let response = check_response(&fits, &reply);
    assert_eq!(response.len(), 9);
    assert!(reply.body.len() < 100_000);
    let blob = response[8].memory.get("blob").and_then(Json::as_str);
    assert_eq!(blob.map(str::len), Some(10_000));
}

/// The demo agent refuses an answer its echoed content would make too
/// large, with a message that says so; the server's own estimate cannot
/// see content.
#[tokio::test]
async fn the_demo_agent_rejects_an_answer_over_the_limit() {
    let server = TestServer::with_config(DemoAgent::new(), limited(100_000)).await;
    let content = "c".repeat(5_000);
    let detail = server
        .respond(user_request("echo", &content, 64))
        .await
        .expect_detail(422);
    assert!(
        detail.contains("response limit of 100000 bytes"),
        "{detail}"
    );
    let ok = user_request("echo", &content, 8);
    let reply = server.respond(ok.clone()).await;
    assert_eq!(check_response(&ok, &reply).len(), 8);
}

/// An agent whose answer grows beyond what the request announced: the
/// server stops writing at the limit and answers 500 with a JSON detail.
#[derive(Clone)]
struct Verbose;

impl Agent for Verbose {
    fn info(&self) -> AgentInfo {
        AgentInfo::new("verbose", "1.0.0")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        let limit = RequestContext::current()
            .and_then(|c| c.max_response_bytes())
            .ok_or_else(|| Rejection::new("no response limit in the context"))?;
        // Each candidate is a tenth of the limit: ten candidates pass it.
        let say = "v".repeat(usize::try_from(limit / 10).unwrap());
        let n = usize::try_from(input.num_outputs.get()).unwrap();
        Ok(vec![
            Candidate::new(
                input.memory.clone(),
                AgentDecision::say(say)
            );
            n
        ])
    }
}

#[tokio::test]
async fn an_agent_answer_over_the_limit_is_500_and_the_server_keeps_serving() {
    let server = TestServer::with_config(Verbose, limited(200_000)).await;
    let detail = server
        .respond(user_request("big", "x", 12))
        .await
        .expect_detail(500);
    assert!(
        detail.contains("response limit of 200000 bytes"),
        "{detail}"
    );
    let small = user_request("small", "x", 3);
    let reply = server.respond(small.clone()).await;
    assert_eq!(check_response(&small, &reply).len(), 3);
    server.get("/health").await.expect(200);
}

/// The 422 error-list bomb: the body lists the first 100 problems and
/// counts the rest, instead of one object per element of the request.
#[tokio::test]
async fn a_422_error_list_is_bounded_and_counts_the_rest() {
    let server = TestServer::start(DemoAgent::new()).await;
    let n = 200_000;
    let bomb = format!(
        r#"{{"request_id":"e","inputs":[{}]}}"#,
        vec!["0"; n].join(",")
    );
    let reply = server.respond(bomb.clone()).await;
    let json = reply.expect(422);
    let body = json.as_object().unwrap();
    assert_eq!(body.get("detail").unwrap().as_array().unwrap().len(), 100);
    let omitted = body.get("omitted_errors").unwrap().as_number().unwrap();
    assert_eq!(omitted.as_u64(), Some(n as u64 - 100));
    assert!(reply.body.len() < 20_000, "{} bytes", reply.body.len());
    assert!(reply.body.len() < bomb.len() / 10);
}
