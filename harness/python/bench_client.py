"""Drive a magma-server demo agent the way magma-bench 2.0.1 drives an agent.

Usage: bench_client.py BASE_URL [--cacert PEM] [--timeout SECONDS]

What magma-bench's BenchmarkAgent does, step for step:
  * GET {base}/health, raise_for_status, AgentHealth validation;
  * GET {base}/v1/info, raise_for_status, AgentInfo validation, then
    protocol_version == "2.0" and capabilities["inference"] is true;
  * POST {base}/v1/responses with requests.post(url, json=payload, timeout=...)
    (a new connection per call, no Session), raise_for_status, AgentResponse
    validation and response.validate_request(request);
  * the episode memory is replaced by each candidate's memory, error
    candidates included.
HTTPS: like a bench user, the CA bundle is given through REQUESTS_CA_BUNDLE
(--cacert sets it), and certificates are always verified.

On top of the protocol checks, the scenarios check what the bundled demo
agent answers (echo, first tool on the first robot, a `steps` counter,
`__error__`), so a wrong answer fails as well as a malformed one.

Prints one PASS/FAIL line per scenario and a closing "N passed, M failed"
line; exits 1 if any scenario failed, 2 for bad arguments.
Needs magma-core 2.0.1 (installed with --no-deps), pydantic and requests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import uuid
from typing import Any, Callable

import requests
from magma_core.protocol.agent import (
    PROTOCOL_VERSION,
    AgentHealth,
    AgentInfo,
    AgentRequest,
    AgentResponse,
)

# The skill API as bench and GEN send it: `cancel_current_action` first, then
# the scenario's skills, parameters under `arguments` with Python type names.
BENCH_TOOLS: list[dict[str, Any]] = [
    {
        "name": "cancel_current_action",
        "description": "Cancel the current action running on the targeted robot.",
        "arguments": {},
    },
    {
        "name": "press_button",
        "description": "Press a button.",
        "arguments": {"id": {"description": "Button name.", "type": "str"}},
    },
]
ROBOTS = ["panda", "ur5"]
ATTRIBUTES: dict[str, Any] = {
    "objects": ["sw0", "sw1"],
    "known_robots": ROBOTS,
    "robot_statuses": {robot: "FREE" for robot in ROBOTS},
}


class Agent:
    """The agent as BenchmarkAgent sees it: a base URL and one timeout."""

    def __init__(self, base_url: str, timeout: float) -> None:
        self.base = base_url.rstrip("/")
        self.timeout = timeout

    def startup(self) -> AgentInfo:
        response = requests.get(f"{self.base}/health", timeout=self.timeout)
        response.raise_for_status()
        AgentHealth.model_validate(response.json())
        response = requests.get(f"{self.base}/v1/info", timeout=self.timeout)
        response.raise_for_status()
        info = AgentInfo.model_validate(response.json())
        if info.protocol_version != PROTOCOL_VERSION:
            raise ValueError(f"Unsupported agent protocol {info.protocol_version!r}")
        if not info.capabilities.get("inference", False):
            raise ValueError("Agent runtime does not support inference")
        return info

    def respond(self, request: AgentRequest) -> AgentResponse:
        payload = request.model_dump(mode="json")
        response = requests.post(
            f"{self.base}/v1/responses", json=payload, timeout=self.timeout
        )
        response.raise_for_status()
        result = AgentResponse.model_validate(response.json())
        result.validate_request(request)
        return result


def make_request(inputs: list[dict[str, Any]]) -> AgentRequest:
    """Builds and validates a request as bench does before sending it."""
    return AgentRequest.model_validate({"request_id": uuid.uuid4().hex, "inputs": inputs})


def bench_input(env_id: int, kind: str, content: str, memory: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": env_id,
        "instruction": {"type": kind, "content": content},
        "tools": BENCH_TOOLS,
        "attributes": ATTRIBUTES,
        "memory": memory,
        "num_outputs": 1,
        "extra_keys": {"inference_mode": True},
    }


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def check_completed_say(candidate: Any, say: str) -> None:
    expect(candidate.status == "completed", f"status {candidate.status}: {candidate.error}")
    expect(candidate.output.say == say, f"say {candidate.output.say!r}, expected {say!r}")
    expect(candidate.output.tool_calls == [], f"unexpected calls {candidate.output.tool_calls}")


def scenario_startup(agent: Agent) -> None:
    info = agent.startup()
    expect(info.agent_id != "", "empty agent_id")


def scenario_bench_batch(agent: Agent) -> None:
    """One request for 8 waiting environments, ids 0..7, num_outputs 1."""
    memories = [{"memory_list": ["Always confirm completion to the user."], "history": []}
                for _ in range(8)]
    inputs = [bench_input(i, "user", f"Press sw{i % 2}.", memories[i]) for i in range(8)]
    response = agent.respond(make_request(inputs))
    expect(len(response.root) == 8, f"{len(response.root)} candidates")
    for i, candidate in enumerate(response.root):
        check_completed_say(candidate, f"echo: Press sw{i % 2}.")
        expect(candidate.memory["memory_list"] == memories[i]["memory_list"], "memory_list lost")
        expect(candidate.memory["history"] == [], "history changed")
        expect(candidate.memory["steps"] == 1, f"steps {candidate.memory.get('steps')}")


def scenario_gen_branches(agent: Agent) -> None:
    """GEN-like: 3 situations, num_outputs 4, no inference_mode."""
    inputs = [
        {
            "id": i,
            "instruction": {"type": "user", "content": f"situation {i}"},
            "tools": BENCH_TOOLS,
            "attributes": ATTRIBUTES,
            "memory": {"memory_list": [], "branch": i},
            "num_outputs": 4,
            "extra_keys": {},
        }
        for i in range(3)
    ]
    response = agent.respond(make_request(inputs))
    keys = [(c.source_id, c.candidate_index) for c in response.root]
    expect(keys == [(i, k) for i in range(3) for k in range(4)], f"order {keys}")
    for candidate in response.root:
        # The demo agent samples: candidate k >= 1 is branch k.
        k = candidate.candidate_index
        branch = f" (branch {k})" if k else ""
        check_completed_say(candidate, f"echo: situation {candidate.source_id}{branch}")
        expect(candidate.memory["branch"] == candidate.source_id, "memory of another input")


def scenario_env_feedback(agent: Agent) -> None:
    """A user turn, then env feedback as bench encodes it: the demo calls the
    first tool on the first robot, and memory carries over."""
    memory: dict[str, Any] = {"memory_list": ["Be brief."], "history": []}
    request = make_request([bench_input(0, "user", "Press sw0.", memory)])
    candidate = agent.respond(request).root[0]
    check_completed_say(candidate, "echo: Press sw0.")
    memory = candidate.memory
    for step in range(2, 5):
        status = {
            "infos": "panda: press_button succeed with message: sw0 is now pressed",
            "previous_tool_call": {"panda": {"name": "press_button", "arguments": {"id": "sw0"}}},
        }
        request = make_request([bench_input(0, "env", json.dumps(status), memory)])
        candidate = agent.respond(request).root[0]
        expect(candidate.status == "completed", f"status {candidate.status}")
        calls = candidate.output.tool_calls
        expect(len(calls) == 1, f"calls {calls}")
        expect(calls[0].name == BENCH_TOOLS[0]["name"], f"tool {calls[0].name}")
        expect(calls[0].target_robot_name == ROBOTS[0], f"robot {calls[0].target_robot_name}")
        expect(calls[0].arguments == {}, f"arguments {calls[0].arguments}")
        memory = candidate.memory
        expect(memory["steps"] == step, f"steps {memory['steps']} at step {step}")
    # OpenAI-shaped tools: the name comes from `function.name`.
    openai_tools = [{"type": "function", "function": {"name": "grab", "parameters": {}}}]
    entry = bench_input(1, "env", json.dumps({"infos": ""}), {})
    entry["tools"] = openai_tools
    candidate = agent.respond(make_request([entry])).root[0]
    expect(candidate.output.tool_calls[0].name == "grab", f"{candidate.output}")


def scenario_memory_round_trip(agent: Agent) -> None:
    """Five steps feeding each answer's memory back, as bench does."""
    original: dict[str, Any] = {
        "big": 2**70,
        "negative_big": -(2**80) - 1,
        "one_point_zero": 1.0,
        "tiny": 5e-324,
        "unicode": "héllo — 世界 🤖",
        "nested": {"a": [1, 2.5, None, True, {"b": []}]},
        "memory_list": ["rule one", "rule two"],
        "history": [],
    }
    deep: Any = "bottom"
    for _ in range(100):  # 200 levels of nesting
        deep = {"k": [deep]}
    original["deep"] = deep
    memory = dict(original)
    for step in range(1, 6):
        request = make_request([bench_input(0, "user", f"step {step}", memory)])
        candidate = agent.respond(request).root[0]
        check_completed_say(candidate, f"echo: step {step}")
        memory = candidate.memory
        expect(memory.get("steps") == step, f"steps {memory.get('steps')} at step {step}")
        rest = {k: v for k, v in memory.items() if k != "steps"}
        expect(rest == original, f"memory changed at step {step}")
        expect(list(rest) == list(original), f"key order changed at step {step}")
        expect(type(memory["one_point_zero"]) is float, "1.0 came back as an integer")
        expect(type(memory["big"]) is int and memory["big"] == 2**70, "big integer changed")


