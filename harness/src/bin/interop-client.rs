//! Interop check: the Rust client against a MAGMA agent written in Python
//! with FastAPI on magma-core 2.0.1 (`harness/python/fastapi_agent.py`).
//!
//! ```text
//! cargo run -p magma-harness --bin interop-client -- http://127.0.0.1:8888 [--expect-not-ready]
//! cargo run -p magma-harness --bin interop-client -- https://127.0.0.1:8443 --cacert ca.pem
//! cargo run -p magma-harness --bin interop-client -- https://127.0.0.1:8443 --cacert ca.pem \
//!     --client-cert client.pem --client-key client.key
//! ```
//!
//! Exercises health (waiting through 503), info and BENCH's compatibility
//! check, several `respond` calls (multiple inputs, `num_outputs` > 1, env
//! feedback with a tool call, an error candidate, memory over several steps)
//! and the agent's 422 answers (string and list `detail`). Prints one line
//! per check and a summary; exits 1 if any check failed, 2 on bad usage.
//!
//! `--coaching` also drives a coaching session the way GEN does, against
//! an agent serving magma-core's `mount_coaching_routes`
//! (`fastapi_agent.py --coaching`): open (and again), a conflicting open,
//! a refused open, a request of each kind validated against itself, an
//! unknown run, close, close again.
//!
//! `--expect-not-ready` asserts that the agent's first answer to `/health`
//! is 503 not ready (start it with `--ready-after`), so the 503 path is
//! really taken; refused connections before it listens are waited through.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line example reports on the terminal

use std::num::NonZeroU64;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use magma_client::magma_protocol::coaching::{CoachingSessionConfig, SpecializedCoachingRequest};
use magma_client::magma_protocol::routes::Endpoint;
use magma_client::magma_protocol::{
    AgentInput, AgentInstruction, AgentRequest, AgentResponse, Json, Object, json,
};
use magma_client::{Client, ErrorKind, RawRequest};

type Check = Result<String, String>;

struct Args {
    url: String,
    #[cfg(feature = "tls")]
    cacert: Option<String>,
    #[cfg(feature = "tls")]
    identity: Option<(String, String)>,
    expect_not_ready: bool,
    coaching: bool,
    wait: Duration,
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("error: {msg}");
    eprintln!(
        "usage: interop BASE_URL [--cacert PEM] [--client-cert PEM --client-key PEM]\n\
         \x20              [--expect-not-ready] [--coaching] [--wait SECONDS]\n\
         (--cacert and --client-* need the `tls` feature)"
    );
    ExitCode::from(2)
}

fn parse_args() -> Result<Args, String> {
    let mut url = None;
    #[cfg(feature = "tls")]
    let mut cacert = None;
    let (mut client_cert, mut client_key) = (None::<String>, None::<String>);
    let mut expect_not_ready = false;
    let mut coaching = false;
    let mut wait = Duration::from_secs(60);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--cacert" => {
                let path = it.next().ok_or("--cacert needs a file")?;
                #[cfg(feature = "tls")]
                {
                    cacert = Some(path);
                }
                #[cfg(not(feature = "tls"))]
                return Err(format!(
                    "--cacert {path}: build the example with --features tls"
                ));
            }
            "--client-cert" => client_cert = Some(it.next().ok_or("--client-cert needs a file")?),
            "--client-key" => client_key = Some(it.next().ok_or("--client-key needs a file")?),
            "--expect-not-ready" => expect_not_ready = true,
            "--coaching" => coaching = true,
            "--wait" => {
                let secs = it.next().ok_or("--wait needs seconds")?;
                let secs: f64 = secs.parse().map_err(|_| format!("bad --wait {secs:?}"))?;
                wait = Duration::from_secs_f64(secs);
            }
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s if url.is_none() => url = Some(s.to_owned()),
            s => return Err(format!("unexpected argument {s}")),
        }
    }
    let identity = match (client_cert, client_key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => return Err("--client-cert and --client-key go together".to_owned()),
    };
    #[cfg(not(feature = "tls"))]
    if identity.is_some() {
        return Err("--client-cert: build the example with --features tls".to_owned());
    }
    Ok(Args {
        url: url.ok_or("give the agent's base URL")?,
        #[cfg(feature = "tls")]
        cacert,
        #[cfg(feature = "tls")]
        identity,
        expect_not_ready,
        coaching,
        wait,
    })
}

