#!/usr/bin/env python3
"""GEN's coaching client driving whole sessions against magma-server replicas that share their
coaching sessions through Redis (`cargo xtask deploy-check`).

    python gen_coaching_replicas.py sessions URL [--cacert PEM] [--runs N] [--concurrency C]
        [--delay-ms MS] [--pause kill|outage --signals DIR]
    python gen_coaching_replicas.py delete-wait URL_A URL_B [--delay-ms MS]

What runs is GEN's own `magma_gen.coaching.remote.RemoteCoaching`, loaded as `gen_coaching.py`
loads it (constructor: PUT of the session, DELETE then RuntimeError on failure; `close()`:
DELETE), and its POST path as `submit` performs it (`gen_coaching.perform`: the request built
with magma-core's models, `raise_for_status`, `model_validate`, `validate_request`, the logs to
GEN's `CoachingLogWriter`).

`sessions`: for each run, RemoteCoaching opens the session through URL (nginx), every kind the
agent advertises is asked once, then `--concurrency` threads ask three times as many requests of
every kind at once, then `close()`; afterwards the run is unknown (404) wherever the balancer
sends the request. With `--pause kill` the first run writes `DIR/ready` before its concurrent
requests (the caller kills a replica while they run); with `--pause outage` it writes
`DIR/ready`, waits for `DIR/down` (the caller stopped Redis), checks that coaching answers 503
with a `detail` naming the store, that GEN's RemoteCoaching cannot open a session, and that
`/health` and `/v1/responses` still answer, writes `DIR/checked`, waits for `DIR/up` (Redis
back) and goes on with the same session.

`delete-wait`: opens a session through replica A, sends a slow request (`additional_info.
delay_ms`, which the demo coach waits) to replica B, and while it runs closes the session
through A with `RemoteCoaching.close()`: requests on either replica are then 404, the DELETE
answers only after B's request (at least `--delay-ms` after it was sent), and B's request is
answered `corrected`.

Prints one line per check; exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from uuid import uuid4

sys.path.insert(0, str(Path(__file__).resolve().parent))

import requests  # noqa: E402
from magma_core.protocol.agent import AgentInfo, AgentRequest, AgentResponse  # noqa: E402
from magma_core.protocol.agent_coaching import (  # noqa: E402
    CoachingBackendConfig,
    CoachingDiagnosis,
    CoachingSessionConfig,
)
from magma_core.workers.coaching_logs import CoachingLogWriter  # noqa: E402

import gen_coaching as gc  # noqa: E402

CONFIG = CoachingSessionConfig(backends={
    "gen": CoachingBackendConfig(type="openai", endpoint="http://127.0.0.1:9/v1",
                                 default_model="gen-model"),
    "judge": CoachingBackendConfig(type="openai", endpoint="http://127.0.0.1:9/v1",
                                   default_model="judge-model", timeout=12),
}, capture_logs=True)

# What each kind is asked with, so that the demo coach corrects it.
CASES = {
    "failure": (CoachingDiagnosis(explanation="Wrong button.",
                                  expected_decision="I will press sw0 instead."), None, True),
    "suboptimal": (None, "Press sw0 directly.", False),
    "format": (None, None, False),
}

LOCK = threading.Lock()
_REMOTE_COACHING = []


def remote_coaching():
    """GEN's RemoteCoaching class, loaded once."""
    if not _REMOTE_COACHING:
        _REMOTE_COACHING.append(gc.load_remote_coaching())
    return _REMOTE_COACHING[0]


def check(ok: bool, what: str) -> bool:
    with LOCK:
        return gc.check(ok, what)


def wire(run_id: str, kind: str, delay_ms: int):
    diagnosis, hint, recovery = CASES[kind]
    request = gc.wire_request(run_id, kind, diagnosis, hint, recovery)
    if delay_ms:
        request = request.model_copy(update={"additional_info": {"delay_ms": delay_ms}})
    return request


def ask(endpoint: str, timeout: float, run_id: str, kind: str, delay_ms: int, writer):
    """One coaching request as RemoteCoaching.submit performs it; the result's status."""
    request = wire(run_id, kind, delay_ms)
    result = gc.perform(endpoint, timeout, request, writer)
    return result.status, len(result.proposals) == len(request.reinjection_points)


