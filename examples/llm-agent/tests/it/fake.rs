//! An OpenAI-compatible provider written for the tests: real HTTP/1.1 on a
//! loopback port, `GET /v1/models` and `POST /v1/chat/completions`.
//!
//! What it answers depends on the last message of the conversation:
//!
//! | marker in the last message | answer |
//! |---|---|
//! | `#429` / `#500` | that status |
//! | `#garbage` | `200` with a body that is not JSON |
//! | `#badargs` | a tool call whose `arguments` are not JSON |
//! | `#ghost` | a call of a tool the input does not have |
//! | `#stranger` | a call on a robot not in `known_robots` |
//! | `#empty` | neither text nor tool calls |
//! | `#hangup` | the connection closed without an answer |
//! | `#slow` | text, after 300 ms |
//! | `#both` | a call of the first tool on every robot the tool's enum lists, and text |
//! | anything else, with tools | a call of the first tool on the first robot |
//! | anything else, without tools | `echo: <message>` |
//!
//! Like a model, it samples when asked to (a `temperature` above 0 and no
//! `seed`): then the last two answers are, at random, the one above or
//! another valid one (the call on the second robot; `echo (sampled): ...`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use magma_server::{Json, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the fake provider saw and how it behaves; shared with the tests.
#[derive(Debug)]
pub(crate) struct State {
    /// Every chat completions payload received, in order.
    pub(crate) payloads: Mutex<Vec<Json>>,
    /// Authorization headers received.
    pub(crate) authorizations: Mutex<Vec<String>>,
    /// Completions being answered now, and the most at once.
    in_flight: AtomicUsize,
    pub(crate) max_in_flight: AtomicUsize,
    /// `GET /v1/models` waits while this is false.
    models_open: watch::Sender<bool>,
    /// The status of `GET /v1/models`.
    pub(crate) models_status: Mutex<u16>,
}

