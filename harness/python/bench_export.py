#!/usr/bin/env python3
"""Export of N examples (default 10,000): the demo agent's Rust exporter through
magma-rs-export against a Python exporter doing the same rendering (the export figures
of docs/performance.md).

    python bench_export.py --binary target/release/magma-server [--examples 10000] [--repeat 5]

Each repetition runs each side in a fresh child process of this script, interleaved
(Rust, Python, Rust, ...), with the same examples (a JSON lines file written once, read
and validated as `ExportExample`s by the child before the clock starts). The figure is
what GEN waits for: `exporter.export(examples)`, the call `launch_export` makes per graph,
from the list of validated examples to the list of validated results. Peak memory is the
child's maximum resident set (ru_maxrss), and for the Rust side also that of the agent
binary (RUSAGE_CHILDREN of the child). Before timing, both sides' records are compared
example by example: they must be the same JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def python_exporter():
    """The demo exporter's rendering (crates/magma-server/src/demo.rs), in Python."""
    from magma_core.protocol.agent_coaching import InternalStep
    from magma_core.protocol.agent_export import DatasetRenderer, ExportRecord, ExportResult, GenExporter
    from pydantic import ValidationError

    class Renderer(DatasetRenderer):
        filenames = {"chat": "chat.json", "internal_steps": "internal_steps.json"}

        def render(self, channel, example):
            raise NotImplementedError

    class DemoExporter(GenExporter):
        agent_id = "magma-demo-agent"
        agent_version = "bench"
        renderer = Renderer()

        def export(self, examples, *, options=None):
            return [self.one(e) for e in examples]

        def one(self, e):
            output = e.candidate.output
            if output is None:
                return ExportResult(example_id=e.example_id, status="skipped", reason="the candidate has no decision")
            messages = []
            memory_list = e.input.memory.get("memory_list")
            rules = [r for r in memory_list if isinstance(r, str)] if isinstance(memory_list, list) else []
            if rules:
                messages.append({"role": "system", "content": "\n".join(rules)})
            content = e.input.instruction.content
            if e.input.instruction.type == "env":
                content = f"[env] {content}"
            messages.append({"role": "user", "content": content})
            messages.append({"role": "assistant", "content": output.say, "tool_calls": [
                {"name": c.name, "target_robot_name": c.target_robot_name, "arguments": c.arguments}
                for c in output.tool_calls]})
            records = [ExportRecord(record_id=f"{e.example_id}:chat", dataset="chat",
                                    data={"example_id": e.example_id, "messages": messages,
                                          "tools": list(e.input.tools)})]
            for n, raw in enumerate(e.candidate.internal_steps):
                try:
                    step = InternalStep.model_validate(raw)
                except ValidationError:
                    continue
                records.append(ExportRecord(record_id=f"{e.example_id}:step:{n}", dataset="internal_steps",
                                            data={"example_id": e.example_id, "component": step.component,
                                                  "origin": step.origin, "prompt": step.full_prompt,
                                                  "completion": step.output_raw}))
            return ExportResult(example_id=e.example_id, status="exported", records=records)

    return DemoExporter()