def wait_for(path: Path, within: float = 300.0) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} did not appear within {within:.0f} s")
        time.sleep(0.02)


def outage_checks(endpoint: str, run_id: str, kinds: list[str], writer) -> None:
    """Redis is down: coaching is 503 everywhere, inference and health are not affected."""
    statuses, details = [], []
    for _ in range(4):
        body = wire(run_id, "format", 0).model_dump(mode="json")
        r = requests.post(endpoint + "/v1/coaching", json=body, timeout=30)
        statuses.append(r.status_code)
        details.append(r.json().get("detail", "") if r.status_code == 503 else r.text)
        r = requests.put(f"{endpoint}/v1/coaching/sessions/outage-{uuid4()}",
                         json=CONFIG.model_dump(mode="json"), timeout=30)
        statuses.append(r.status_code)
        details.append(r.json().get("detail", "") if r.status_code == 503 else r.text)
    check(all(s == 503 for s in statuses)
          and all("coaching session store" in d for d in details),
          f"Redis down: coaching PUT and POST answer {sorted(set(statuses))} with a detail "
          f"naming the store ({details[0][:90]}...)")
    try:
        remote_coaching()(endpoint, kinds, f"during outage {uuid4()}", CONFIG, writer)
        check(False, "Redis down: RemoteCoaching opened a session")
    except RuntimeError as error:
        status = getattr(getattr(error.__cause__, "response", None), "status_code", None)
        check(status == 503, f"Redis down: RemoteCoaching(...) raises RuntimeError ({status}), "
                             "as GEN does when the agent refuses a session")
    health = [requests.get(endpoint + "/health", timeout=30) for _ in range(4)]
    check(all(h.status_code == 200 and h.json() == {"status": "ready"} for h in health),
          "Redis down: /health answers 200 ready on every replica")
    request = AgentRequest.model_validate({"request_id": "outage", "inputs": [
        {"id": 0, "instruction": {"type": "user", "content": "hello"}, "num_outputs": 2}]})
    ok = 0
    for _ in range(4):
        r = requests.post(endpoint + "/v1/responses", json=request.model_dump(mode="json"),
                          timeout=30)
        if r.status_code == 200:
            AgentResponse.model_validate(r.json()).validate_request(request)
            ok += 1
    check(ok == 4, f"Redis down: /v1/responses answered {ok}/4 requests with valid responses")


def one_session(endpoint: str, kinds: list[str], writer, args, number: int,
                pause: str | None) -> None:
    RemoteCoaching = remote_coaching()
    run_id = f"deploy run/{number} {uuid4()}"
    remote = RemoteCoaching(endpoint, kinds, run_id, CONFIG, writer)
    check(True, f"run {number}: RemoteCoaching opened the session (PUT through the balancer)")
    timeout = remote.timeout
    for kind in kinds:
        status, whole = ask(endpoint, timeout, run_id, kind, 0, writer)
        check(status == "corrected" and whole, f"run {number}: {kind} -> {status}")
    signals = Path(args.signals) if args.signals else None
    if pause == "outage":
        (signals / "ready").touch()
        wait_for(signals / "down")
        outage_checks(endpoint, run_id, kinds, writer)
        (signals / "checked").touch()
        wait_for(signals / "up")
        for kind in kinds:
            status, whole = ask(endpoint, timeout, run_id, kind, 0, writer)
            check(status == "corrected" and whole,
                  f"run {number}: Redis back: {kind} on the same session -> {status}")
    if pause == "kill":
        (signals / "ready").touch()
    jobs = [kinds[i % len(kinds)] for i in range(3 * args.concurrency)]
    started = time.monotonic()
    with ThreadPoolExecutor(args.concurrency) as pool:
        results = list(pool.map(
            lambda kind: ask(endpoint, timeout, run_id, kind, args.delay_ms, writer), jobs))
    corrected = sum(1 for status, whole in results if status == "corrected" and whole)
    check(corrected == len(jobs),
          f"run {number}: {len(jobs)} concurrent requests ({args.concurrency} at a time, "
          f"{args.delay_ms} ms each): {corrected} corrected in {time.monotonic() - started:.1f} s")
    remote.close()
    check(remote.session_deleted, f"run {number}: RemoteCoaching.close(): DELETE answered 2xx")
    gone = []
    for _ in range(4):
        body = wire(run_id, "format", 0).model_dump(mode="json")
        gone.append(requests.post(endpoint + "/v1/coaching", json=body, timeout=30).status_code)
    check(gone == [404] * 4, f"run {number}: after close the run is unknown everywhere: {gone}")