fn build(args: &Args) -> Result<Client, magma_client::Error> {
    let builder = Client::builder(&args.url).timeout(Duration::from_secs(60));
    #[cfg(feature = "tls")]
    let builder = match &args.cacert {
        Some(path) => builder.ca_file(path),
        None => builder,
    };
    #[cfg(feature = "tls")]
    let builder = match &args.identity {
        Some((cert, key)) => builder.client_identity_files(cert, key),
        None => builder,
    };
    builder.build()
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => return usage(&e),
    };
    let client = match build(&args) {
        Ok(c) => c,
        Err(e) => return usage(&e.to_string()),
    };
    println!("interop: magma-client against {}", client.base_url());

    let mut results: Vec<(&str, Check)> = Vec::new();
    let mut run = |name: &'static str, check: &dyn Fn() -> Check| {
        let outcome = check();
        match &outcome {
            Ok(note) => println!("  ok    {name}: {note}"),
            Err(why) => println!("  FAIL  {name}: {why}"),
        }
        results.push((name, outcome));
    };

    if args.expect_not_ready {
        run("health while loading is 503 not ready", &|| {
            not_ready(&client, args.wait)
        });
    }
    run("wait_ready", &|| {
        let started = Instant::now();
        client.wait_ready(args.wait).map_err(|e| e.to_string())?;
        Ok(format!(
            "ready after {:.1}s",
            started.elapsed().as_secs_f64()
        ))
    });
    run("health", &|| {
        client
            .health()
            .map(|_| "ready".to_owned())
            .map_err(|e| e.to_string())
    });
    run("info + BENCH compatibility", &|| {
        let info = client.check_compatible().map_err(|e| e.to_string())?;
        Ok(format!(
            "{} {} (protocol {}, capabilities {:?})",
            info.agent_id, info.agent_version, info.protocol_version, info.capabilities
        ))
    });
    run("respond: one user input", &|| one_input(&client));
    run("respond: several inputs in order", &|| {
        several_inputs(&client)
    });
    run("respond: num_outputs 3", &|| several_candidates(&client));
    run("respond: env feedback -> tool call", &|| {
        env_feedback(&client)
    });
    run("respond: error candidate keeps memory", &|| {
        error_candidate(&client)
    });
    run("respond: memory round trip over 3 steps", &|| {
        memory_round_trip(&client)
    });
    run("422 with a string detail", &|| reject_string(&client));
    run("422 with a validation list detail", &|| {
        reject_list(&client)
    });
    run("422 from FastAPI's own validation (raw call)", &|| {
        reject_raw(&client)
    });
    if args.coaching {
        run("coaching: a session as GEN drives it", &|| {
            coaching(&client)
        });
        run(
            "coaching: a refused session is CoachingUnavailable",
            &|| refused_session(&client),
        );
    }
    run("still healthy afterwards", &|| {
        client
            .health()
            .map(|_| "ready".to_owned())
            .map_err(|e| e.to_string())
    });

    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    println!("{} passed, {} failed", results.len() - failed, failed);
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn request(id: &str, inputs: Vec<AgentInput>) -> Result<AgentRequest, String> {
    AgentRequest::new(id, inputs).map_err(|e| e.to_string())
}

fn user(id: i64, content: &str) -> AgentInput {
    AgentInput::new(id, AgentInstruction::user(content))
}

fn respond(client: &Client, req: &AgentRequest) -> Result<AgentResponse, String> {
    client.respond(req).map_err(|e| e.to_string())
}

fn say(response: &AgentResponse, i: usize) -> Result<&str, String> {
    let c = response
        .candidates()
        .get(i)
        .ok_or(format!("no candidate {i}"))?;
    c.outcome
        .decision()
        .map(|d| d.say.as_str())
        .ok_or_else(|| format!("candidate {i} is an error: {:?}", c.outcome.error()))
}

fn expect(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(what()) }
}

