//! Sends a request file to an agent and prints the validated response.
//!
//! ```text
//! cargo run -p magma-rs-client --example send -- http://127.0.0.1:8888 request.json
//! cargo run -p magma-rs-client --example send -- http://127.0.0.1:8888 - < request.json
//! cargo run -p magma-rs-client --features tls --example send -- https://agent:8443 request.json --cacert ca.pem
//! ```
//!
//! Options: `--timeout SECONDS` (default 360, as BENCH), `--cacert PEM`
//! (feature `tls`). The file must be a valid `AgentRequest`; it is checked
//! before anything is sent. The response (strictly parsed and checked
//! against the request) goes to stdout as JSON, a one-line summary per
//! candidate to stderr. Exit codes: 0 success, 1 the agent failed (HTTP
//! error, invalid or mismatched response, timeout...), 2 usage or input
//! errors.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line example reports on the terminal

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

use magma_client::magma_protocol::{AgentRequest, Outcome};
use magma_client::{Client, ErrorKind};

const USAGE: &str = "usage: send BASE_URL REQUEST.json|- [--timeout SECONDS] [--cacert PEM]";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let mut positional = Vec::new();
    let mut timeout = magma_client::DEFAULT_TIMEOUT;
    let mut cacert: Option<String> = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--timeout" => {
                let v = it.next().ok_or("--timeout needs seconds")?;
                let secs: f64 = v.parse().map_err(|_| format!("bad --timeout {v:?}"))?;
                if !(secs > 0.0 && secs.is_finite()) {
                    return Err(format!("bad --timeout {v:?}"));
                }
                timeout = Duration::from_secs_f64(secs);
            }
            "--cacert" => cacert = Some(it.next().ok_or("--cacert needs a file")?),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            s if s.starts_with("--") => return Err(format!("unknown option {s}")),
            _ => positional.push(arg),
        }
    }
    let [url, file] = <[String; 2]>::try_from(positional)
        .map_err(|_| "give the agent's base URL and a request file".to_owned())?;

    let text = if file == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| format!("stdin: {e}"))?;
        buf
    } else {
        std::fs::read(&file).map_err(|e| format!("{file}: {e}"))?
    };
    let request = AgentRequest::from_slice(&text).map_err(|e| format!("{file}: {e}"))?;

    let builder = Client::builder(&url).timeout(timeout);
    let builder = match cacert {
        #[cfg(feature = "tls")]
        Some(path) => builder.ca_file(path),
        #[cfg(not(feature = "tls"))]
        Some(path) => return Err(format!("--cacert {path}: build with --features tls")),
        None => builder,
    };
    let client = builder.build().map_err(|e| e.to_string())?;

    match client.respond(&request) {
        Ok(response) => {
            for c in response.candidates() {
                let what = match &c.outcome {
                    Outcome::Completed(d) if !d.tool_calls.is_empty() => {
                        let calls: Vec<_> = d
                            .tool_calls
                            .iter()
                            .map(|t| format!("{}@{}", t.name, t.target_robot_name))
                            .collect();
                        format!("calls {}", calls.join(", "))
                    }
                    Outcome::Completed(d) => format!("says {:?}", d.say),
                    Outcome::Error(e) => format!("error {}: {}", e.code, e.message),
                };
                eprintln!(
                    "input {} candidate {}: {what}",
                    c.source_id, c.candidate_index
                );
            }
            println!("{}", response.to_json_string());
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("error: {err}");
            match err.kind() {
                ErrorKind::InvalidBody(e) => {
                    for issue in e.issues() {
                        eprintln!("  at {}: {}", issue.location(), issue.message());
                    }
                }
                ErrorKind::Status(s) | ErrorKind::NotReady(s) if s.detail().is_none() => {
                    eprintln!("  body: {}", String::from_utf8_lossy(s.body()));
                }
                _ => {}
            }
            Ok(ExitCode::FAILURE)
        }
    }
}