def make_examples(n: int, path: Path) -> None:
    rng = random.Random(26)
    with path.open("w") as out:
        for k in range(n):
            robots = ["rover", "arm", "drone"][: 1 + k % 3]
            example = {
                "example_id": f"{k // 4}:{k}",
                "input": {
                    "id": k // 4,
                    "instruction": {"type": "env" if k % 2 else "user",
                                    "content": f"Bring the {rng.choice(['cup', 'sponge', 'box'])} to the table. " * 4},
                    "tools": [{"name": f"tool_{t}", "description": "Does a thing with an object.",
                               "arguments": {"object": {"description": "What", "type": "str"}}} for t in range(6)],
                    "attributes": {"known_robots": robots, "room": "lab", "objects": ["cup", "sponge", "box"]},
                    "memory": {"memory_list": ["Be brief.", "Check statuses first.", "Never drop things."],
                               "history": [{"author": "USER", "content": "Hello"}] * 3},
                    "num_outputs": 2, "extra_keys": {"temperature": 0.7},
                },
                "candidate": {
                    "id": k, "parent_id": None, "stage_id": 1, "kind": "agent", "response_status": "completed",
                    "output": {"say": "On my way.", "tool_calls": [
                        {"name": "tool_0", "arguments": {"object": "cup"}, "target_robot_name": robots[0]}]},
                    "error": None,
                    "internal_steps": [{"id": f"call-{k}", "component": "planner", "origin": "model",
                                        "full_prompt": "You command robots. " * 40, "input_elements": {"turn": k},
                                        "output_raw": json.dumps({"say": "On my way."})}],
                    "execution": {"execution_results": [{"robot": robots[0], "result": "SUCCESS"}]},
                    "status": "finished", "execution_finished": True,
                    "score": {"stage_1": {"optimal": 3, "non-optimal": 1, "total_child": 4}},
                    "coaching": {}, "coaching_source": {}, "coaching_attempt_ids": [], "origin": "model",
                    "links": [{"situation_id": k // 4 + 1, "kind": "next"}],
                },
            }
            out.write(json.dumps(example) + "\n")


def child(side: str, path: Path, binary: str, dump: Path | None) -> None:
    from magma_core.protocol.agent_export import ExportExample
    examples = [ExportExample.model_validate_json(line) for line in path.read_text().splitlines()]
    if side == "rust":
        from magma_rs_export import RustExporter
        exporter = RustExporter(binary)
    else:
        exporter = python_exporter()
    started = time.perf_counter()
    results = exporter.export(examples)
    elapsed = time.perf_counter() - started
    assert len(results) == len(examples) and all(r.status == "exported" for r in results), "export failed"
    if dump is not None:
        dump.write_text("\n".join(json.dumps([r.example_id, [(x.dataset, x.data) for x in r.records]])
                                  for r in results))
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    parts = {}
    if side == "rust":
        # What the Python side of the Rust path costs: writing the examples, reading the results.
        from magma_core.protocol.agent_export import ExportResult
        started = time.perf_counter()
        for example in examples:
            example.model_dump_json()
        parts["dump_seconds"] = time.perf_counter() - started
        lines = [r.model_dump_json() for r in results]
        started = time.perf_counter()
        for line in lines:
            ExportResult.model_validate_json(line)
        parts["parse_seconds"] = time.perf_counter() - started
    print(json.dumps({"side": side, "seconds": elapsed, "maxrss_kib": own, **parts}))


def run_child(side: str, path: Path, binary: str, dump: Path | None = None) -> dict:
    cmd = [sys.executable, __file__, "--child", side, "--file", str(path), "--binary", binary]
    if dump is not None:
        cmd += ["--dump", str(dump)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def binary_alone(binary: str, path: Path) -> dict:
    """The agent binary alone on the file (no Python): wall seconds and peak RSS by /usr/bin/time."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", binary, "export", "--input", str(path)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    seconds, kib = out.stderr.strip().splitlines()[-1].split()
    return {"side": "binary", "seconds": float(seconds), "maxrss_kib": int(kib)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("target/xtask/bench-export"))
    parser.add_argument("--child")
    parser.add_argument("--file", type=Path)
    parser.add_argument("--dump", type=Path)
    args = parser.parse_args()
    binary = str(Path(args.binary).resolve())
    if args.child:
        child(args.child, args.file, binary, args.dump)
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    path = args.work / "examples.jsonl"
    make_examples(args.examples, path)
    print(f"# {args.examples} examples, {path.stat().st_size} bytes of JSON lines; python {platform.python_version()};"
          f" binary {binary}; load {os.getloadavg()[0]:.2f}")
    run_child("rust", path, binary, args.work / "rust.out")
    run_child("python", path, binary, args.work / "python.out")
    same = (args.work / "rust.out").read_text() == (args.work / "python.out").read_text()
    print(f"# same records from both sides: {same}")
    if not same:
        return 1
    rows = {"rust": [], "python": [], "binary": []}
    for rep in range(args.repeat):
        for side in ("rust", "python", "binary"):
            r = binary_alone(binary, path) if side == "binary" else run_child(side, path, binary)
            rows[side].append(r)
            print(json.dumps(dict(r, repetition=rep)))
    med = {side: statistics.median(r["seconds"] for r in rs) for side, rs in rows.items()}
    peak = {side: max(r["maxrss_kib"] for r in rs) for side, rs in rows.items()}
    dump = statistics.median(r["dump_seconds"] for r in rows["rust"])
    parse = statistics.median(r["parse_seconds"] for r in rows["rust"])
    print(f"median seconds: rust exporter via magma-rs-export {med['rust']:.3f} (of which writing the examples "
          f"{dump:.3f}, validating the results {parse:.3f}); python exporter {med['python']:.3f}; "
          f"agent binary alone on the file {med['binary']:.3f}")
    print(f"ratios: python/rust-via-package {med['python'] / med['rust']:.2f}x; "
          f"python/binary-alone {med['python'] / med['binary']:.2f}x")
    print(f"peak RSS MiB: python process of the rust path {peak['rust'] / 1024:.1f}, agent binary alone "
          f"{peak['binary'] / 1024:.1f}; python exporter's process {peak['python'] / 1024:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