fn not_ready(client: &Client, wait: Duration) -> Check {
    // The first answer must be a 503; before the agent listens, connections
    // are refused, which says nothing yet.
    let deadline = Instant::now() + wait;
    let err = loop {
        match client.health() {
            Ok(_) => return Err("the agent is already ready (start it with --ready-after)".into()),
            Err(e) if e.is_connect() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => break e,
        }
    };
    let ErrorKind::NotReady(status) = err.kind() else {
        return Err(format!("expected 503 not ready, got: {err}"));
    };
    let detail = status.detail_message().unwrap_or_default();
    expect(detail == "Models are not ready", || {
        format!("detail {detail:?}")
    })?;
    // /v1/responses is refused the same way while loading.
    match client.respond(&request("while-loading", vec![user(0, "too early")])?) {
        Err(e) if e.is_not_ready() => {}
        other => {
            return Err(format!(
                "respond while loading: expected 503, got {other:?}"
            ));
        }
    }
    Ok(format!("{} ({detail})", status.status()))
}

fn one_input(client: &Client) -> Check {
    let response = respond(
        client,
        &request("interop-one", vec![user(7, "Say hello.")])?,
    )?;
    let said = say(&response, 0)?;
    expect(said == "echo: Say hello.", || format!("said {said:?}"))?;
    Ok(format!("{said:?}"))
}

fn several_inputs(client: &Client) -> Check {
    let contents = ["first", "второй", "第三", "🤖 fourth"];
    let inputs = contents
        .iter()
        .enumerate()
        .map(|(i, c)| user(i as i64 * 10, c))
        .collect();
    let response = respond(client, &request("interop-multi", inputs)?)?;
    for (i, c) in contents.iter().enumerate() {
        let said = say(&response, i)?;
        expect(said == format!("echo: {c}"), || {
            format!("candidate {i} said {said:?}")
        })?;
        let source = response.candidates()[i].source_id;
        expect(source == i as i64 * 10, || {
            format!("candidate {i} answers {source}")
        })?;
    }
    Ok(format!(
        "{} candidates in request order",
        response.candidates().len()
    ))
}

fn several_candidates(client: &Client) -> Check {
    let mut a = user(1, "branch");
    a.num_outputs = NonZeroU64::new(3).expect("3 > 0");
    let mut b = user(2, "single");
    b.num_outputs = NonZeroU64::MIN;
    let response = respond(client, &request("interop-branches", vec![a, b])?)?;
    let keys: Vec<(i64, u64)> = response
        .candidates()
        .iter()
        .map(|c| (c.source_id, c.candidate_index))
        .collect();
    expect(keys == [(1, 0), (1, 1), (1, 2), (2, 0)], || {
        format!("candidates {keys:?}")
    })?;
    Ok(format!("{keys:?}"))
}

fn env_feedback(client: &Client) -> Check {
    let status = json!({"infos": "panda: press_button succeed with message: sw0 is now pressed"});
    let mut input = AgentInput::new(0, AgentInstruction::env(status.to_json_string()));
    input.tools = vec![object(json!({
        "name": "press_button",
        "description": "Press a button.",
        "arguments": {"id": {"description": "Button name.", "type": "str"}}
    }))];
    input.attributes =
        object(json!({"known_robots": ["panda"], "robot_statuses": {"panda": "FREE"}}));
    let response = respond(client, &request("interop-env", vec![input])?)?;
    let decision = response.candidates()[0]
        .outcome
        .decision()
        .ok_or("an error candidate")?;
    let call = decision.tool_calls.first().ok_or("no tool call")?;
    expect(
        call.name.as_str() == "press_button" && call.target_robot_name.as_str() == "panda",
        || format!("call {call:?}"),
    )?;
    Ok(format!("{} on {}", call.name, call.target_robot_name))
}

fn error_candidate(client: &Client) -> Check {
    let mut input = user(3, "__error__");
    input.memory = object(json!({"memory_list": ["keep me"]}));
    let response = respond(client, &request("interop-error", vec![input.clone()])?)?;
    let c = &response.candidates()[0];
    let err = c.outcome.error().ok_or("expected an error candidate")?;
    expect(c.memory == input.memory, || {
        format!("memory changed: {:?}", c.memory)
    })?;
    Ok(format!("{}: {}", err.code, err.message))
}