def sessions(args) -> None:
    if args.cacert:
        os.environ["REQUESTS_CA_BUNDLE"] = args.cacert
    endpoint = args.url.rstrip("/")
    writer = CoachingLogWriter(Path(tempfile.mkdtemp(prefix="gen-coaching-logs-")))
    info = AgentInfo.model_validate(requests.get(endpoint + "/v1/info", timeout=30).json())
    kinds = list(info.specialized_coaching)
    check(sorted(kinds) == ["failure", "format", "suboptimal"],
          f"/v1/info advertises {kinds}")
    for number in range(1, args.runs + 1):
        one_session(endpoint, kinds, writer, args, number, args.pause if number == 1 else None)


def delete_wait(args) -> None:
    a, b = args.url_a.rstrip("/"), args.url_b.rstrip("/")
    writer = CoachingLogWriter(Path(tempfile.mkdtemp(prefix="gen-coaching-logs-")))
    kinds = list(AgentInfo.model_validate(
        requests.get(a + "/v1/info", timeout=30).json()).specialized_coaching)
    run_id = f"delete-wait {uuid4()}"
    remote = remote_coaching()(a, kinds, run_id, CONFIG, writer)
    check(True, "RemoteCoaching opened the session on replica A")
    outcome: dict = {}

    def slow() -> None:
        outcome["sent"] = time.monotonic()
        outcome["status"] = ask(b, remote.timeout, run_id, "failure", args.delay_ms, writer)[0]
        outcome["answered"] = time.monotonic()

    slow_thread = threading.Thread(target=slow)
    slow_thread.start()
    time.sleep(args.delay_ms / 4000)
    deleted: dict = {}

    def close() -> None:
        deleted["sent"] = time.monotonic()
        remote.close()
        deleted["answered"] = time.monotonic()

    close_thread = threading.Thread(target=close)
    close_thread.start()
    time.sleep(args.delay_ms / 4000)
    late = []
    for replica in (a, b):
        body = wire(run_id, "format", 0).model_dump(mode="json")
        late.append(requests.post(replica + "/v1/coaching", json=body, timeout=30).status_code)
    slow_thread.join()
    close_thread.join()
    check(late == [404, 404], f"while A's DELETE waits, new requests on A and B are 404: {late}")
    check(outcome.get("status") == "corrected",
          f"B's slow request ({args.delay_ms} ms) -> {outcome.get('status')}")
    waited = deleted["answered"] - deleted["sent"]
    check(remote.session_deleted and deleted["answered"] >= outcome["sent"] + args.delay_ms / 1000,
          f"A's DELETE answered {waited:.2f} s after it was sent, "
          f"{deleted['answered'] - outcome['answered']:+.2f} s from B's answer: it waited for B's "
          "request")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sessions")
    s.add_argument("url")
    s.add_argument("--cacert")
    s.add_argument("--runs", type=int, default=3)
    s.add_argument("--concurrency", type=int, default=8)
    s.add_argument("--delay-ms", type=int, default=100)
    s.add_argument("--pause", choices=["kill", "outage"])
    s.add_argument("--signals")
    d = sub.add_parser("delete-wait")
    d.add_argument("url_a")
    d.add_argument("url_b")
    d.add_argument("--delay-ms", type=int, default=2000)
    args = parser.parse_args()
    if getattr(args, "pause", None) and not args.signals:
        parser.error("--pause needs --signals DIR")
    if args.command == "sessions":
        sessions(args)
    else:
        delete_wait(args)
    failed = [what for ok, what in gc.RESULTS if not ok]
    print(f"gen coaching replicas ({args.command}): {len(gc.RESULTS) - len(failed)} passed, "
          f"{len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
