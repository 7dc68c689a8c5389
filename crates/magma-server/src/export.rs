//! Local dataset export: an agent's [`Exporter`] renders the examples GEN's
//! export selects into the agent's own training format, and
//! [`serve_export`] runs it over JSON lines (examples in, results out),
//! which is what the `export` subcommand of an agent binary does (see
//! [`cli::run`](crate::cli::run)) and what the Python package
//! `magma-rs-export` calls from GEN's entry point `magma.export.gen`.
//!
//! There is no HTTP here: magma-core 2.0.1 discovers exporters through
//! Python entry points, not as an agent capability.
//!
//! ```
//! use magma_server::export::{Exporter, serve_export};
//! use magma_server::magma_protocol::export::{ExportExample, ExportRecord, ExportResult};
//! use magma_server::{Json, Object};
//!
//! struct Prompts;
//!
//! impl Exporter for Prompts {
//!     fn filenames(&self) -> Vec<(String, String)> {
//!         vec![("prompts".into(), "prompts.json".into())]
//!     }
//!     fn export_example(&self, example: &ExportExample, _options: &Object) -> ExportResult {
//!         let Some(decision) = example.candidate.decision() else {
//!             return ExportResult::failed(&example.example_id, "no decision");
//!         };
//!         let mut data = Object::new();
//!         data.insert("prompt", Json::from(example.input.instruction.content.as_str()));
//!         data.insert("completion", Json::from(decision.say.as_str()));
//!         match ExportRecord::new(format!("{}:0", example.example_id), "prompts", data) {
//!             Ok(record) => ExportResult::exported(&example.example_id, vec![record])
//!                 .unwrap_or_else(|e| ExportResult::failed(&example.example_id, e.to_string())),
//!             Err(e) => ExportResult::failed(&example.example_id, e.to_string()),
//!         }
//!     }
//! }
//!
//! let example = r#"{"example_id": "0:1", "input": {"id": 0, "instruction": {"type": "user", "content": "Hi"}},
//!   "candidate": {"id": 1, "parent_id": null, "stage_id": 0, "kind": "agent", "response_status": "completed",
//!                 "output": {"say": "Hello"}, "status": "finished", "execution_finished": true, "origin": "model"}}"#;
//! let input = format!("{}\nnot json\n", example.replace('\n', " "));
//! let mut out = Vec::new();
//! let summary = serve_export(&Prompts, input.as_bytes(), &mut out, &Object::new(), 16).unwrap();
//! assert_eq!((summary.examples, summary.errors), (2, 1));
//! let text = String::from_utf8(out).unwrap();
//! let mut lines = text.lines();
//! assert!(lines.next().unwrap().contains(r#""completion":"Hello""#));
//! assert!(lines.next().unwrap().contains(r#""status":"error""#));
//! ```

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};

use magma_protocol::export::{ExportExample, ExportResult};
use magma_protocol::{AgentInfo, Json, Object};

use crate::unwind::panic_message;

/// An agent's dataset exporter: the files its datasets land in, and how it
/// renders examples into records. Implement
/// [`export_example`](Exporter::export_example) to render one example at a
/// time, or override [`export`](Exporter::export) to see a whole graph's
/// examples at once.
///
/// Whatever an implementation does, every example gets exactly one result
/// from [`serve_export`]: a missing result, a result for another example or
/// a panic becomes an `error` result for the examples concerned, with a
/// reason, and the export goes on.
pub trait Exporter: Send + Sync {
    /// The dataset (channel) names and the file each lands in, GEN's
    /// `renderer.filenames`: e.g. `[("chat", "chat.json")]`. File names are
    /// bare names ending in `.json`; GEN also writes `<stem>_train.json`
    /// and `<stem>_validation.json` for each.
    fn filenames(&self) -> Vec<(String, String)>;

    /// Renders one example. The default is an `error` result saying the
    /// exporter renders batches only.
    fn export_example(&self, example: &ExportExample, options: &Object) -> ExportResult {
        let _ = options;
        ExportResult::failed(
            &example.example_id,
            "this exporter does not render single examples",
        )
    }

    /// Renders a batch of examples (those of one graph, or part of them),
    /// one result per example. The default calls
    /// [`export_example`](Exporter::export_example) for each.
    fn export(&self, examples: &[ExportExample], options: &Object) -> Vec<ExportResult> {
        examples
            .iter()
            .map(|e| self.export_example(e, options))
            .collect()
    }
}

/// What [`serve_export`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportSummary {
    /// Lines read, each answered by one result.
    pub examples: usize,
    /// Results with status `error` among them.
    pub errors: usize,
}

/// The identity and files of an agent's exporter, as one JSON object:
/// `{"agent_id", "agent_version", "filenames": {channel: file}}`. The
/// `export --describe` subcommand prints it; the Python side reads it.
pub fn describe(info: &AgentInfo, exporter: &dyn Exporter) -> String {
    let mut files = Object::new();
    for (channel, file) in exporter.filenames() {
        files.insert(channel, Json::String(file));
    }
    let mut o = Object::new();
    o.insert("agent_id", Json::from(info.agent_id.as_str()));
    o.insert("agent_version", Json::from(info.agent_version.as_str()));
    o.insert("filenames", Json::Object(files));
    Json::Object(o).to_json_string()
}