fn memory_round_trip(client: &Client) -> Check {
    let mut memory = object(json!({
        "memory_list": ["Always confirm completion to the user."],
        "big": 123456789012345678901234567890u128,
        "ratio": 1.0,
        "nested": {"z": [1, {"ключ": "значение"}], "a": null}
    }));
    for step in 1..=3i64 {
        let mut input = user(0, &format!("step {step}"));
        input.memory = memory.clone();
        let response = respond(
            client,
            &request(&format!("interop-mem-{step}"), vec![input])?,
        )?;
        let next = response.candidates()[0].memory.clone();
        for key in ["memory_list", "big", "ratio", "nested"] {
            expect(next.get(key) == memory.get(key), || {
                format!("step {step}: {key} changed")
            })?;
        }
        let steps = next.get("steps").and_then(Json::as_i64);
        expect(steps == Some(step), || {
            format!("step {step}: steps = {steps:?}")
        })?;
        let history = next
            .get("history")
            .and_then(Json::as_array)
            .map_or(0, <[Json]>::len);
        expect(history == 2 * step as usize, || {
            format!("step {step}: history {history}")
        })?;
        memory = next;
    }
    Ok("memory_list, a 30-digit integer, 1.0 and nested unicode kept; history 6".to_owned())
}

fn reject_string(client: &Client) -> Check {
    let Err(err) = client.respond(&request("interop-reject", vec![user(5, "__reject__")])?) else {
        return Err("expected a 422".into());
    };
    let ErrorKind::Status(status) = err.kind() else {
        return Err(format!("got {err}"));
    };
    expect(status.status().as_u16() == 422, || {
        format!("status {}", status.status())
    })?;
    let detail = status
        .detail()
        .and_then(Json::as_str)
        .ok_or("detail is not a string")?;
    expect(detail.contains("rejected"), || format!("detail {detail:?}"))?;
    Ok(format!("{detail:?}"))
}

fn reject_list(client: &Client) -> Check {
    let mut input = user(0, "hello");
    input.extra_keys = object(json!({"inference_mode": "yes"}));
    let Err(err) = client.respond(&request("interop-list", vec![input])?) else {
        return Err("expected a 422".into());
    };
    let status = err.http_status().ok_or_else(|| format!("got {err}"))?;
    expect(status.status().as_u16() == 422, || {
        format!("status {}", status.status())
    })?;
    let items = status
        .detail()
        .and_then(Json::as_array)
        .ok_or("detail is not a list")?;
    expect(items.len() == 1, || format!("{} entries", items.len()))?;
    let message = status.detail_message().unwrap_or_default();
    expect(
        message == "body.inputs.0.extra_keys.inference_mode: Input should be a valid boolean",
        || format!("detail_message {message:?}"),
    )?;
    Ok(message)
}

