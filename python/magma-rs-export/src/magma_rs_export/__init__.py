"""GEN's dataset export for MAGMA agents written in Rust with magma-rs.

The exporter runs ``<binary> [args] export`` (the subcommand every agent
binary built with ``magma_server::cli::run`` has), writes GEN's
``ExportExample``s to it as JSON lines and reads one ``ExportResult`` line
per example back. See README.md for the settings.
"""
from __future__ import annotations

import collections
import json
import os
import queue
import shlex
import shutil
import signal
import subprocess
import threading
from typing import Any, Callable, Sequence

from magma_core.protocol.agent_export import DatasetRenderer, ExportExample, ExportResult, GenExporter
from pydantic import ValidationError

__all__ = ["RustExporter", "RustRenderer", "exporter_factory", "from_environment"]
__version__ = "0.1.0"

DEFAULT_TIMEOUT = 60.0
DEFAULT_BATCH = 64


class RustRenderer(DatasetRenderer):
    """The agent's dataset files, as its exporter describes them."""

    def __init__(self, exporter: "RustExporter", filenames: dict[str, str]) -> None:
        self._exporter = exporter
        self.filenames = dict(filenames)

    def render(self, channel: str, example: dict[str, Any]) -> dict[str, Any]:
        """One example's first record of ``channel``, rendered by the Rust exporter."""
        result = self._exporter.export([ExportExample.model_validate(example)])[0]
        for record in result.records:
            if record.dataset == channel:
                return record.data
        raise ValueError(f"No {channel!r} record for example {result.example_id!r}: "
                         f"{result.status} {result.reason or ''}".strip())


class RustExporter(GenExporter):
    """A ``GenExporter`` backed by an agent binary's ``export`` subcommand."""

    def __init__(self, binary: str, *, args: Sequence[str] = (), timeout: float = DEFAULT_TIMEOUT,
                 batch_size: int = DEFAULT_BATCH) -> None:
        found = shutil.which(binary) if os.sep not in binary else binary
        if found is None or not os.path.isfile(found):
            raise RuntimeError(f"magma-rs-export: agent binary {binary!r} not found")
        if timeout <= 0 or batch_size < 1:
            raise ValueError("timeout must be positive and batch_size at least 1")
        self.command = [found, *args, "export"]
        self.timeout = float(timeout)
        self.batch_size = int(batch_size)
        description = self._describe()
        self.agent_id = description["agent_id"]
        self.agent_version = description["agent_version"]
        self.renderer = RustRenderer(self, description["filenames"])

    def _describe(self) -> dict[str, Any]:
        try:
            done = subprocess.run([*self.command, "--describe"], capture_output=True, timeout=self.timeout,
                                  stdin=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise RuntimeError(f"magma-rs-export: {shlex.join(self.command)} --describe failed: {error}") from error
        if done.returncode != 0:
            raise RuntimeError(f"magma-rs-export: {shlex.join(self.command)} --describe exited with "
                               f"{done.returncode}: {done.stderr.decode(errors='replace').strip()}")
        try:
            value = json.loads(done.stdout)
            ok = (isinstance(value, dict) and isinstance(value.get("agent_id"), str)
                  and isinstance(value.get("agent_version"), str) and isinstance(value.get("filenames"), dict)
                  and all(isinstance(k, str) and isinstance(v, str) for k, v in value["filenames"].items()))
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"magma-rs-export: {shlex.join(self.command)} --describe printed no description: "
                               f"{done.stdout[:200]!r}")
        return value

    def export(self, examples: list[ExportExample], *, options: dict | None = None) -> list[ExportResult]:
        """One result per example, in order; failures of the Rust side are ``error`` results."""
        options = {} if options is None else options
        lines = [example.model_dump_json() + "\n" for example in examples]
        results: list[ExportResult] = []
        batch = self.batch_size
        while len(results) < len(examples):
            start = len(results)
            got, failure = self._run(examples[start:], lines[start:], options, batch)
            results.extend(got)
            if failure is None:
                continue
            if batch > 1:
                # Which example of the batch failed is not known: again one at a time.
                batch = 1
            elif len(results) < len(examples):
                results.append(_error(examples[len(results)].example_id, failure))
        return results

    def _run(self, examples: Sequence[ExportExample], lines: Sequence[str], options: dict,
             batch: int) -> tuple[list[ExportResult], str | None]:
        """Results for a prefix of ``examples``, and why the process stopped early (or None)."""
        command = [*self.command, "--batch-size", str(batch), "--options", json.dumps(options)]
        try:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, start_new_session=True)
        except OSError as error:
            return [], f"cannot start the exporter {command[0]}: {error}"
        stderr_tail: collections.deque[str] = collections.deque(maxlen=4)
        lines_out: queue.Queue[list[bytes] | None] = queue.Queue()
        ready: collections.deque[bytes] = collections.deque()
        threads = [
            threading.Thread(target=_feed, args=(process.stdin, lines), daemon=True),
            threading.Thread(target=_drain, args=(process.stdout, lines_out), daemon=True),
            threading.Thread(target=_tail, args=(process.stderr, stderr_tail), daemon=True),
        ]
        for thread in threads:
            thread.start()
        results: list[ExportResult] = []
        failure = None
        for example in examples:
            # A batch's results come together, after the whole batch is rendered.
            if not ready:
                try:
                    chunk = lines_out.get(timeout=self.timeout * batch)
                except queue.Empty:
                    failure = f"the exporter gave no result within {self.timeout * batch:g}s"
                    break
                if chunk is not None:
                    ready.extend(chunk)
            line = ready.popleft() if ready else None
            if line is None:
                try:
                    code: int | str = process.wait(timeout=self.timeout)
                except subprocess.TimeoutExpired:
                    code = "none: it closed its output and kept running"
                detail = " | ".join(stderr_tail)
                failure = f"the exporter process ended (exit status {code}) before answering" + (
                    f": {detail}" if detail else "")
                break
            results.append(_parse(example, line))
        _stop(process)
        for thread in threads:
            thread.join(timeout=5)
        return results, failure


