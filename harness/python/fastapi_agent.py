#!/usr/bin/env python3
"""A MAGMA agent written the way MAGMA users write them: FastAPI + uvicorn on the
magma-core 2.0.1 models. `cargo xtask interop` runs it and points the Rust client
(harness/src/bin/interop-client.rs) at it, over HTTP and HTTPS.

    python fastapi_agent.py --port 8888 [--ready-after 2.0] [--no-internal-steps]
        [--ssl-certfile cert.pem --ssl-keyfile key.pem [--ssl-client-ca ca.pem]]
        [--loop auto|asyncio|uvloop] [--http auto|h11|httptools]

`--loop` and `--http` are uvicorn's own choices (default `auto`: uvloop and httptools when
installed, as `uvicorn[standard]` installs them, else asyncio and h11); `cargo xtask bench`
names them, so that a missing package is an error instead of a silent fallback.

Behaviour (deterministic, echo-style):

* `GET /health`: 503 `{"detail": "Models are not ready"}` for `--ready-after` seconds
  after start-up (imitating model loading), then `{"status": "ready"}`.
* `GET /v1/info`: always answers, even while loading.
* `POST /v1/responses` (`response_model=AgentResponse`, body `AgentRequest`): 503 while
  loading. For each input and each candidate index k, a deep copy of the input memory
  with `history` extended by the instruction and the answer, and an integer `steps`
  counter; the answer is:
  - `user` instruction: say `echo: <content>`;
  - `env` instruction with tools and `attributes.known_robots`: a call of the first tool
    on the first robot;
  - content `__error__`: an `error` candidate (code `echo_error`) with the input memory.
  Candidates k >= 1 sample like magma-server's demo agent unless `extra_keys.inference_mode`
  is true: say `echo: <content> (branch k)`, or the k-th (tool, robot) pair, tools first.
  `extra_keys.delay_ms` (an integer 0..60000) waits that long first, without blocking the
  event loop (the request waits for its longest delay).
  Agent-specific refusals, 422:
  - content `__reject__`: string detail (the kind reference agents raise with
    `HTTPException(422, detail=...)`);
  - `memory.history` not a list of objects: string detail (as the docs' minimal agent);
  - `extra_keys.inference_mode` not a bool: a FastAPI validation list detail.
  The response is checked with `validate_request` before it is returned.

With `--coaching`, the agent also serves the coaching extension through magma-core's own
`CoachingSessions` and `mount_coaching_routes` (the routes, session registry, status codes,
log capture and error handling are magma-core's code). Only what needs a model is
replaced: `LMWorkerPool` (which would connect to the session's LLM backends) by a stub
pool that refuses a session whose backend endpoint contains `unreachable` (so the 503 path
is taken), and the coaching service by a stub that records one log through the request's
worker (captured like an LLM call's log), honours `additional_info.delay_ms`, raises for
`additional_info.fail`, and answers `corrected` with one proposal per reinjection point in
full-history's shape: `extra_keys` is the payload itself,
`{"kind": "replace_decision", "decision": D}` with `D` this agent's own answer to the point's
input. `/v1/info` then advertises the three kinds and `coaching_resume`, and
`/v1/responses` applies `extra_keys.coaching` as full-history does: `replace_say` says the
text, `replace_decision` makes the decision, without the echo rule; any other payload is an
`invalid_output` error candidate with the input memory. `--wrap-proposals` is a deliberate
fault for negative tests: the stub coach wraps each payload in a `coaching` key (GEN then
re-injects `extra_keys.coaching.coaching`, which this agent refuses).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import ssl
import time
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from magma_core.protocol.agent import (
    PROTOCOL_VERSION,
    AgentDecision,
    AgentError,
    AgentHealth,
    AgentInfo,
    AgentInput,
    AgentOutput,
    AgentRequest,
    AgentResponse,
    ToolCall,
)

from magma_core.protocol.agent_coaching import (
    CoachingLog,
    CoachingProposal,
    SpecializedCoachingRequest,
    SpecializedCoachingResponse,
)

AGENT_ID = "fastapi-echo-agent"
# --no-internal-steps: candidates carry no internal steps, as magma-server's demo agent
# (`cargo xtask e2e` compares the BENCH results of both).
INTERNAL_STEPS = True
AGENT_VERSION = "0.1.0"
NOT_READY = "Models are not ready"


def check_input(index: int, item: AgentInput) -> None:
    """Agent-specific validation, as reference agents do before inference."""
    if item.instruction.content == "__reject__":
        raise HTTPException(status_code=422, detail=f"input {item.id}: rejected by the agent")
    history = item.memory.get("history")
    if history is not None and not (
        isinstance(history, list) and all(isinstance(h, dict) for h in history)
    ):
        raise HTTPException(status_code=422, detail="memory.history must be a list of objects")
    mode = item.extra_keys.get("inference_mode")
    if mode is not None and not isinstance(mode, bool):
        raise RequestValidationError(
            [
                {
                    "type": "bool_type",
                    "loc": ("body", "inputs", index, "extra_keys", "inference_mode"),
                    "msg": "Input should be a valid boolean",
                    "input": mode,
                }
            ]
        )


def decide(item: AgentInput, k: int = 0) -> AgentDecision:
    """Candidate `k`'s decision. Candidate 0, and every candidate with
    `inference_mode: true`, is the deterministic answer; otherwise candidate k
    is branch k, as magma-server's demo agent samples."""
    content = item.instruction.content
    robots = item.attributes.get("known_robots")
    sampling = k > 0 and item.extra_keys.get("inference_mode") is not True
    if item.instruction.type == "env" and item.tools and isinstance(robots, list) and robots:
        pair = k % (len(item.tools) * len(robots)) if sampling else 0
        tool = item.tools[pair % len(item.tools)]
        return AgentDecision(
            say="",
            tool_calls=[
                ToolCall(
                    name=str(tool.get("name") or "unknown"),
                    arguments={},
                    target_robot_name=str(robots[pair // len(item.tools)]),
                )
            ],
        )
    branch = f" (branch {k})" if sampling else ""
    return AgentDecision(say=f"echo: {content}{branch}", tool_calls=[])


def delay_ms(item: AgentInput) -> int:
    """`extra_keys.delay_ms` when it is an integer from 0 to 60000, else 0."""
    delay = item.extra_keys.get("delay_ms")
    if isinstance(delay, int) and not isinstance(delay, bool) and 0 <= delay <= 60000:
        return delay
    return 0


def coached(payload) -> AgentDecision | str:
    """The decision an `extra_keys.coaching` payload asks for, or why it cannot be read."""
    if not isinstance(payload, dict):
        return "extra_keys.coaching is not an object"
    kind = payload.get("kind")
    if kind == "replace_say" and isinstance(payload.get("text"), str) and payload["text"]:
        return AgentDecision(say=payload["text"], tool_calls=[])
    if kind == "replace_decision":
        try:
            decision = AgentDecision.model_validate(payload.get("decision"))
        except ValueError as error:
            return f"invalid replace_decision payload: {error}"
        if bool(decision.say) == bool(decision.tool_calls):
            return "a replacement decision needs exactly one of a non-empty say or tool calls"
        return decision
    return f"unsupported coaching payload kind {kind!r}"


def answer(request: AgentRequest, item: AgentInput, k: int) -> AgentOutput:
    memory = copy.deepcopy(item.memory)
    step = {
        "id": f"step-{k}",
        "component": "echo",
        "origin": "model",
        "full_prompt": item.instruction.content,
        "input_elements": {},
        "output_raw": "",
    }

    def failed(code: str, message: str) -> AgentOutput:
        return AgentOutput(
            request_id=request.request_id,
            source_id=item.id,
            candidate_index=k,
            status="error",
            memory=memory,
            internal_steps=[step] if INTERNAL_STEPS else [],
            output=None,
            error=AgentError(code=code, message=message, component="echo"),
        )

    if item.instruction.content == "__error__":
        return failed("echo_error", "asked to fail with __error__")
    coaching = item.extra_keys.get("coaching")
    if coaching is not None:
        decision = coached(coaching)
        if isinstance(decision, str):
            return failed("invalid_output", decision)
    else:
        decision = decide(item, k)
    author = "USER" if item.instruction.type == "user" else "SYSTEM"
    history = list(memory.get("history", []))
    history.append({"author": author, "content": item.instruction.content})
    history.append({"author": "MODEL", "content": json.dumps(decision.model_dump())})
    memory["history"] = history
    steps = memory.get("steps")
    memory["steps"] = (steps if isinstance(steps, int) and not isinstance(steps, bool) else 0) + 1
    step["output_raw"] = json.dumps(decision.model_dump())
    return AgentOutput(
        request_id=request.request_id,
        source_id=item.id,
        candidate_index=k,
        status="completed",
        memory=memory,
        internal_steps=[step] if INTERNAL_STEPS else [],
        output=decision,
        error=None,
    )


class StubPool:
    """Stands in for magma-core's LMWorkerPool: no model backend is reachable here."""

    def __init__(self, backends) -> None:
        for name, backend in backends.items():
            if "unreachable" in backend.endpoint:
                raise ConnectionError(f"backend {name} at {backend.endpoint} is unreachable")
        self.backends = dict(backends)

    def get_capacity(self) -> int:
        return len(self.backends)

    def submit(self, payload, callback):
        raise RuntimeError("the interop agent has no model backend")

    def close(self) -> None:
        self.backends = {}


# `--wrap-proposals`: the deliberate fault of the negative tests.
WRAP_PROPOSALS = False


class StubCoach:
    """A coaching service over the request's worker, without a model."""

    def __init__(self, worker) -> None:
        self.worker = worker

    def process(self, request: SpecializedCoachingRequest) -> SpecializedCoachingResponse:
        delay = request.additional_info.get("delay_ms")
        if isinstance(delay, int) and not isinstance(delay, bool) and 0 < delay <= 60000:
            time.sleep(delay / 1000)
        if request.additional_info.get("fail"):
            raise RuntimeError("the stub coach was asked to fail")
        # What an LLM call records through the worker's log sink.
        self.worker.record(
            CoachingLog(coaching_type=request.kind, content=f"# Stub call\n\n{request.kind}\n")
        )
        proposals = []
        for point in request.reinjection_points:
            source = point.input
            if source is None:
                source = next(s.input for s in request.trajectory if s.id == point.input_step_id)
            payload = {"kind": "replace_decision", "decision": decide(source).model_dump()}
            if WRAP_PROPOSALS:
                payload = {"coaching": payload}
            proposals.append(
                CoachingProposal(reinjection_point_id=point.id, extra_keys=payload)
            )
        return SpecializedCoachingResponse(
            request_id=request.request_id, status="corrected", proposals=proposals
        )


def mount_coaching(app: FastAPI) -> None:
    from magma_core.workers import coaching_sessions

    coaching_sessions.LMWorkerPool = StubPool
    sessions = coaching_sessions.CoachingSessions(supported=True)
    coaching_sessions.mount_coaching_routes(app, sessions, StubCoach)


def create_app(ready_after: float, coaching: bool = False) -> FastAPI:
    state = {"ready_at": float("inf")}

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        state["ready_at"] = time.monotonic() + ready_after
        yield

    app = FastAPI(title=AGENT_ID, version=AGENT_VERSION, lifespan=lifespan)

    def ready() -> bool:
        return time.monotonic() >= state["ready_at"]

    @app.get("/health", response_model=AgentHealth)
    async def health() -> AgentHealth:
        if not ready():
            raise HTTPException(status_code=503, detail=NOT_READY)
        return AgentHealth()

    @app.get("/v1/info", response_model=AgentInfo)
    async def info() -> AgentInfo:
        if coaching:
            return AgentInfo(
                protocol_version=PROTOCOL_VERSION,
                agent_id=AGENT_ID,
                agent_version=AGENT_VERSION,
                specialized_coaching=["failure", "suboptimal", "format"],
                coaching_resume=True,
                capabilities={"inference": True, "coaching": True},
            )
        return AgentInfo(
            protocol_version=PROTOCOL_VERSION,
            agent_id=AGENT_ID,
            agent_version=AGENT_VERSION,
            capabilities={"inference": True, "coaching": False},
            coaching_unavailable_reason="Coaching is not available in the echo agent",
        )

    @app.post("/v1/responses", response_model=AgentResponse)
    async def responses(request: AgentRequest) -> AgentResponse:
        if not ready():
            raise HTTPException(status_code=503, detail=NOT_READY)
        for index, item in enumerate(request.inputs):
            check_input(index, item)
        # Imitate inference without blocking the event loop (the request waits
        # for its longest delay_ms, as the demo agent's inputs do).
        await asyncio.sleep(max((delay_ms(item) for item in request.inputs), default=0) / 1000)
        outputs = [
            answer(request, item, k)
            for item in request.inputs
            for k in range(item.num_outputs)
        ]
        response = AgentResponse(outputs)
        response.validate_request(request)
        return response

    if coaching:
        mount_coaching(app)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument(
        "--ready-after",
        type=float,
        default=0.0,
        help="seconds after start-up during which /health and /v1/responses answer 503",
    )
    parser.add_argument("--ssl-certfile")
    parser.add_argument("--ssl-keyfile")
    parser.add_argument(
        "--ssl-client-ca", help="require client certificates signed by this CA (mutual TLS)"
    )
    parser.add_argument(
        "--coaching",
        action="store_true",
        help="serve the coaching routes with magma-core's mount_coaching_routes",
    )
    parser.add_argument(
        "--wrap-proposals",
        action="store_true",
        help="a deliberate fault: the stub coach wraps each payload in a `coaching` key",
    )
    parser.add_argument(
        "--no-internal-steps",
        action="store_true",
        help="answer without internal_steps, as magma-server's demo agent does",
    )
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    parser.add_argument("--http", default="auto", choices=["auto", "h11", "httptools"])
    args = parser.parse_args()
    global WRAP_PROPOSALS, INTERNAL_STEPS
    WRAP_PROPOSALS = args.wrap_proposals
    INTERNAL_STEPS = not args.no_internal_steps
    if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
        parser.error("--ssl-certfile and --ssl-keyfile go together")
    if args.ssl_client_ca and not args.ssl_certfile:
        parser.error("--ssl-client-ca needs --ssl-certfile and --ssl-keyfile")

    options = {}
    if args.ssl_certfile:
        options.update(ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile)
    if args.ssl_client_ca:
        options.update(ssl_ca_certs=args.ssl_client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
    uvicorn.run(
        create_app(args.ready_after, args.coaching),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        loop=args.loop,
        http=args.http,
        **options,
    )


if __name__ == "__main__":
    main()
