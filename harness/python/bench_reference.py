#!/usr/bin/env python3
"""The Python reference paths that `cargo xtask bench` measures magma-rs against.

    bench_reference.py batch FILE
        Reads JSON Lines cases {"kind": "request", "doc": "<json text>"} and prints one
        {"verdict": "accept"|"reject", "reason": ...} line per case: `json.loads` of the
        line and of the document, then `AgentRequest.model_validate` (pydantic python
        mode, magma-core 2.0.1). The whole process is timed from outside (hyperfine).

    bench_reference.py client URL BODY_FILE CALLS
        What BENCH does per step, CALLS times: `requests.post(url, json=payload)` with no
        Session (a new connection per call), raise_for_status, `AgentResponse`
        validation of the JSON body and `response.validate_request(request)`. Prints
        {"calls": N, "secs": S} (one warm-up call is not timed).
"""

from __future__ import annotations

import json
import sys
import time

from magma_core.protocol.agent import AgentRequest, AgentResponse
from pydantic import ValidationError


def batch(path: str) -> int:
    out = []
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            case = json.loads(line)
            try:
                AgentRequest.model_validate(json.loads(case["doc"]))
                out.append('{"verdict":"accept","reason":"ok"}')
            except ValidationError as e:
                first = e.errors()[0]
                out.append(json.dumps({"verdict": "reject", "reason": first["type"]}))
            except ValueError:
                out.append('{"verdict":"reject","reason":"json_invalid"}')
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def client(url: str, body_file: str, calls: int) -> int:
    import requests

    with open(body_file, "rb") as f:
        request = AgentRequest.model_validate(json.loads(f.read()))
    endpoint = url.rstrip("/") + "/v1/responses"

    def call() -> None:
        payload = request.model_dump(mode="json")
        resp = requests.post(endpoint, json=payload, timeout=360)
        resp.raise_for_status()
        response = AgentResponse.model_validate(resp.json())
        response.validate_request(request)

    call()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    secs = time.perf_counter() - start
    print(json.dumps({"calls": calls, "secs": secs}))
    return 0


def main() -> int:
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "batch":
        return batch(args[1])
    if len(args) == 4 and args[0] == "client":
        return client(args[1], args[2], int(args[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
