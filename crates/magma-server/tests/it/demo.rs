//! The demo agent the binary serves, through the server.

use magma_server::demo::DemoAgent;
use magma_server::{AgentDecision, Json, Outcome};

use crate::support::{TestServer, check_response};

fn one_input(input: &str) -> String {
    format!(r#"{{"request_id":"demo","inputs":[{input}]}}"#)
}

async fn decision(server: &TestServer, input: &str) -> (AgentDecision, Json) {
    let request = one_input(input);
    let response = check_response(&request, &server.respond(request.clone()).await);
    let candidate = &response[0];
    match &candidate.outcome {
        Outcome::Completed(d) => (d.clone(), Json::Object(candidate.memory.clone())),
        other => panic!("not completed: {other:?}"),
    }
}

#[tokio::test]
async fn user_instructions_are_echoed_and_steps_counted() {
    let server = TestServer::start(DemoAgent::new()).await;
    let (d, memory) = decision(
        &server,
        r#"{"id":0,"instruction":{"type":"user","content":"Press sw0."},"memory":{"memory_list":["x"],"steps":41}}"#,
    )
    .await;
    assert_eq!(d, AgentDecision::say("echo: Press sw0."));
    assert_eq!(
        memory.to_json_string(),
        r#"{"memory_list":["x"],"steps":42}"#
    );
}

#[tokio::test]
async fn env_instructions_call_the_first_tool_on_the_first_robot() {
    let server = TestServer::start(DemoAgent::new()).await;
    let bench_tools = r#"[{"name":"cancel_current_action","description":"Cancel.","arguments":{}},
        {"name":"press_button","description":"Press.","arguments":{"id":{"description":"b","type":"str"}}}]"#;
    let input = format!(
        r#"{{"id":0,"instruction":{{"type":"env","content":"{{\"infos\": \"ok\"}}"}},"tools":{bench_tools},
        "attributes":{{"known_robots":["panda","ur5"]}}}}"#
    );
    let (d, _) = decision(&server, &input).await;
    assert_eq!(d.say, "");
    assert_eq!(d.tool_calls.len(), 1);
    assert_eq!(d.tool_calls[0].name.as_str(), "cancel_current_action");
    assert_eq!(d.tool_calls[0].target_robot_name.as_str(), "panda");
    assert!(d.tool_calls[0].arguments.is_empty());

    let openai = r#"{"id":0,"instruction":{"type":"env","content":"{}"},
        "tools":[{"type":"function","function":{"name":"grab","parameters":{}}}],
        "attributes":{"known_robots":["arm"]}}"#;
    let (d, _) = decision(&server, openai).await;
    assert_eq!(
        (
            d.tool_calls[0].name.as_str(),
            d.tool_calls[0].target_robot_name.as_str()
        ),
        ("grab", "arm")
    );

    let no_robots =
        r#"{"id":0,"instruction":{"type":"env","content":"status"},"tools":[{"name":"t"}]}"#;
    assert_eq!(
        decision(&server, no_robots).await.0,
        AgentDecision::say("echo: status")
    );
}

#[tokio::test]
async fn out_of_range_options_are_agent_rejections() {
    let server = TestServer::start(DemoAgent::new()).await;
    for input in [
        r#"{"id":0,"instruction":{"type":"user","content":""},"extra_keys":{"delay_ms":60001}}"#,
        r#"{"id":0,"instruction":{"type":"user","content":""},"extra_keys":{"delay_ms":-1}}"#,
        r#"{"id":0,"instruction":{"type":"user","content":""},"memory":{"steps":"3"}}"#,
    ] {
        let detail = server.respond(one_input(input)).await.expect_detail(422);
        assert!(
            detail.contains("delay_ms") || detail.contains("memory.steps"),
            "{detail}"
        );
    }
}
