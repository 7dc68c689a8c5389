//! What `cargo xtask e2e` reads in the programs' outputs: BENCH's result
//! files and `progress.log`, the wire logs of the agents (GEN's re-injected
//! proposals) and GEN's saved graph (magma-core's `SituationRecord`s).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use magma_protocol::routes::Endpoint;
use serde_json::Value;

/// `success=... status=... reason=...` of BENCH's `EPISODE_COMPLETED` line.
pub(super) fn episode_outcome(line: &str) -> String {
    // BENCH appends the whole raw answer (prompt included) to a bad one.
    let line = line.split(" | RAW_ACTION:").next().unwrap_or(line);
    match line.find("success=") {
        Some(start) => line[start..]
            .split(' ')
            .filter(|w| !w.starts_with("duration_seconds="))
            .collect::<Vec<_>>()
            .join(" "),
        None => line.trim().to_owned(),
    }
}

pub(super) fn read_progress(results: &Path) -> String {
    fs::read_to_string(results.join("progress.log")).unwrap_or_default()
}

/// The exchanges of a wire log.
fn wire_records(wire: &Path) -> Result<Vec<Value>> {
    let text = match fs::read_to_string(wire) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", wire.display())),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: not a JSON line", wire.display(), i + 1))
        })
        .collect()
}

pub(super) fn count_requests(wire: &Path, path: &str) -> usize {
    fs::read_to_string(wire)
        .map(|t| t.matches(&format!("\"path\": \"{path}\"")).count())
        .unwrap_or(0)
}

/// What the wire log says about GEN's re-injected proposals.
#[derive(Debug, Default)]
pub(super) struct Reinjections {
    pub(super) coaching_requests: usize,
    pub(super) statuses: Vec<String>,
    pub(super) reinjected: usize,
    pub(super) problems: Vec<String>,
}

/// Every candidate answering an input whose `extra_keys.coaching` is set
/// must be `completed` with the decision that payload asks for.
pub(super) fn check_reinjections(wire: &Path) -> Result<Reinjections> {
    let mut check = Reinjections::default();
    for record in wire_records(wire)? {
        let path = record["path"].as_str().unwrap_or("");
        if path == Endpoint::Coaching.path() {
            check.coaching_requests += 1;
            let status = record["response"]["status"]
                .as_str()
                .map_or_else(|| format!("HTTP {}", record["status"]), str::to_owned);
            check.statuses.push(status);
            continue;
        }
        if path != Endpoint::Responses.path() {
            continue;
        }
        let Some(inputs) = record["request"]["inputs"].as_array() else {
            continue;
        };
        let outputs = record["response"].as_array().cloned().unwrap_or_default();
        for input in inputs {
            let Some(payload) = input["extra_keys"].get("coaching") else {
                continue;
            };
            let id = &input["id"];
            let candidates: Vec<&Value> =
                outputs.iter().filter(|o| &o["source_id"] == id).collect();
            if candidates.is_empty() {
                check.reinjected += 1;
                check.problems.push(format!(
                    "input {id} of request {}: no candidate (HTTP {})",
                    record["request"]["request_id"], record["status"]
                ));
                continue;
            }
            let expected = expected_decision(payload);
            for candidate in candidates {
                check.reinjected += 1;
                let problem = match (&expected, candidate["status"].as_str()) {
                    (Err(why), _) => Some(format!("payload {payload}: {why}")),
                    (Ok(_), Some("error")) => Some(format!(
                        "payload {payload} answered error {}",
                        candidate["error"]
                    )),
                    (Ok(want), _) if &normalized(&candidate["output"]) != want => Some(format!(
                        "payload {payload} answered {}",
                        candidate["output"]
                    )),
                    _ => None,
                };
                if let Some(problem) = problem {
                    check.problems.push(problem);
                }
            }
        }
    }
    Ok(check)
}

