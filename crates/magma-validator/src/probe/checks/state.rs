//! Answers that depend on something other than the request: hidden
//! interaction state, and candidates that do not sample (or sample when
//! asked not to).
//!
//! Both checks compare decisions of valid answers; each answer is checked
//! as every inference check's is (status, body, candidates, lints).

use magma_protocol::{AgentInstruction, AgentRequest, AgentResponse, Json, Object, Outcome};

use super::CheckDef;
use crate::probe::requests::{self, ROBOT};
use crate::probe::session::Session;
use crate::probe::{Check, CheckSeverity};
use crate::report::{Finding, shorten};

pub(super) const CHECKS: &[CheckDef] = &[
    CheckDef::new(
        "state/hidden",
        "the same request (inference_mode: true) is answered the same after other conversations",
        CheckSeverity::Fail,
        "BENCH and GEN (an episode's answers depend on other episodes)",
        hidden,
    ),
    CheckDef::new(
        "branches/identical",
        "GEN's branches differ; BENCH's inference_mode answers repeat",
        CheckSeverity::Warn,
        "GEN (duplicate branches, a dataset without diversity) and BENCH (reproducibility)",
        identical,
    ),
];

/// Markers of the other conversations of `state/hidden`.
const OTHER_MARKERS: [&str; 2] = ["zephyr-operator-5c1e", "quartz-bay-5c1e"];

/// GEN-like inputs of `branches/identical` (each with [`BRANCHES`]).
const GEN_PROMPTS: [&str; 8] = [
    "Press sw0.",
    "What can you do?",
    "Move the panda next to sw1.",
    "Report the rover's status.",
    "Bring the rover to the dock.",
    "Say hello to the operator.",
    "Which switches are there?",
    "Cancel what the panda is doing.",
];
const BRANCHES: u64 = 3;

/// A decision or an error, in a few words, for messages.
pub(crate) fn show(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Completed(d) if d.tool_calls.is_empty() => {
            format!("say {:?}", shorten(&d.say, 80))
        }
        Outcome::Completed(d) => {
            let calls: Vec<String> = d
                .tool_calls
                .iter()
                .map(|t| {
                    format!(
                        "{}({}) on {}",
                        t.name,
                        shorten(&Json::Object(t.arguments.clone()).to_json_string(), 60),
                        t.target_robot_name
                    )
                })
                .collect();
            let say = if d.say.is_empty() {
                String::new()
            } else {
                format!("say {:?} + ", shorten(&d.say, 40))
            };
            format!("{say}call {}", calls.join(", "))
        }
        Outcome::Error(e) => format!("error {}", e.code),
    }
}

/// The candidates of input `id`, in order.
fn of_input(r: &AgentResponse, id: i64) -> Vec<&Outcome> {
    r.candidates()
        .iter()
        .filter(|c| c.source_id == id)
        .map(|c| &c.outcome)
        .collect()
}

fn with(mut memory: Object, key: &str, value: &str) -> Object {
    memory.insert(key, Json::from(value));
    memory
}

