//! The exporter side of GEN's dataset export: `serve_export` over JSON
//! lines with misbehaving exporters, the demo exporter, and the
//! `magma-server export` subcommand as a child process.

#[cfg(feature = "cli")]
use std::io::Write;
#[cfg(feature = "cli")]
use std::process::{Command, Stdio};

use magma_server::Exporter;
use magma_server::demo::DemoExporter;
use magma_server::export::serve_export;
use magma_server::magma_protocol::export::{
    ExportExample, ExportRecord, ExportResult, ExportStatus,
};
use magma_server::{Json, Object};

fn example(id: &str, content: &str) -> String {
    format!(
        r#"{{"example_id":"{id}","input":{{"id":3,"instruction":{{"type":"user","content":"{content}"}},"memory":{{"memory_list":["Be brief.",7]}},"tools":[{{"name":"go"}}]}},"candidate":{{"id":1,"parent_id":null,"stage_id":0,"kind":"agent","response_status":"completed","output":{{"say":"ok","tool_calls":[{{"name":"go","arguments":{{"to":"table"}},"target_robot_name":"rover"}}]}},"internal_steps":[{{"id":"s1","component":"planner","full_prompt":"P","output_raw":"O"}},{{"not":"a step"}}],"status":"finished","execution_finished":true,"origin":"model"}}}}"#
    )
}

fn results(out: &[u8]) -> Vec<ExportResult> {
    std::str::from_utf8(out)
        .expect("UTF-8 output")
        .lines()
        .map(|l| ExportResult::from_slice(l.as_bytes()).expect("a valid ExportResult line"))
        .collect()
}

/// Answers `bad-*` examples wrongly: no result, a result for another id,
/// or a panic; the others with one record.
struct Unruly;

impl Exporter for Unruly {
    fn filenames(&self) -> Vec<(String, String)> {
        vec![("rows".into(), "rows.json".into())]
    }

    fn export(&self, examples: &[ExportExample], _: &Object) -> Vec<ExportResult> {
        let mut out = Vec::new();
        for e in examples {
            match e.example_id.as_str() {
                "bad-missing" => {}
                "bad-other" => out.push(ExportResult::failed("someone-else", "x")),
                "bad-panic" => panic!("unruly exporter"),
                id => {
                    let record = ExportRecord::new(format!("{id}:0"), "rows", Object::new())
                        .expect("valid record");
                    out.push(ExportResult::exported(id, vec![record]).expect("valid result"));
                }
            }
        }
        out.reverse();
        out
    }
}

#[test]
fn every_line_gets_one_result_in_order_whatever_the_exporter_does() {
    let ids = ["a", "bad-missing", "b", "bad-other", "bad-panic", "c"];
    let mut input: String = ids.iter().map(|id| example(id, "hi") + "\n").collect();
    input.push_str("{\"example_id\": \"broken\", \"input\": 1}\n[]\n\n");
    for batch in [1, 2, 4, 64] {
        let mut out = Vec::new();
        let summary = serve_export(&Unruly, input.as_bytes(), &mut out, &Object::new(), batch)
            .expect("in-memory I/O");
        let got = results(&out);
        assert_eq!((summary.examples, summary.errors), (9, 6), "batch {batch}");
        let got_ids: Vec<&str> = got.iter().map(ExportResult::example_id).collect();
        assert_eq!(
            got_ids,
            [
                "a",
                "bad-missing",
                "b",
                "bad-other",
                "bad-panic",
                "c",
                "broken",
                "",
                ""
            ],
            "batch {batch}"
        );
        let status: Vec<ExportStatus> = got.iter().map(ExportResult::status).collect();
        use ExportStatus::{Error, Exported};
        assert_eq!(
            status,
            [
                Exported, Error, Exported, Error, Error, Exported, Error, Error, Error
            ]
        );
        assert!(got[1].reason().unwrap().contains("no result"));
        assert!(
            got[4]
                .reason()
                .unwrap()
                .contains("panicked: unruly exporter")
        );
        assert!(
            got[6]
                .reason()
                .unwrap()
                .contains("line 7 is not a valid ExportExample")
        );
        assert!(got[6].reason().unwrap().contains("input"));
        assert!(got[8].reason().unwrap().contains("line 9"));
    }
}

#[test]
fn the_demo_exporter_renders_chat_and_internal_steps() {
    let ex = ExportExample::from_slice(example("4:1", "Press sw0.").as_bytes()).unwrap();
    let result = DemoExporter.export_example(&ex, &Object::new());
    assert_eq!(result.status(), ExportStatus::Exported);
    let records = result.records();
    assert_eq!(
        records.len(),
        2,
        "the chat and the one InternalStep-shaped step"
    );
    assert_eq!(records[0].dataset(), "chat");
    assert_eq!(
        Json::Object(records[0].data().clone()).to_json_string(),
        r#"{"example_id":"4:1","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Press sw0."},{"role":"assistant","content":"ok","tool_calls":[{"name":"go","target_robot_name":"rover","arguments":{"to":"table"}}]}],"tools":[{"name":"go"}]}"#
    );
    assert_eq!(records[1].dataset(), "internal_steps");
    assert_eq!(
        Json::Object(records[1].data().clone()).to_json_string(),
        r#"{"example_id":"4:1","component":"planner","origin":"model","prompt":"P","completion":"O"}"#
    );
    let names: Vec<String> = DemoExporter
        .filenames()
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(names, ["chat", "internal_steps"]);
    // An error candidate is skipped with a reason.
    let failed = example("4:2", "x").replace(
        r#""response_status":"completed","output":{"say":"ok","tool_calls":[{"name":"go","arguments":{"to":"table"},"target_robot_name":"rover"}]}"#,
        r#""response_status":"error","error":{"code":"c","message":"m"}"#,
    );
    assert!(failed.contains(r#""response_status":"error""#));
    let ex = ExportExample::from_slice(failed.as_bytes()).unwrap();
    let result = DemoExporter.export_example(&ex, &Object::new());
    assert_eq!(result.status(), ExportStatus::Skipped);
}

#[cfg(feature = "cli")]
#[test]
fn the_binary_exports_and_describes() {
    let bin = crate::binary::BIN;
    let out = Command::new(bin)
        .args(["export", "--describe"])
        .output()
        .expect("run magma-server export --describe");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!(
            r#"{{"agent_id":"magma-demo-agent","agent_version":"{}","filenames":{{"chat":"chat.json","internal_steps":"internal_steps.json"}}}}"#,
            env!("CARGO_PKG_VERSION")
        )
    );
    let mut child = Command::new(bin)
        .args(["export", "--batch-size", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run magma-server export");
    let input = [
        example("1:1", "hi"),
        "not json".to_owned(),
        example("1:2", "__export_panic__"),
        example("1:3", "hello"),
    ]
    .join("\n");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = results(&out.stdout);
    let summary: Vec<(&str, ExportStatus)> =
        got.iter().map(|r| (r.example_id(), r.status())).collect();
    assert_eq!(
        summary,
        [
            ("1:1", ExportStatus::Exported),
            ("", ExportStatus::Error),
            ("1:2", ExportStatus::Error),
            ("1:3", ExportStatus::Exported),
        ]
    );
    // Bad options are refused with status 2.
    let out = Command::new(bin)
        .args(["export", "--options", "[1]"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