/// The decision a coaching payload asks for, normalized.
fn expected_decision(payload: &Value) -> Result<Value, String> {
    match payload["kind"].as_str() {
        Some("replace_say") => Ok(serde_json::json!({
            "say": payload["text"].as_str().unwrap_or(""),
            "tool_calls": [],
        })),
        Some("replace_decision") => Ok(normalized(&payload["decision"])),
        Some(other) => Err(format!("unknown payload kind {other:?}")),
        None => Err("the payload has no `kind` (is it wrapped?)".to_owned()),
    }
}

/// A decision with its defaults filled in (`say` "", `tool_calls` [],
/// `arguments` {}), for comparison.
fn normalized(decision: &Value) -> Value {
    let calls: Vec<Value> = decision["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "name": c["name"],
                        "arguments": if c["arguments"].is_null() { serde_json::json!({}) } else { c["arguments"].clone() },
                        "target_robot_name": c["target_robot_name"],
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "say": decision["say"].as_str().unwrap_or(""),
        "tool_calls": calls,
    })
}

/// Files of two BENCH result folders that differ, other than in the agent
/// card; empty when they agree.
pub(super) fn compare_results(a: &Path, b: &Path) -> Result<Vec<String>> {
    let files_a = relative_files(a)?;
    let files_b = relative_files(b)?;
    let mut differences = Vec::new();
    for name in files_a.keys().filter(|k| !files_b.contains_key(*k)) {
        differences.push(format!("{name} only in {}", a.display()));
    }
    for name in files_b.keys().filter(|k| !files_a.contains_key(*k)) {
        differences.push(format!("{name} only in {}", b.display()));
    }
    for (name, path_a) in &files_a {
        let Some(path_b) = files_b.get(name) else {
            continue;
        };
        let (bytes_a, bytes_b) = (fs::read(path_a)?, fs::read(path_b)?);
        if bytes_a == bytes_b {
            continue;
        }
        let (mut json_a, mut json_b) = (
            serde_json::from_slice::<Value>(&bytes_a).ok(),
            serde_json::from_slice::<Value>(&bytes_b).ok(),
        );
        if let (Some(x), Some(y)) = (&mut json_a, &mut json_b) {
            strip_agent_card(x);
            strip_agent_card(y);
            if x == y {
                continue;
            }
        } else if without_clock(&bytes_a) == without_clock(&bytes_b) {
            continue;
        }
        differences.push(format!("{name} differs"));
    }
    Ok(differences)
}

/// A text file (BENCH's `progress.log`) without its timestamps and
/// durations.
fn without_clock(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|line| {
            line.split(" | ")
                .filter(|part| !part.starts_with("20") || !part.contains(':'))
                .flat_map(|part| part.split(' '))
                .filter(|word| !word.starts_with("duration_seconds="))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Removes what identifies the agent (`agent`, `agent_id`,
/// `agent_version`, `agent_address`, ...: the agent card) and what depends
/// on the clock or on the run's paths.
fn strip_agent_card(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|k, _| !is_run_specific(k));
            map.values_mut().for_each(strip_agent_card);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_agent_card),
        _ => {}
    }
}

fn is_run_specific(key: &str) -> bool {
    key == "agent"
        || key.starts_with("agent_")
        || key.contains("time")
        || key.contains("duration")
        || key.ends_with("_at")
        || key.contains("path")
        || key.contains("fingerprint")
        || key.contains("elapsed")
}

/// Every file under `dir`, by path relative to it.
fn relative_files(dir: &Path) -> Result<BTreeMap<String, PathBuf>> {
    let mut files = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(current) = todo.pop() {
        for entry in
            fs::read_dir(&current).with_context(|| format!("reading {}", current.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                todo.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir) {
                files.insert(rel.to_string_lossy().into_owned(), path.clone());
            }
        }
    }
    Ok(files)
}