def _parse(example: ExportExample, line: bytes) -> ExportResult:
    try:
        result = ExportResult.model_validate_json(line)
    except (ValidationError, ValueError) as error:
        first = str(error).splitlines()
        return _error(example.example_id, "the exporter wrote an invalid result line: "
                      + (" ".join(first[:3]) if first else repr(line[:200])))
    if result.example_id != example.example_id:
        return _error(example.example_id, f"the exporter answered example {result.example_id!r} "
                                          f"in place of {example.example_id!r}")
    return result


def _error(example_id: str, reason: str) -> ExportResult:
    return ExportResult(example_id=example_id, status="error", reason=reason or "unknown error")


def _feed(stdin, lines: Sequence[str]) -> None:
    try:
        # Large writes: the thread holds the GIL only between them.
        chunk: list[str] = []
        size = 0
        for line in lines:
            chunk.append(line)
            size += len(line)
            if size >= 1 << 20:
                stdin.write("".join(chunk).encode("utf-8"))
                chunk, size = [], 0
        if chunk:
            stdin.write("".join(chunk).encode("utf-8"))
        stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _drain(stdout, out: "queue.Queue[list[bytes] | None]") -> None:
    """Puts the complete lines of each large read, as one list: few wake-ups of the reader."""
    pending = b""
    try:
        while True:
            data = stdout.read1(1 << 20)
            if not data:
                break
            lines = (pending + data).split(b"\n")
            pending = lines.pop()
            if lines:
                out.put(lines)
    except (OSError, ValueError):
        pass
    if pending:
        out.put([pending])
    out.put(None)


def _tail(stderr, tail: "collections.deque[str]") -> None:
    try:
        for line in stderr:
            text = line.decode("utf-8", errors="replace").strip()
            if text:
                tail.append(text)
    except (OSError, ValueError):
        pass


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


def exporter_factory(binary: str, *, args: Sequence[str] = (), timeout: float = DEFAULT_TIMEOUT,
                     batch_size: int = DEFAULT_BATCH) -> Callable[[], RustExporter]:
    """The zero-argument factory an entry point of ``magma.export.gen`` names."""

    def factory() -> RustExporter:
        return RustExporter(binary, args=args, timeout=timeout, batch_size=batch_size)

    return factory


def from_environment() -> RustExporter:
    """The ``magma-rs`` entry point: the binary and settings from ``MAGMA_RS_EXPORT_*``."""
    binary = os.environ.get("MAGMA_RS_EXPORT_BINARY", "").strip()
    if not binary:
        raise RuntimeError("magma-rs-export: set MAGMA_RS_EXPORT_BINARY to the agent binary "
                           "(a path, or a name on PATH)")
    try:
        timeout = float(os.environ.get("MAGMA_RS_EXPORT_TIMEOUT", DEFAULT_TIMEOUT))
        batch = int(os.environ.get("MAGMA_RS_EXPORT_BATCH", DEFAULT_BATCH))
    except ValueError as error:
        raise RuntimeError(f"magma-rs-export: invalid MAGMA_RS_EXPORT_TIMEOUT or MAGMA_RS_EXPORT_BATCH: {error}") from error
    return RustExporter(binary, args=shlex.split(os.environ.get("MAGMA_RS_EXPORT_ARGS", "")), timeout=timeout,
                        batch_size=batch)