def scenario_error_candidate(agent: Agent) -> None:
    """An error candidate keeps its place and its memory; bench then ends the
    episode as invalid_format, but the response itself is valid."""
    memories = [{"n": i} for i in range(3)]
    contents = ["fine", "__error__", "fine"]
    inputs = [bench_input(i, "user", contents[i], memories[i]) for i in range(3)]
    response = agent.respond(make_request(inputs))
    statuses = [c.status for c in response.root]
    expect(statuses == ["completed", "error", "completed"], f"statuses {statuses}")
    failed = response.root[1]
    expect(failed.error is not None and failed.output is None, "inconsistent error candidate")
    expect(failed.memory == memories[1], f"error memory {failed.memory}")


def scenario_invalid_request(agent: Agent) -> None:
    """Not something bench sends, but what it would see: a FastAPI-shaped 422."""
    response = requests.post(
        f"{agent.base}/v1/responses",
        data=b'{"request_id": "x", "inputs": [{"id": 1.0}]}',
        headers={"Content-Type": "application/json"},
        timeout=agent.timeout,
    )
    expect(response.status_code == 422, f"status {response.status_code}")
    detail = response.json()["detail"]
    expect(isinstance(detail, list) and detail[0]["loc"][0] == "body", f"detail {detail}")
    agent.startup()  # still healthy