fn reject_raw(client: &Client) -> Check {
    let raw = client
        .execute(
            RawRequest::post(Endpoint::Responses.path()).json(r#"{"request_id":"","inputs":[]}"#),
        )
        .map_err(|e| e.to_string())?;
    expect(raw.status().as_u16() == 422, || {
        format!("status {}", raw.status())
    })?;
    let body = raw.json().map_err(|e| e.to_string())?;
    let first = body
        .get("detail")
        .and_then(Json::as_array)
        .and_then(|d| d.first())
        .ok_or("no detail list")?;
    let loc = first
        .get("loc")
        .map(Json::to_json_string)
        .unwrap_or_default();
    expect(loc == r#"["body","request_id"]"#, || format!("loc {loc}"))?;
    Ok(format!("loc {loc}"))
}

fn session_config(endpoint: &str, capture_logs: bool) -> Result<CoachingSessionConfig, String> {
    let body = json!({
        "backends": {"gen": {"type": "openai", "endpoint": endpoint, "default_model": "gen-model"}},
        "capture_logs": capture_logs
    });
    CoachingSessionConfig::from_json(body).map_err(|e| e.to_string())
}

fn coaching_request(
    run_id: &str,
    request_id: &str,
    kind: &str,
) -> Result<SpecializedCoachingRequest, String> {
    let body = json!({
        "run_id": run_id,
        "request_id": request_id,
        "kind": kind,
        "stage": {"id": 1, "goal": "Press sw0.", "hint": null},
        "diagnosis": {"explanation": "Wrong button.", "expected_decision": "Press sw0."},
        "target_step_id": 2,
        "trajectory": [
            {"id": 2, "input": {"id": 0, "instruction": {"type": "user", "content": "Press sw0."}},
             "output": null,
             "error": {"code": "invalid_output", "message": "no say or action", "component": "commander"}}
        ],
        "reinjection_points": [
            {"id": "replacement", "input_step_id": 2, "input": null},
            {"id": "recovery", "input_step_id": null,
             "input": {"id": 0, "instruction": {"type": "env", "content": "{}"}}}
        ]
    });
    SpecializedCoachingRequest::from_json(body).map_err(|e| e.to_string())
}

fn coaching(client: &Client) -> Check {
    // A uuid-like run id with characters the path must percent-encode
    // (not `/`: Starlette decodes %2F before routing and answers 404).
    let run_id = "interop run é 0f3c";
    let config = session_config("http://127.0.0.1:9/v1", true)?;
    let session = client
        .open_coaching_session(run_id, &config)
        .map_err(|e| format!("open: {e}"))?;
    let again = client
        .open_coaching_session(run_id, &config)
        .map_err(|e| format!("open again: {e}"))?;
    let other = session_config("http://127.0.0.1:9/v1", false)?;
    match client.open_coaching_session(run_id, &other) {
        Err(e) if matches!(e.kind(), ErrorKind::SessionConflict(_)) => {}
        Err(e) => {
            return Err(format!(
                "conflicting open: expected SessionConflict, got {e}"
            ));
        }
        Ok(_) => return Err("a conflicting configuration was accepted".into()),
    }
    // The failed open tried a DELETE, as GEN's does: the session is gone.
    let probe = coaching_request(run_id, "after-conflict", "format")?;
    match client.coach(&probe) {
        Err(e) if matches!(e.kind(), ErrorKind::UnknownSession(_)) => {}
        other => {
            return Err(format!(
                "after the failed open: expected UnknownSession, got {other:?}"
            ));
        }
    }
    // Both handles close (DELETE) when dropped: a no-op now, 204 all the same.
    drop(again);
    drop(session);
    let session = client
        .open_coaching_session(run_id, &config)
        .map_err(|e| format!("reopen: {e}"))?;
    let mut notes = Vec::new();
    for kind in ["failure", "suboptimal", "format"] {
        let request = coaching_request(run_id, &format!("interop-{kind}"), kind)?;
        let response = session
            .coach(&request)
            .map_err(|e| format!("{kind}: {e}"))?;
        expect(
            response.status().as_str() == "corrected" && response.proposals().len() == 2,
            || {
                format!(
                    "{kind}: {} with {} proposals",
                    response.status().as_str(),
                    response.proposals().len()
                )
            },
        )?;
        // magma-core captured the stub worker's log for this request.
        expect(!response.logs().is_empty(), || format!("{kind}: no logs"))?;
        notes.push(format!("{kind} {}", response.status().as_str()));
    }
    let unknown = coaching_request("interop-never-opened", "unknown", "format")?;
    match client.coach(&unknown) {
        Err(e) if matches!(e.kind(), ErrorKind::UnknownSession(_)) => {}
        other => {
            return Err(format!(
                "unknown run: expected UnknownSession, got {other:?}"
            ));
        }
    }
    session.close().map_err(|e| format!("close: {e}"))?;
    let request = coaching_request(run_id, "after-close", "failure")?;
    match client.coach(&request) {
        Err(e) if matches!(e.kind(), ErrorKind::UnknownSession(_)) => {}
        other => {
            return Err(format!(
                "after close: expected UnknownSession, got {other:?}"
            ));
        }
    }
    client
        .close_coaching_session(run_id)
        .map_err(|e| format!("close again: {e}"))?;
    Ok(format!(
        "{}; conflict 409, unknown run 404, closed twice",
        notes.join(", ")
    ))
}

fn refused_session(client: &Client) -> Check {
    let config = session_config("http://unreachable.invalid/v1", true)?;
    match client.open_coaching_session("interop-refused", &config) {
        Err(e) if matches!(e.kind(), ErrorKind::CoachingUnavailable(_)) => {
            let detail = e
                .http_status()
                .and_then(|s| s.detail_message())
                .unwrap_or_default();
            Ok(format!("503: {detail}"))
        }
        Err(e) => Err(format!("expected CoachingUnavailable, got {e}")),
        Ok(_) => Err("the session was accepted".into()),
    }
}

fn object(value: Json) -> Object {
    match value {
        Json::Object(o) => o,
        _ => Object::new(),
    }
}