/// Runs `exporter` over JSON lines: reads one [`ExportExample`] per line of
/// `input`, renders them in batches of `batch` lines, and writes one
/// [`ExportResult`] per line to `output`, in the order of the lines,
/// flushing after each batch.
///
/// A line that is not a valid example (not JSON, not UTF-8, invalid per
/// magma-core) becomes an `error` result whose reason says why, with the
/// line's `example_id` if it has a string one (else `""`). A panic of the
/// exporter becomes an `error` result for the example that panicked (the
/// batch is rendered again one example at a time to find it). Only a
/// failure to read `input` or to write `output` ends the run early.
pub fn serve_export(
    exporter: &dyn Exporter,
    mut input: impl BufRead,
    mut output: impl Write,
    options: &Object,
    batch: usize,
) -> io::Result<ExportSummary> {
    let batch = batch.max(1);
    let mut summary = ExportSummary::default();
    let mut line = Vec::new();
    let mut pending: Vec<Slot> = Vec::with_capacity(batch);
    let mut eof = false;
    while !eof {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            eof = true;
        } else {
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            pending.push(read_line(text, summary.examples + pending.len() + 1));
        }
        if pending.len() >= batch || (eof && !pending.is_empty()) {
            let results = render(exporter, std::mem::take(&mut pending), options);
            for result in results {
                summary.examples += 1;
                if result.status() == magma_protocol::export::ExportStatus::Error {
                    summary.errors += 1;
                }
                let mut text = result.to_json_string();
                text.push('\n');
                output.write_all(text.as_bytes())?;
            }
            output.flush()?;
        }
    }
    Ok(summary)
}

/// One line read: an example, or the error result it already is.
enum Slot {
    Example(Box<ExportExample>),
    Failed(ExportResult),
}

fn read_line(text: &[u8], number: usize) -> Slot {
    match ExportExample::from_slice(text) {
        Ok(example) => Slot::Example(Box::new(example)),
        Err(e) => {
            let id = Json::from_slice(text)
                .ok()
                .and_then(|v| match v {
                    Json::Object(o) => o.get_str("example_id").map(str::to_owned),
                    _ => None,
                })
                .unwrap_or_default();
            ExportResult::failed(
                id,
                format!("line {number} is not a valid ExportExample: {e}"),
            )
            .into()
        }
    }
}

impl From<ExportResult> for Slot {
    fn from(r: ExportResult) -> Slot {
        Slot::Failed(r)
    }
}

/// Renders the examples of `slots` and gives one result per slot, in order.
fn render(exporter: &dyn Exporter, slots: Vec<Slot>, options: &Object) -> Vec<ExportResult> {
    let examples: Vec<ExportExample> = slots
        .iter()
        .filter_map(|s| match s {
            Slot::Example(e) => Some((**e).clone()),
            Slot::Failed(_) => None,
        })
        .collect();
    let mut rendered = if examples.is_empty() {
        Vec::new()
    } else {
        match catch_unwind(AssertUnwindSafe(|| exporter.export(&examples, options))) {
            Ok(results) => matched(&examples, results),
            Err(_) if examples.len() > 1 => examples
                .iter()
                .map(|e| {
                    match catch_unwind(AssertUnwindSafe(|| {
                        exporter.export(std::slice::from_ref(e), options)
                    })) {
                        Ok(results) => matched(std::slice::from_ref(e), results)
                            .pop()
                            .unwrap_or_else(|| missing(e)),
                        Err(payload) => panicked(e, &*payload),
                    }
                })
                .collect(),
            Err(payload) => vec![panicked(&examples[0], &*payload)],
        }
    }
    .into_iter();
    slots
        .into_iter()
        .map(|slot| match slot {
            Slot::Failed(result) => result,
            Slot::Example(e) => rendered.next().unwrap_or_else(|| missing(&e)),
        })
        .collect()
}

/// One result per example, in the examples' order: an exporter's results
/// are matched by `example_id` (the first for each); an example without
/// one gets an `error` result.
fn matched(examples: &[ExportExample], results: Vec<ExportResult>) -> Vec<ExportResult> {
    let mut by_id: HashMap<String, ExportResult> = HashMap::with_capacity(results.len());
    for result in results {
        by_id
            .entry(result.example_id().to_owned())
            .or_insert(result);
    }
    examples
        .iter()
        .map(|e| by_id.remove(&e.example_id).unwrap_or_else(|| missing(e)))
        .collect()
}

fn missing(example: &ExportExample) -> ExportResult {
    ExportResult::failed(
        &example.example_id,
        "the exporter returned no result for this example",
    )
}

fn panicked(example: &ExportExample, payload: &(dyn std::any::Any + Send)) -> ExportResult {
    ExportResult::failed(
        &example.example_id,
        format!("the exporter panicked: {}", panic_message(payload)),
    )
}
