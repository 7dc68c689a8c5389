#!/usr/bin/env python3
"""GEN's dataset export (magma-gen 2.0.0) through magma-rs-export and a Rust exporter.

`cargo xtask gen-export` installs python/magma-rs-export into a venv with magma-core 2.0.1
and magma-gen 2.0.0 (`pip install <path>`), then runs

    python gen_export.py --binary target/debug/magma-server --work DIR

Graph folders are written with magma-core's own records (`SituationRecord`,
`CandidateRecord`, `SituationLink`) and the metadata `magma_gen.storage.reader.SavedGraph`
requires, and exported by GEN's own command, `python -m magma_gen.launch_export RUN --agent
magma-rs`, the entry point of magma-rs-export, with MAGMA_RS_EXPORT_BINARY naming the demo
agent's binary. Checked:

1. a clean run: the datasets hold exactly the rows of the candidates GEN selects, rendered
   by the demo exporter; the train/validation files split them by graph as the manifest
   says; `export_manifest.json` is complete, its digests right; a second run with
   `--skip-pre-made` is skipped and changes nothing;
2. a graph of another agent version is refused as GEN refuses it (an
   `Incompatible producer identity/version` failure, the export incomplete), and a run with
   only such graphs fails with GEN's `No compatible generation graphs found`;
3. an exporter that panics, aborts (the process crashes), writes garbage or hangs on one
   example gives an `error` result for that example in `export_failures.json`, and the
   export finishes with every other example's rows;
4. with `--llm-binary`, the llm-agent's exporter through the same entry point: its own
   prompt and the decision in the OpenAI shape.

Prints one line per check; exit 1 on any failure.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import magma_gen
from magma_core.protocol.agent import AgentDecision, AgentError, AgentInput, AgentInstruction, ToolCall
from magma_core.protocol.graph import CandidateRecord, SituationLink, SituationRecord

FAILURES: list[str] = []


def check(what: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail and not ok else ""))
    if not ok:
        FAILURES.append(what)


def step(content: str, n: int) -> dict:
    return {"id": f"call-{n}", "component": "planner", "origin": "model",
            "full_prompt": f"You are a robot. Task: {content}", "input_elements": {"turn": n},
            "output_raw": json.dumps({"say": f"done {n}"})}


def candidate(ident: int, parent: int | None, stage: int, *, say: str, optimal: int, total: int = 8,
              error: bool = False, finished: bool = True, faulty: bool = False, links=()) -> CandidateRecord:
    """A candidate whose score (one stage) is 0.4 * optimal / total."""
    return CandidateRecord(
        id=ident, parent_id=parent, stage_id=stage, kind="agent",
        response_status="error" if error else "completed",
        output=None if error else AgentDecision(say=say, tool_calls=[
            ToolCall(name="navigate_to", arguments={"location": "table"}, target_robot_name="rover")]),
        error=AgentError(code="invalid_response", message="unparsable") if error else None,
        internal_steps=[step(say, ident), {"not": "an InternalStep"}],
        execution={"execution_results": [{"robot": "rover", "result": "SUCCESS"}]},
        status="invalid" if error else "finished", execution_finished=finished,
        score={"stage_1": {"optimal": optimal, "non-optimal": 0, "total_child": total}},
        coaching={"diagnosed_as_faulty": faulty}, origin="model",
        links=[SituationLink(situation_id=situation, kind="next") for situation in links],
    )


def write_graph(folder: Path, agent: tuple[str, str], contents: list[str], first_id: int) -> list[str]:
    """A chain of situations, one per content; gives the example ids GEN will select."""
    folder.mkdir(parents=True)
    selected = []
    situations = []
    parent_candidate = None
    for k, content in enumerate(contents):
        sid = first_id + k
        base = 100 * sid
        nxt = (sid + 1,) if k + 1 < len(contents) else ()
        cands = [
            # best (0.4 * 6/8 = 0.3) and one within 0.1 of it (0.25): both selected
            candidate(base + 1, parent_candidate, 1, say=f"first {content}", optimal=6, links=nxt),
            candidate(base + 2, parent_candidate, 1, say=f"second {content}", optimal=5),
            # too far from the best (0.1), an error, unfinished, diagnosed faulty: not selected
            candidate(base + 3, parent_candidate, 1, say="low", optimal=2),
            candidate(base + 4, parent_candidate, 1, say="", optimal=8, error=True),
            candidate(base + 5, parent_candidate, 1, say="unfinished", optimal=8, finished=False),
            candidate(base + 6, parent_candidate, 1, say="faulty", optimal=8, faulty=True),
        ]
        selected += [f"{sid}:{base + 1}", f"{sid}:{base + 2}"]
        record = SituationRecord(
            id=sid, stage_id=1, parent_id=parent_candidate,
            input=AgentInput(id=sid, instruction=AgentInstruction(type="user", content=content),
                             tools=[{"name": "navigate_to", "description": "Drive."},
                                    {"name": "pick", "description": "Pick."}],
                             attributes={"known_robots": ["rover"], "room": "lab"},
                             memory={"memory_list": ["Be brief.", "Check statuses first."]}),
            candidates=cands)
        (folder / f"{sid}.json").write_text(record.model_dump_json())
        situations.append(record)
        parent_candidate = base + 1
    config = {"agent_id": agent[0], "agent_version": agent[1], "generator_version": magma_gen.__version__,
              "export_complete": True, "roots": [first_id], "task": folder.name}
    (folder / "config.json").write_text(json.dumps(config))
    return selected


def launch_export(run: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "magma_gen.launch_export", str(run), "--agent", "magma-rs",
                           *extra], capture_output=True, text=True, env=env, timeout=600)


def rows(folder: Path, name: str) -> list:
    return json.loads((folder / name).read_text())


def describe(binary: str) -> tuple[str, str]:
    out = subprocess.run([binary, "export", "--describe"], capture_output=True, check=True, text=True)
    value = json.loads(out.stdout)
    return value["agent_id"], value["agent_version"]


def clean_run(work: Path, agent: tuple[str, str], env: dict) -> None:
    run = work / "clean"
    expected = {}
    for n, task in enumerate(["handover", "tidy", "inspect", "sort"]):
        expected[str((run / task).resolve())] = write_graph(
            run / task, agent, [f"Go to the table ({task}).", f"Hand over the sponge ({task})."], 10 * n + 1)
    done = launch_export(run, "--validation-ratio", "0.25", env=env)
    check("clean run: launch_export exits 0", done.returncode == 0, done.stderr[-2000:])
    if done.returncode != 0:
        return
    out = run / "datasets"
    manifest = json.loads((out / "export_manifest.json").read_text())
    check("clean run: manifest complete, producer magma_gen", manifest["complete"] is True
          and manifest["producer"] == {"package": "magma_gen", "version": magma_gen.__version__}, str(manifest))
    check("clean run: no failures", rows(out, "export_failures.json") == [], (out / "export_failures.json").read_text())
    files = manifest["files"]
    want_files = {"chat.json", "chat_train.json", "chat_validation.json", "internal_steps.json",
                  "internal_steps_train.json", "internal_steps_validation.json", "export_failures.json"}
    check("clean run: manifest lists every file", set(files) == want_files, str(sorted(files)))
    digests_ok = all(hashlib.sha256((out / name).read_bytes()).hexdigest() == digest for name, digest in files.items())
    check("clean run: manifest digests match the files", digests_ok)
    chat = rows(out, "chat.json")
    steps = rows(out, "internal_steps.json")
    all_expected = sorted(i for ids in expected.values() for i in ids)
    check("clean run: chat holds exactly the selected candidates",
          sorted(r["example_id"] for r in chat) == all_expected, f"{sorted(r['example_id'] for r in chat)}")
    check("clean run: one InternalStep-shaped step per example (the other shape left out)",
          sorted(r["example_id"] for r in steps) == all_expected)
    check("clean run: manifest row counts", manifest["rows"] == {"chat": len(all_expected),
                                                                "internal_steps": len(all_expected)},
          str(manifest["rows"]))
    sample = next(r for r in chat if r["example_id"] == expected[str((run / "handover").resolve())][0])
    messages = sample["messages"]
    check("clean run: the demo exporter's chat rendering",
          [m["role"] for m in messages] == ["system", "user", "assistant"]
          and sorted(messages[0]["content"].split("\n")) == ["Be brief.", "Check statuses first."]
          and messages[1]["content"] == "Go to the table (handover)."
          and messages[2]["content"] == "first Go to the table (handover)."
          and messages[2]["tool_calls"] == [{"name": "navigate_to", "target_robot_name": "rover",
                                             "arguments": {"location": "table"}}]
          and sorted(t["name"] for t in sample["tools"]) == ["navigate_to", "pick"], json.dumps(sample))
    split = manifest["split"]
    check("clean run: split covers every graph once", sorted(split["train"] + split["validation"]) == sorted(expected)
          and len(split["validation"]) == 1, str(split))
    for channel in ("chat", "internal_steps"):
        train = rows(out, f"{channel}_train.json")
        validation = rows(out, f"{channel}_validation.json")
        want_val = sorted(i for task in split["validation"] for i in expected[task])
        want_train = sorted(i for task in split["train"] for i in expected[task])
        check(f"clean run: {channel} train/validation split by graph",
              sorted(r["example_id"] for r in validation) == want_val
              and sorted(r["example_id"] for r in train) == want_train)
    before = {name: (out / name).read_bytes() for name in files}
    before["export_manifest.json"] = (out / "export_manifest.json").read_bytes()
    again = launch_export(run, "--validation-ratio", "0.25", "--skip-pre-made", env=env)
    check("second run with --skip-pre-made is skipped", again.returncode == 0
          and "Skipping completed export" in again.stdout, again.stdout + again.stderr[-1000:])
    check("second run changes no file", all((out / n).read_bytes() == b for n, b in before.items()))


def foreign_runs(work: Path, agent: tuple[str, str], env: dict) -> None:
    run = work / "foreign"
    good = write_graph(run / "ours", agent, ["Go."], 1)
    write_graph(run / "theirs", (agent[0], agent[1] + ".other"), ["Go."], 1)
    write_graph(run / "stranger", ("another-agent", agent[1]), ["Go."], 1)
    done = launch_export(run, env=env)
    check("foreign graphs: launch_export exits 0", done.returncode == 0, done.stderr[-2000:])
    if done.returncode == 0:
        out = run / "datasets"
        failures = rows(out, "export_failures.json")
        want = sorted([{"source": str((run / "theirs").resolve()), "error": "Incompatible producer identity/version"},
                       {"source": str((run / "stranger").resolve()), "error": "Incompatible producer identity/version"}],
                      key=lambda f: f["source"])
        check("foreign graphs: refused as GEN refuses them", sorted(failures, key=lambda f: f["source"]) == want,
              json.dumps(failures))
        manifest = json.loads((out / "export_manifest.json").read_text())
        check("foreign graphs: export incomplete, our graph exported", manifest["complete"] is False
              and sorted(r["example_id"] for r in rows(out, "chat.json")) == sorted(good))
    only = work / "only-foreign"
    write_graph(only / "theirs", (agent[0], agent[1] + ".other"), ["Go."], 1)
    done = launch_export(only, env=env)
    check("only foreign graphs: GEN's refusal", done.returncode != 0
          and "ValueError: No compatible generation graphs found" in done.stderr, done.stderr[-1000:])


GARBLER = textwrap.dedent('''\
    #!{python}
    """The demo exporter, with its output garbled or stalled on marked examples."""
    import subprocess, sys, time
    child = subprocess.Popen([{binary!r}, *sys.argv[1:]], stdout=subprocess.PIPE)
    for line in child.stdout:
        if b"__export_garbage__" in line:
            line = b"this is not an ExportResult\\n"
        elif b"__export_other__" in line:
            line = line.replace(b'"example_id":"', b'"example_id":"x', 1)
        elif b"__export_hang__" in line:
            time.sleep(3600)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    sys.exit(child.wait())
''')


def failing_runs(work: Path, agent: tuple[str, str], env: dict, binary: str) -> None:
    run = work / "failing"
    markers = ["__export_panic__", "__export_abort__", "__export_garbage__", "__export_other__",
               "__export_hang__"]
    contents = ["Go.", *markers, "Stop."]
    ids = write_graph(run / "task", agent, contents, 1)
    garbler = work / "garbler.py"
    garbler.write_text(GARBLER.format(python=sys.executable, binary=binary))
    garbler.chmod(0o755)
    env = dict(env, MAGMA_RS_EXPORT_BINARY=str(garbler), MAGMA_RS_EXPORT_TIMEOUT="3", MAGMA_RS_EXPORT_BATCH="4")
    done = launch_export(run, env=env)
    check("failing exporter: launch_export finishes", done.returncode == 0, done.stderr[-2000:])
    if done.returncode != 0:
        return
    out = run / "datasets"
    failures = {f["example_id"]: f["error"] for f in rows(out, "export_failures.json")}
    bad = {i for k, i in enumerate(ids) if contents[k // 2] in markers}
    check("failing exporter: one error per failing example, none for the others", set(failures) == bad,
          json.dumps(failures, indent=1))
    reasons = {contents[k // 2]: failures.get(i, "") for k, i in enumerate(ids)}
    check("failing exporter: a panic is named", "panicked" in reasons["__export_panic__"], reasons["__export_panic__"])
    check("failing exporter: a crash is named", "process ended" in reasons["__export_abort__"],
          reasons["__export_abort__"])
    check("failing exporter: garbage is named", "invalid result line" in reasons["__export_garbage__"],
          reasons["__export_garbage__"])
    check("failing exporter: a result for another example is named",
          "in place of" in reasons["__export_other__"], reasons["__export_other__"])
    check("failing exporter: a hang is named", "no result within 3s" in reasons["__export_hang__"],
          reasons["__export_hang__"])
    good = sorted(set(ids) - bad)
    check("failing exporter: every other example exported",
          sorted(r["example_id"] for r in rows(out, "chat.json")) == good)
    manifest = json.loads((out / "export_manifest.json").read_text())
    check("failing exporter: export marked incomplete", manifest["complete"] is False)


def llm_agent_run(work: Path, binary: str) -> None:
    """The llm-agent's exporter (its own prompt) through the same entry point."""
    agent = describe(binary)
    run = work / "llm-agent"
    ids = write_graph(run / "task", agent, ["Go to the table.", "Hand over the sponge."], 1)
    env = dict(os.environ, MAGMA_RS_EXPORT_BINARY=binary)
    done = launch_export(run, env=env)
    check("llm-agent: launch_export exits 0", done.returncode == 0, done.stderr[-2000:])
    if done.returncode != 0:
        return
    out = run / "datasets"
    manifest = json.loads((out / "export_manifest.json").read_text())
    check("llm-agent: complete manifest with its own files", manifest["complete"] is True and set(manifest["files"])
          == {"llm_chat.json", "llm_chat_train.json", "llm_chat_validation.json", "export_failures.json"},
          str(manifest))
    rows_ = rows(out, "llm_chat.json")
    check("llm-agent: one row per selected candidate", len(rows_) == len(ids), str(len(rows_)))
    first = rows_[0]["messages"] if rows_ else []
    calls = first[-1].get("tool_calls", []) if first else []
    check("llm-agent: its prompt, then the decision in the OpenAI shape",
          [m["role"] for m in first] == ["system", "user", "assistant"]
          and "Robots: rover." in first[0]["content"] and first[1]["content"] == "Go to the table."
          and calls and calls[0]["function"]["name"] == "navigate_to"
          and json.loads(calls[0]["function"]["arguments"]) == {"location": "table", "target_robot": "rover"}
          and any(t["function"]["name"] == "navigate_to" for t in rows_[0]["tools"]), json.dumps(rows_[:1])[:2000])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--binary", required=True, help="the magma-server binary (demo agent)")
    parser.add_argument("--work", required=True, type=Path, help="an empty scratch directory")
    parser.add_argument("--llm-binary", help="the llm-agent binary, to export with its exporter too")
    args = parser.parse_args()
    binary = str(Path(args.binary).resolve())
    agent = describe(binary)
    env = dict(os.environ, MAGMA_RS_EXPORT_BINARY=binary)
    clean_run(args.work, agent, env)
    foreign_runs(args.work, agent, env)
    failing_runs(args.work, agent, env, binary)
    if args.llm_binary:
        llm_agent_run(args.work, str(Path(args.llm_binary).resolve()))
    if FAILURES:
        print(f"{len(FAILURES)} checks failed", file=sys.stderr)
        return 1
    print("every export check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