/// GEN's saved graphs (`<number>.json`) in its output folder.
pub(super) fn graph_files(output: &Path) -> Vec<PathBuf> {
    let mut graphs: Vec<PathBuf> = fs::read_dir(output)
        .map(|dir| {
            dir.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension().is_some_and(|e| e == "json")
                        && p.file_stem()
                            .and_then(|s| s.to_str())
                            .is_some_and(|s| s.chars().all(|c| c.is_ascii_digit()))
                })
                .collect()
        })
        .unwrap_or_default();
    graphs.sort();
    graphs
}

/// GEN's saved situations (magma-core's `SituationRecord`: `id`,
/// `stage_id`, `parent_id`, `input`, `candidates`), one per graph file.
pub(super) fn graph_nodes(graphs: &[PathBuf]) -> Result<Vec<Value>> {
    graphs
        .iter()
        .map(|graph| {
            let text = fs::read_to_string(graph)
                .with_context(|| format!("reading {}", graph.display()))?;
            let value: Value = serde_json::from_str(&text)
                .with_context(|| format!("{}: not JSON", graph.display()))?;
            if !value["candidates"].is_array() {
                bail!(
                    "{}: not a GEN situation record (no `candidates`)",
                    graph.display()
                );
            }
            Ok(value)
        })
        .collect()
}

/// What GEN recorded of a candidate's tool calls, robot by robot
/// (`execution.per_robot_status`: `result`, `error_flag`, `mess`).
fn robot_statuses(candidate: &Value) -> &[Value] {
    candidate["execution"]["per_robot_status"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// Whether a candidate's execution reported a failed tool call.
fn execution_failed(candidate: &Value) -> bool {
    robot_statuses(candidate).iter().any(|r| {
        r["result"] == Value::Bool(false) || r["error_flag"].as_str().is_some_and(|f| f != "none")
    })
}

/// Whether every tool call of a candidate was executed and succeeded.
fn execution_succeeded(candidate: &Value) -> bool {
    candidate["execution_finished"] == Value::Bool(true)
        && !robot_statuses(candidate).is_empty()
        && !execution_failed(candidate)
}

/// Whether, in GEN's saved graph, a coached candidate executed its
/// corrected tool call and its branch went past the stage where an
/// original (model) candidate failed. `Ok` says which, `Err` why not.
pub(super) fn coached_branch_advances(situations: &[Value]) -> Result<String, String> {
    let by_id: BTreeMap<i64, &Value> = situations
        .iter()
        .filter_map(|s| s["id"].as_i64().map(|id| (id, s)))
        .collect();
    let candidates = || {
        situations
            .iter()
            .flat_map(|s| s["candidates"].as_array().into_iter().flatten())
    };
    let failed_stage = candidates()
        .filter(|c| c["origin"] == "model")
        .filter(|c| execution_failed(c) || c["status"] == "error" || c["status"] == "invalid")
        .filter_map(|c| c["stage_id"].as_i64())
        .min()
        .ok_or("no original (model) candidate failed: the wrong first press did not fail")?;
    let coached: Vec<&Value> = candidates().filter(|c| c["origin"] == "coaching").collect();
    if coached.is_empty() {
        return Err(format!(
            "a model candidate failed at stage {failed_stage}, but the graph has no coached candidate"
        ));
    }
    let mut seen = Vec::new();
    for candidate in coached {
        let id = &candidate["id"];
        let calls = candidate["output"]["tool_calls"]
            .as_array()
            .map_or(0, Vec::len);
        if candidate["response_status"] != "completed"
            || calls == 0
            || !execution_succeeded(candidate)
        {
            seen.push(format!(
                "candidate {id}: {} with {calls} tool call(s), status {}, execution {}",
                candidate["response_status"], candidate["status"], candidate["execution"]
            ));
            continue;
        }
        let stage = candidate["stage_id"].as_i64().unwrap_or(-1);
        // Follow the branch: the situations after this candidate.
        let mut pending: Vec<&Value> = next_situations(candidate, &by_id);
        let mut hops = 0;
        while let Some(situation) = pending.pop() {
            hops += 1;
            if hops > 10_000 {
                break;
            }
            if situation["stage_id"]
                .as_i64()
                .is_some_and(|s| s > failed_stage)
            {
                return Ok(format!(
                    "coached candidate {id} (stage {stage}, status {}) executed {} ({}) and its \
                     branch reached situation {} of stage {}, past stage {failed_stage} where a \
                     model candidate failed",
                    candidate["status"],
                    candidate["output"]["tool_calls"][0],
                    robot_statuses(candidate)[0]["mess"],
                    situation["id"],
                    situation["stage_id"]
                ));
            }
            for next in situation["candidates"].as_array().into_iter().flatten() {
                pending.extend(next_situations(next, &by_id));
            }
        }
        seen.push(format!(
            "candidate {id}: executed, status {}, but its branch stays at or before stage \
             {failed_stage}",
            candidate["status"]
        ));
    }
    Err(format!(
        "no coached branch advanced past stage {failed_stage}: {}",
        seen.join("; ")
    ))
}

/// The situations a candidate's `next` links lead to.
fn next_situations<'a>(candidate: &Value, by_id: &BTreeMap<i64, &'a Value>) -> Vec<&'a Value> {
    candidate["links"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["kind"] == "next")
        .filter_map(|l| l["situation_id"].as_i64())
        .filter_map(|id| by_id.get(&id).copied())
        .collect()
}