fn hidden(s: &mut Session, check: &mut Check) {
    let same = || {
        requests::bench_input(
            0,
            AgentInstruction::user("Press sw0."),
            requests::initial_memory(),
        )
    };
    let [b, c] = OTHER_MARKERS;
    let other_b = requests::bench_input(
        0,
        AgentInstruction::user(format!(
            "I am operator {b}. Remember my name, say it back, and press sw1."
        )),
        with(requests::initial_memory(), "operator", b),
    );
    let mut location = Object::new();
    location.insert("location", Json::from(c));
    let other_c = requests::bench_input(
        0,
        AgentInstruction::env(requests::env_status(ROBOT, "navigate_to", &location)),
        with(requests::initial_memory(), "last_location", c),
    );
    let steps = [
        ("1st", same()),
        ("2nd, right after the 1st", same()),
        ("other conversation 1", other_b),
        ("other conversation 2", other_c),
        ("3rd, after two other conversations on input id 0", same()),
    ];
    let mut answers: Vec<(&str, Outcome, String)> = Vec::new();
    for (what, input) in steps {
        let id = s.request_id("state");
        let Ok(request) = AgentRequest::new(id, vec![input]) else {
            return;
        };
        check.context(format!("request {what}"));
        let Some(r) = s.respond(check, &request) else {
            return;
        };
        if what.starts_with("other") {
            continue;
        }
        let Some(first) = r.candidates().first() else {
            return;
        };
        let text = format!(
            "{:?} {}",
            first.outcome,
            Json::Object(first.memory.clone()).to_json_string()
        );
        answers.push((what, first.outcome.clone(), text));
    }
    check.context("");
    let shown: Vec<String> = answers
        .iter()
        .map(|(what, o, _)| format!("{what}: {}", show(o)))
        .collect();
    for (what, _, text) in &answers {
        let leaked: Vec<&str> = OTHER_MARKERS
            .iter()
            .copied()
            .filter(|m| text.contains(m))
            .collect();
        if leaked.is_empty() {
            continue;
        }
        check.push(
            Finding::error(
                "response",
                "state_leak",
                "[0]",
                format!(
                    "the answer to the same request ({what}) holds {} from another \
                     conversation sent before it on input id 0: the answer depends on \
                     something other than the request ({})",
                    leaked.join(" and "),
                    shown.join("; ")
                ),
            )
            .with_impact(
                "BENCH runs episodes and GEN branches side by side, each calling with input \
                 ids 0, 1, ... (batch positions): an agent that keeps a conversation on the \
                 server answers one episode with another's history, and the results and the \
                 dataset are wrong without any error",
            )
            .with_fix(
                "answer from the request alone: keep the conversation in the memory you \
                 return (BENCH and GEN send it back), never in a server-side store keyed by \
                 input id or by nothing",
            ),
        );
    }
    if check.failed() {
        return;
    }
    let first = answers.first().map(|a| &a.1);
    let all_same = answers.iter().all(|a| Some(&a.1) == first);
    if all_same {
        if let Some(o) = first {
            check.verified(format!(
                "{} answers to the same request (inference_mode: true) identical ({}), the \
                 last after two other conversations on input id 0, none of whose markers \
                 came back",
                answers.len(),
                show(o)
            ));
        }
        return;
    }
    let back_to_back = answers.len() >= 2 && answers[0].1 == answers[1].1;
    let why = if back_to_back {
        "the same answer twice in a row, another after two other conversations ran on input \
         id 0: the answer depends on something other than the request, most likely a \
         history or memory kept on the server (keyed by input id, or by nothing)"
    } else {
        "the answer changed with nothing in between: the agent keeps a server-side history \
         that grows with every call, or it samples despite inference_mode: true (see \
         branches/identical)"
    };
    check.push(
        Finding::warning(
            "response",
            "state_changed",
            "[0]",
            format!("{why} ({})", shown.join("; ")),
        )
        .with_impact(
            "BENCH asks for deterministic decoding with inference_mode: true and compares \
             runs; an answer that depends on earlier calls makes an episode's result depend \
             on the episodes that ran before or beside it",
        )
        .with_fix(
            "answer from the request alone (instruction, memory, tools, attributes) and \
             decode deterministically when inference_mode is true (temperature 0, a fixed \
             seed)",
        ),
    );
}