pub(crate) struct FakeProvider {
    pub(crate) port: u16,
    pub(crate) state: Arc<State>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeProvider {
    /// Starts the provider; `GET /v1/models` answers at once when
    /// `models_open`, else only after [`open_models`](Self::open_models).
    pub(crate) fn start(models_open: bool) -> FakeProvider {
        let state = Arc::new(State {
            payloads: Mutex::default(),
            authorizations: Mutex::default(),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            models_open: watch::channel(models_open).0,
            models_status: Mutex::new(200),
        });
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind fake provider");
        std_listener.set_nonblocking(true).unwrap();
        let port = std_listener.local_addr().unwrap().port();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let shared = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                let accept = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        tokio::spawn(serve(stream, Arc::clone(&shared)));
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stop_rx => {}
                }
            });
        });
        FakeProvider {
            port,
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub(crate) fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub(crate) fn open_models(&self) {
        self.state.models_open.send_replace(true);
    }

    pub(crate) fn payloads(&self) -> Vec<Json> {
        self.state.payloads.lock().unwrap().clone()
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One connection: requests until the client closes it.
async fn serve(mut stream: TcpStream, state: Arc<State>) {
    let mut buf = Vec::new();
    loop {
        let Some((head, body)) = read_request(&mut stream, &mut buf).await else {
            return;
        };
        let mut lines = head.lines();
        let request_line = lines.next().unwrap_or_default().to_owned();
        for line in lines {
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("authorization") {
                    state
                        .authorizations
                        .lock()
                        .unwrap()
                        .push(value.trim().to_owned());
                }
            }
        }
        let answer = if request_line.starts_with("GET /v1/models ") {
            let mut open = state.models_open.subscribe();
            let _ = open.wait_for(|o| *o).await;
            let status = *state.models_status.lock().unwrap();
            if status == 200 {
                Some((
                    200,
                    json!({"object": "list", "data": [{"id": "fake-model"}]}).to_json_string(),
                ))
            } else {
                Some((
                    status,
                    json!({"error": {"message": "invalid api key"}}).to_json_string(),
                ))
            }
        } else if request_line.starts_with("POST /v1/chat/completions ") {
            let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            state.max_in_flight.fetch_max(now, Ordering::SeqCst);
            let answer = complete(&body, &state).await;
            state.in_flight.fetch_sub(1, Ordering::SeqCst);
            answer
        } else {
            Some((404, json!({"error": "not found"}).to_json_string()))
        };
        let Some((status, body)) = answer else {
            return; // hang up
        };
        let response = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Reads one request (head and `content-length` body); `None` at the end.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let length = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            let start = end + 4;
            while buf.len() < start + length {
                let mut chunk = [0u8; 8192];
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[start..start + length].to_vec();
            buf.drain(..start + length);
            return Some((head, body));
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The chat completions answer, or `None` to hang up.
async fn complete(body: &[u8], state: &State) -> Option<(u16, String)> {
    let Ok(payload) = Json::from_slice(body) else {
        return Some((400, json!({"error": "body is not JSON"}).to_json_string()));
    };
    state.payloads.lock().unwrap().push(payload.clone());
    let last = payload
        .get("messages")
        .and_then(Json::as_array)
        .and_then(|m| m.last())
        .and_then(|m| m.get("content"))
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_owned();
    let first_tool = payload
        .get("tools")
        .and_then(Json::as_array)
        .and_then(|t| t.first())
        .and_then(|t| t.get("function"));
    let tool_name = first_tool
        .and_then(|f| f.get("name"))
        .and_then(Json::as_str)
        .map(str::to_owned);
    let robots: Vec<String> = first_tool
        .and_then(|f| f.get("parameters"))
        .and_then(|p| p.get("properties"))
        .and_then(|p| p.get("target_robot"))
        .and_then(|t| t.get("enum"))
        .and_then(Json::as_array)
        .map(|e| {
            e.iter()
                .filter_map(Json::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let first_robot = robots
        .first()
        .cloned()
        .unwrap_or_else(|| "robot".to_owned());
    let call = |name: &str, arguments: &str| {
        json!({"id": "call_0", "type": "function",
               "function": {"name": name, "arguments": arguments}})
    };
    let text = |content: &str| reply(Json::from(content), Vec::new());
    let sampling = payload
        .get("temperature")
        .and_then(Json::as_number)
        .and_then(|t| t.as_f64())
        .is_some_and(|t| t > 0.0)
        && payload.get("seed").is_none();
    let other = sampling && coin();
    let answer = if last.contains("#hangup") {
        return None;
    } else if last.contains("#429") {
        return Some((
            429,
            json!({"error": {"message": "slow down"}}).to_json_string(),
        ));
    } else if last.contains("#500") {
        return Some((
            500,
            json!({"error": {"message": "model crashed"}}).to_json_string(),
        ));
    } else if last.contains("#garbage") {
        return Some((200, "this is not json".to_owned()));
    } else if last.contains("#badargs") {
        reply(
            Json::Null,
            vec![call(tool_name.as_deref().unwrap_or("x"), "{not json")],
        )
    } else if last.contains("#ghost") {
        let args = json!({"target_robot": first_robot.as_str()}).to_json_string();
        reply(Json::Null, vec![call("fly_to_the_moon", &args)])
    } else if last.contains("#stranger") {
        reply(
            Json::Null,
            vec![call(
                tool_name.as_deref().unwrap_or("x"),
                r#"{"target_robot": "r9"}"#,
            )],
        )
    } else if last.contains("#empty") {
        reply(Json::Null, Vec::new())
    } else if last.contains("#slow") {
        tokio::time::sleep(Duration::from_millis(300)).await;
        text("done slowly")
    } else if let (true, Some(name)) = (last.contains("#both"), tool_name.as_deref()) {
        let calls = robots
            .iter()
            .map(|r| {
                let args = json!({"id": "sw0", "target_robot": r.as_str()}).to_json_string();
                call(name, &args)
            })
            .collect();
        reply(Json::from("On it."), calls)
    } else if let Some(name) = tool_name.as_deref() {
        let robot = match robots.get(1) {
            Some(second) if other => second.as_str(),
            _ => first_robot.as_str(),
        };
        let args = json!({"target_robot": robot}).to_json_string();
        reply(Json::Null, vec![call(name, &args)])
    } else if other {
        text(&format!("echo (sampled): {last}"))
    } else {
        text(&format!("echo: {last}"))
    };
    Some((200, answer.to_json_string()))
}

/// A random bit, for sampling.
fn coin() -> bool {
    use std::hash::BuildHasher;
    static N: AtomicUsize = AtomicUsize::new(0);
    std::collections::hash_map::RandomState::new().hash_one(N.fetch_add(1, Ordering::Relaxed)) & 1
        == 1
}

fn reply(content: Json, tool_calls: Vec<Json>) -> Json {
    let finish = if tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let mut message = json!({"role": "assistant", "content": content});
    if !tool_calls.is_empty() {
        if let Some(m) = message.as_object_mut() {
            m.insert("tool_calls", Json::Array(tool_calls));
        }
    }
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}]
    })
}