/// GEN's `EXIT | reason=...` line.
pub(super) fn gen_exit_line(out: &str) -> String {
    let text = fs::read_to_string(out).unwrap_or_default();
    text.lines()
        .rev()
        .find(|l| l.contains("EXIT |"))
        .map_or_else(|| "no EXIT line".to_owned(), |l| l.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A situation as GEN 2.0.0 saves it (trimmed to what the check reads).
    fn situation(id: i64, stage: i64, candidates: Value) -> Value {
        json!({"id": id, "stage_id": stage, "parent_id": null, "input": {}, "candidates": candidates})
    }

    fn candidate(
        id: i64,
        origin: &str,
        status: &str,
        button: &str,
        ok: bool,
        next: &[i64],
    ) -> Value {
        let links: Vec<Value> = next
            .iter()
            .map(|n| json!({"situation_id": n, "kind": "next"}))
            .collect();
        json!({
            "id": id, "stage_id": 0, "origin": origin, "response_status": "completed",
            "status": status, "execution_finished": true, "links": links,
            "output": {"say": "", "tool_calls": [
                {"name": "push_button", "arguments": {"obj_name": button}, "target_robot_name": "panda"}]},
            "execution": {"per_robot_status": [{"robot_name": "panda", "result": ok,
                "error_flag": if ok { "none" } else { "bad_call" }, "mess": "m"}]},
        })
    }

    #[test]
    fn a_coached_branch_that_reaches_the_next_stage_passes() {
        let graph = [
            situation(
                0,
                0,
                json!([candidate(1, "model", "error", "sw9", false, &[])]),
            ),
            situation(
                2,
                0,
                json!([candidate(2, "coaching", "optimal", "btn1", true, &[4])]),
            ),
            situation(4, 1, json!([])),
        ];
        let ok = coached_branch_advances(&graph).unwrap();
        assert!(ok.contains("coached candidate 2"), "{ok}");
        assert!(ok.contains("situation 4 of stage 1"), "{ok}");
    }

    #[test]
    fn a_coached_branch_that_stays_or_fails_does_not_pass() {
        // The coached call failed too.
        let graph = [
            situation(
                0,
                0,
                json!([candidate(1, "model", "error", "sw9", false, &[])]),
            ),
            situation(
                2,
                0,
                json!([candidate(2, "coaching", "error", "sw8", false, &[4])]),
            ),
            situation(4, 1, json!([])),
        ];
        let why = coached_branch_advances(&graph).unwrap_err();
        assert!(why.contains("candidate 2"), "{why}");
        // It succeeded but its branch never left the stage.
        let graph = [
            situation(
                0,
                0,
                json!([candidate(1, "model", "error", "sw9", false, &[])]),
            ),
            situation(
                2,
                0,
                json!([candidate(2, "coaching", "optimal", "btn1", true, &[])]),
            ),
        ];
        assert!(coached_branch_advances(&graph).is_err());
        // No coaching at all; no failure at all.
        let graph = [situation(
            0,
            0,
            json!([candidate(1, "model", "error", "sw9", false, &[])]),
        )];
        assert!(
            coached_branch_advances(&graph)
                .unwrap_err()
                .contains("no coached")
        );
        let graph = [situation(
            0,
            0,
            json!([candidate(1, "model", "optimal", "btn1", true, &[])]),
        )];
        assert!(
            coached_branch_advances(&graph)
                .unwrap_err()
                .contains("did not fail")
        );
    }

    fn wire(lines: &[Value]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("magma-e2e-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("wire-{}.jsonl", lines.len()));
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        fs::write(&path, text).unwrap();
        path
    }

    fn exchange(payload: Value, answer: Value) -> Value {
        json!({"path": "/v1/responses", "status": 200,
               "request": {"request_id": "r", "inputs": [
                   {"id": 7, "instruction": {"type": "user", "content": "x"}, "num_outputs": 1,
                    "extra_keys": {"coaching": payload}}]},
               "response": [answer]})
    }

    #[test]
    fn reinjected_candidates_must_make_the_proposed_decision() {
        let decision = json!({"say": "", "tool_calls": [
            {"name": "push_button", "arguments": {"obj_name": "btn1"}, "target_robot_name": "panda"}]});
        let payload = json!({"kind": "replace_decision", "decision": decision});
        let coaching = json!({"path": "/v1/coaching", "status": 200, "request": {},
                              "response": {"status": "corrected"}});
        let good = exchange(
            payload.clone(),
            json!({"source_id": 7, "status": "completed", "output": decision}),
        );
        let check = check_reinjections(&wire(&[coaching.clone(), good])).unwrap();
        assert_eq!((check.coaching_requests, check.reinjected), (1, 1));
        assert!(check.problems.is_empty(), "{:?}", check.problems);

        // Another decision, an error, a wrapped payload: each a problem.
        let other = exchange(
            payload.clone(),
            json!({"source_id": 7, "status": "completed", "output": {"say": "hi", "tool_calls": []}}),
        );
        let error = exchange(
            payload,
            json!({"source_id": 7, "status": "error", "output": null,
                   "error": {"code": "invalid_output", "message": "m"}}),
        );
        let wrapped = exchange(
            json!({"coaching": {"kind": "replace_say", "text": "t"}}),
            json!({"source_id": 7, "status": "completed", "output": {"say": "t"}}),
        );
        let check = check_reinjections(&wire(&[coaching, other, error, wrapped])).unwrap();
        assert_eq!(check.reinjected, 3);
        assert_eq!(check.problems.len(), 3, "{:?}", check.problems);
        assert!(
            check.problems[2].contains("no `kind`"),
            "{:?}",
            check.problems
        );
    }

    #[test]
    fn progress_logs_compare_without_their_clock() {
        let a = b"2026-12-06T02:46:13 | INFO | EPISODE_COMPLETED success=False duration_seconds=3.364 reason=x";
        let b = b"2026-12-06T02:46:28 | INFO | EPISODE_COMPLETED success=False duration_seconds=3.221 reason=x";
        let c = b"2026-12-06T02:46:28 | INFO | EPISODE_COMPLETED success=True duration_seconds=3.221 reason=x";
        assert_eq!(without_clock(a), without_clock(b));
        assert_ne!(without_clock(a), without_clock(c));
        assert_eq!(
            episode_outcome(std::str::from_utf8(c).unwrap()),
            "success=True reason=x"
        );
    }
}