fn identical(s: &mut Session, check: &mut Check) {
    // GEN: branches without inference_mode.
    let inputs: Vec<_> = GEN_PROMPTS
        .iter()
        .zip(0..)
        .map(|(p, id)| requests::gen_input(id, p, BRANCHES))
        .collect();
    let id = s.request_id("branches");
    let Ok(request) = AgentRequest::new(id, inputs) else {
        return;
    };
    check.context("GEN-like request");
    let Some(r) = s.respond(check, &request) else {
        return;
    };
    let mut judged = 0;
    let mut same: Vec<(i64, String)> = Vec::new();
    for id in 0..GEN_PROMPTS.len() {
        let id = i64::try_from(id).unwrap_or_default();
        let done: Vec<&Outcome> = of_input(&r, id)
            .into_iter()
            .filter(|o| matches!(o, Outcome::Completed(_)))
            .collect();
        if done.len() < 2 {
            continue;
        }
        judged += 1;
        if done.iter().all(|o| *o == done[0]) {
            same.push((id, show(done[0])));
        }
    }
    check.context("");
    if judged > 0 && same.len() == judged {
        let (id, first) = &same[0];
        check.push(
            Finding::warning(
                "response",
                "identical_branches",
                format!("input {id}"),
                format!(
                    "a GEN-like request of {} inputs x {BRANCHES} branches without \
                     inference_mode: every one of the {judged} inputs with completed branches \
                     got identical branches (input {id}: {first} x{BRANCHES})",
                    GEN_PROMPTS.len()
                ),
            )
            .with_impact(
                "GEN asks 2 to 4 branches per step to explore different decisions: identical \
                 branches are simulated for nothing and the dataset has no diversity",
            )
            .with_fix(
                "sample when inference_mode is not true (a temperature above 0, a different \
                 seed per candidate, or n samples from the model), and keep deterministic \
                 decoding for inference_mode: true",
            ),
        );
    } else if judged > 0 {
        check.verified(format!(
            "GEN-like request ({} inputs x {BRANCHES} branches): {} of {judged} inputs got \
             distinct branches",
            GEN_PROMPTS.len(),
            judged - same.len()
        ));
    }

    // BENCH: inference_mode: true, the same request twice.
    let env = requests::env_status(ROBOT, "press_button", &{
        let mut o = Object::new();
        o.insert("id", Json::from("sw0"));
        o
    });
    let bench = || {
        vec![
            requests::bench_input(
                0,
                AgentInstruction::user("Press sw0."),
                requests::initial_memory(),
            ),
            requests::bench_input(
                1,
                AgentInstruction::env(env.clone()),
                requests::initial_memory(),
            ),
            requests::bench_input(
                2,
                AgentInstruction::user("Bring the rover to the dock, then report."),
                requests::initial_memory(),
            ),
        ]
    };
    let mut answers = Vec::new();
    for what in ["1st BENCH-like request", "2nd BENCH-like request"] {
        let id = s.request_id("repeat");
        let Ok(request) = AgentRequest::new(id, bench()) else {
            return;
        };
        check.context(what);
        let Some(r) = s.respond(check, &request) else {
            return;
        };
        answers.push(r);
    }
    check.context("");
    let [a, b] = answers.as_slice() else {
        return;
    };
    let mut differ = Vec::new();
    for id in 0..3 {
        let (x, y) = (of_input(a, id), of_input(b, id));
        if x != y {
            let one = x.first().map_or_else(String::new, |o| show(o));
            let two = y.first().map_or_else(String::new, |o| show(o));
            differ.push(format!("input {id}: {one}, then {two}"));
        }
    }
    if differ.is_empty() {
        check.verified("two identical BENCH-like requests (inference_mode: true) answered alike");
    } else {
        check.push(
            Finding::warning(
                "response",
                "inference_mode_not_deterministic",
                "",
                format!(
                    "two identical BENCH-like requests with inference_mode: true were answered \
                     differently: {}",
                    differ.join("; ")
                ),
            )
            .with_impact(
                "BENCH sends inference_mode: true to get deterministic decoding: answers that \
                 change between identical requests make its scores irreproducible",
            )
            .with_fix(
                "decode deterministically when extra_keys.inference_mode is true (temperature \
                 0, a fixed seed, no sampling)",
            ),
        );
    }
}