SCENARIOS: list[tuple[str, Callable[[Agent], None]]] = [
    ("startup: /health and /v1/info as BenchmarkAgent checks them", scenario_startup),
    ("BENCH-like batch of 8 environments", scenario_bench_batch),
    ("GEN-like batch with num_outputs 4", scenario_gen_branches),
    ("env feedback steps", scenario_env_feedback),
    ("memory round trip over 5 steps", scenario_memory_round_trip),
    ("error candidate in place", scenario_error_candidate),
    ("invalid request answered 422", scenario_invalid_request),
]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url", help="e.g. http://127.0.0.1:8080 or https://localhost:8443")
    parser.add_argument("--cacert", help="PEM CA bundle to trust (sets REQUESTS_CA_BUNDLE)")
    parser.add_argument("--timeout", type=float, default=360.0,
                        help="connect and read timeout per call, seconds (bench's default: 360)")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error("--timeout must be > 0")
    if args.cacert:
        if not os.path.isfile(args.cacert):
            parser.error(f"--cacert {args.cacert}: no such file")
        os.environ["REQUESTS_CA_BUNDLE"] = args.cacert
    agent = Agent(args.base_url, args.timeout)
    passed = failed = 0
    for name, scenario in SCENARIOS:
        try:
            scenario(agent)
        except Exception as error:  # noqa: BLE001 - every failure is reported
            failed += 1
            print(f"FAIL {name}: {type(error).__name__}: {error}", flush=True)
            if os.environ.get("BENCH_CLIENT_TRACEBACK"):
                traceback.print_exc()
        else:
            passed += 1
            print(f"PASS {name}", flush=True)
    print(f"against {args.base_url}", flush=True)
    print(f"bench_client: {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
