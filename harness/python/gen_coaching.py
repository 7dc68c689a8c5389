#!/usr/bin/env python3
"""GEN's coaching client (magma-gen 2.0.0) against an agent: `cargo xtask interop` points
it at magma-server with the demo agent, over HTTP and HTTPS.

    python gen_coaching.py BASE_URL [--cacert ca.pem]

What runs is GEN's own code where it can be loaded without a simulator:

* `magma_gen.coaching.remote.RemoteCoaching`, the real class: its constructor (PUT of the
  session, and on failure DELETE then RuntimeError) and `close()` (DELETE,
  `raise_for_status`). Its module is loaded from magma-gen's file; the two imports it
  needs only in `submit` (graph nodes and simulator data structures, which pull in
  torch and sapien) are replaced by empty placeholders, nothing else.
* Its POST path, as `submit`'s `perform` does it: a `SpecializedCoachingRequest` built
  with the magma-core models the way `submit` builds it, sent with
  `requests.post(..., json=wire.model_dump(mode='json'), timeout=...)`,
  `raise_for_status`, `SpecializedCoachingResponse.model_validate`,
  `validate_request`, the logs handed to a real `CoachingLogWriter`.
* Each proposal's `extra_keys` is a payload (`kind` `replace_say` or `replace_decision`).
  Re-injecting the proposals is GEN's own code's job: `gen_repair_loop.py` drives
  `RemoteCoaching.submit`, `AgentCoachingManager` and `BaseAgentManager` in the full
  MAGMA venv.

HTTPS: GEN's `requests` calls pass no `verify`, so the CA comes through
`REQUESTS_CA_BUNDLE`, as a GEN user would set it. Prints one line per check; exit 1 on
any failure.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import types
from pathlib import Path
from uuid import uuid4

import requests
from magma_core.protocol.agent import (
    AgentDecision,
    AgentError,
    AgentInfo,
    AgentInput,
    AgentInstruction,
    ToolCall,
)
from magma_core.protocol.agent_coaching import (
    CoachingBackendConfig,
    CoachingDiagnosis,
    CoachingError,
    CoachingSessionConfig,
    CoachingStage,
    CoachingStep,
    ReinjectionPoint,
    SpecializedCoachingRequest,
    SpecializedCoachingResponse,
)
from magma_core.workers.coaching_logs import CoachingLogWriter


def load_remote_coaching():
    """magma_gen.coaching.remote.RemoteCoaching from the installed magma-gen file."""
    placeholders = {
        "magma_core.simulation.data_structures": ["StatusReturn", "ToolErrorFlag"],
        "magma_gen.graph": [
            "CompleteSituationNode",
            "NodeInjection",
            "ReinjectionAnchor",
            "SituationNode",
        ],
    }
    for name, attrs in placeholders.items():
        module = types.ModuleType(name)
        for attr in attrs:
            setattr(module, attr, type(attr, (), {}))
        sys.modules[name] = module
    package = importlib.util.find_spec("magma_gen")
    if package is None or not package.submodule_search_locations:
        raise SystemExit("magma-gen is not installed")
    path = Path(list(package.submodule_search_locations)[0]) / "coaching" / "remote.py"
    spec = importlib.util.spec_from_file_location("magma_gen.coaching.remote", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.RemoteCoaching


RESULTS: list[tuple[bool, str]] = []


def check(ok: bool, what: str) -> bool:
    RESULTS.append((ok, what))
    print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    return ok


TOOLS = [
    {"name": "cancel_current_action", "description": "Cancel the current action.", "arguments": {}},
    {
        "name": "press_button",
        "description": "Press a button.",
        "arguments": {"id": {"description": "Button name.", "type": "str"}},
    },
]
ATTRIBUTES = {"objects": ["sw0"], "known_robots": ["panda"], "robot_statuses": {"panda": "FREE"}}


def agent_input(kind: str, content: str) -> AgentInput:
    return AgentInput(
        id=0,
        instruction=AgentInstruction(type=kind, content=content),
        tools=TOOLS,
        attributes=ATTRIBUTES,
        memory={"memory_list": ["Always confirm completion to the user."], "history": []},
        num_outputs=1,
    )


def wire_request(run_id: str, kind: str, diagnosis: CoachingDiagnosis | None,
                 hint: str | None, recovery: bool) -> SpecializedCoachingRequest:
    """A request as RemoteCoaching.submit builds it: the steps with their node ids, inputs,
    decisions or errors, internal steps and execution summaries; a `replacement` point by
    step id and, for a failure after a bad call, a `recovery` point with an input."""
    call = ToolCall(name="press_button", arguments={"id": "sw1"}, target_robot_name="panda")
    env = '{"infos": "panda: press_button failed with message: sw1 is locked"}'
    trajectory = [
        CoachingStep(
            id=11, input=agent_input("user", "Press sw0."),
            output=AgentDecision(say="", tool_calls=[call]), error=None,
            internal_steps=[{"id": "step-0", "component": "commander", "origin": "model",
                             "full_prompt": "...", "input_elements": {}, "output_raw": "..."}],
            execution={"diagnosable": True,
                       "execution_results": [{"robot": "panda", "tool": "press_button",
                                              "result": "failure", "error_flag": "BAD_CALL",
                                              "message": "sw1 is locked"}],
                       "input_type": "INSTRUCTION", "input_content": "Press sw0.",
                       "answer": "press_button(id=sw1)", "answer_data": {}},
        ),
        CoachingStep(
            id=12, input=agent_input("env", env), output=None,
            error=AgentError(code="invalid_output", message="Model output must contain say or action",
                             component="commander"),
            internal_steps=[], execution={"diagnosable": True, "execution_results": [],
                                          "input_type": "FEEDBACK", "input_content": env,
                                          "answer": "", "answer_data": {}},
        ),
    ]
    points = [ReinjectionPoint(id="replacement", input_step_id=11)]
    if recovery:
        points.append(ReinjectionPoint(id="recovery", input=agent_input("env", env)))
    return SpecializedCoachingRequest(
        run_id=run_id, request_id=uuid4().hex, kind=kind,
        stage=CoachingStage(id=3, goal="Press sw0 and tell the user.", hint=hint),
        active_errors=[CoachingError(code="environment", description="press_button failed on sw1")],
        diagnosis=diagnosis, target_step_id=11, trajectory=trajectory, reinjection_points=points,
    )


def perform(endpoint: str, timeout: float, wire: SpecializedCoachingRequest,
            log_writer) -> SpecializedCoachingResponse:
    """RemoteCoaching.submit's perform(), minus GEN's scheduling."""
    response = requests.post(endpoint + "/v1/coaching", json=wire.model_dump(mode="json"),
                             timeout=timeout)
    response.raise_for_status()
    result = SpecializedCoachingResponse.model_validate(response.json())
    result.validate_request(wire)
    for log in result.logs:
        log_writer(log)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--cacert")
    args = parser.parse_args()
    if args.cacert:
        os.environ["REQUESTS_CA_BUNDLE"] = args.cacert
    endpoint = args.url.rstrip("/")
    RemoteCoaching = load_remote_coaching()
    logs_dir = Path(tempfile.mkdtemp(prefix="gen-coaching-logs-"))
    writer = CoachingLogWriter(logs_dir)

    info = AgentInfo.model_validate(requests.get(endpoint + "/v1/info", timeout=30).json())
    kinds = list(info.specialized_coaching)
    check(sorted(kinds) == ["failure", "format", "suboptimal"] and info.coaching_resume
          and info.capabilities.get("coaching") is True,
          f"/v1/info advertises {kinds}, coaching_resume {info.coaching_resume}")

    config = CoachingSessionConfig(backends={
        "gen": CoachingBackendConfig(type="openai", endpoint="http://127.0.0.1:9/v1",
                                     default_model="gen-model"),
        "judge": CoachingBackendConfig(type="openai", endpoint="http://127.0.0.1:9/v1",
                                       default_model="judge-model", timeout=12),
    }, capture_logs=True)
    # A uuid4 run id, as GEN's default, with characters GEN's quote() must encode.
    run_id = f"gen run/é {uuid4()}"
    remote = RemoteCoaching(endpoint, kinds, run_id, config, writer)
    check(True, "RemoteCoaching(...) opened the session (PUT, run id percent-encoded)")
    again = RemoteCoaching(endpoint, kinds, f"other {uuid4()}", config, writer)
    again.close()
    check(True, "a second RemoteCoaching on another run id opened and closed")

    timeout = remote.timeout
    cases = [
        ("failure", CoachingDiagnosis(explanation="Wrong button.",
                                      expected_decision="I will press sw0 instead."), None, True),
        ("suboptimal", None, "Press sw0 directly.", False),
        ("format", None, None, False),
    ]
    for kind, diagnosis, hint, recovery in cases:
        wire = wire_request(run_id, kind, diagnosis, hint, recovery)
        result = perform(endpoint, timeout, wire, writer)
        ok = check(result.status == "corrected" and len(result.proposals) == len(wire.reinjection_points)
                   and len(result.logs) >= 1,
                   f"{kind}: POST /v1/coaching -> {result.status}, {len(result.proposals)} proposal(s), "
                   f"{len(result.logs)} log(s), model_validate + validate_request")
        if not ok:
            continue
        # Each proposal's extra_keys is the payload GEN re-injects as extra_keys.coaching;
        # gen_repair_loop.py re-injects them through GEN's own code.
        kinds_of = [p.extra_keys.get("kind") for p in result.proposals]
        check(all(k in ("replace_say", "replace_decision") for k in kinds_of),
              f"{kind}: every proposal's extra_keys is a payload ({kinds_of})")

    # Without a diagnosis or a hint the demo coach gives up: abandoned, with its reason and
    # the Markdown log magma-core writes for a non-corrected outcome.
    wire = wire_request(run_id, "failure", None, None, False)
    result = perform(endpoint, timeout, wire, writer)
    check(result.status == "abandoned" and bool(result.reason) and not result.proposals
          and any(log.content.startswith("# Coaching abandoned") for log in result.logs),
          f"failure without diagnosis -> {result.status}: {result.reason!r}")

    # A different configuration for the open run: 409, RuntimeError, and GEN's clean-up
    # DELETE closes that session.
    other = config.model_copy(update={"capture_logs": False})
    try:
        RemoteCoaching(endpoint, kinds, run_id, other, writer)
        check(False, "a different configuration for an open run was accepted")
    except RuntimeError as error:
        cause = error.__cause__
        status = getattr(getattr(cause, "response", None), "status_code", None)
        check(status == 409, f"a different configuration: RuntimeError ({status}), as GEN raises it")
    wire = wire_request(run_id, "format", None, None, False)
    gone = requests.post(endpoint + "/v1/coaching", json=wire.model_dump(mode="json"), timeout=timeout)
    check(gone.status_code == 404, f"after GEN's clean-up DELETE the run is unknown: {gone.status_code}")

    remote.close()
    check(remote.session_deleted, "RemoteCoaching.close(): DELETE answered 2xx")
    written = sorted(p.name for p in logs_dir.iterdir())
    check(len(written) >= 4, f"{len(written)} coaching logs written by CoachingLogWriter")

    failed = [what for ok, what in RESULTS if not ok]
    print(f"gen coaching: {len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
