#!/usr/bin/env python3
"""GEN's repair loop (magma-gen 2.0.0), driven through GEN's own code against an agent.

    python gen_repair_loop.py BASE_URL [--cacert ca.pem] [--expect-fail]

Needs the full MAGMA stack (magma-gen imports torch and sapien through magma_core.simulation):
`cargo xtask interop` runs it in the e2e venv. What runs is GEN's code, from the graph objects up:

1. Graph objects built with GEN's and magma-core's own classes: `Situation` (user instruction,
   then an environment status), `CompleteSituationNode`, `AgentNode` with a `ValidAgentAnswer`
   whose tool call failed (`RobotToolStatus` with `ToolErrorFlag.BAD_CALL`), then an `AgentNode`
   with a `BadAgentAnswer`; GEN's `CoachingRequest` and `TrajectoryStep` over them.
2. `RemoteCoaching` (constructor: PUT; `submit`: the wire request built from those nodes, POST,
   `model_validate` + `validate_request`, logs; its callback turns every proposal into a
   `NodeInjection` with `extra_keys=proposal.extra_keys`; `close`: DELETE). The coach object
   handed to `submit` is the one piece imitated: GEN's `BaseCoach` keeps a shared request
   registry (`shared_state.has_request`) and hands the injections to
   `SharedCoachingState.complete_request`, which builds the `FixedAnswer` below; here a small
   class records them instead (`_complete_request` / `_abort_request`, the two calls
   `RemoteCoaching` makes).
3. `FixedAnswer(fixed_node, main, extras, ...)` as `SharedCoachingState._finalize_request_locked`
   stores it, then GEN's `BaseAgentCoachingManager.add_coaching_nodes` (with a real
   `GraphManager`, `NodeEndManager` and `SingleBranchCounterManager`):
   `_create_injected_node` copies the original input's `extra_keys` and sets
   `extra_keys["coaching"]` to the injection's; `extract_coaching_pending_nodes`; then
   `BaseAgentManager._send_coaching_pending` sends them (one request, ids the batch positions,
   `num_outputs` 1, `AgentRequest` re-validation, `AgentResponse` + `validate_request`) and
   `AgentNode.apply_agent_output` records each answer.
4. Every coached node must hold a valid answer (not `is_bad()`) that makes exactly the decision
   its payload asks for (`replace_say`: that text; `replace_decision`: that decision).

All three repair kinds (`failure` with a recovery point, `suboptimal`, `format`) are run, first
one by one, then with the nodes of all three sent in one batch. HTTPS: GEN's `requests` calls pass
no `verify`, so the CA comes through `REQUESTS_CA_BUNDLE`, as a GEN user sets it.

`--expect-fail`: the agent's proposals are known to be wrong (a negative control); exit 0 when at
least one coached node came back bad, 1 otherwise. Prints one line per check; exit 1 on failure.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path
from uuid import uuid4

import requests
from magma_core.configs.config import CoachingConfig
from magma_core.protocol.agent import AgentInfo
from magma_core.protocol.agent_coaching import CoachingBackendConfig, CoachingSessionConfig
from magma_core.domain.agent_call import Call
from magma_core.simulation.agents import BadAgentAnswer, ValidAgentAnswer
from magma_core.simulation.data_structures import Situation, StatusReturn, UserInstruction
from magma_core.simulation.data_structures.executor_agent_link import RobotToolStatus
from magma_core.simulation.data_structures import ToolErrorFlag
from magma_core.simulation.skills import SkillStateRef
from magma_core.workers.coaching_logs import CoachingLogWriter
from magma_gen.agents.base.generic_agent import BaseAgentManager
from magma_gen.coaching.coach_base import CoachingBuildContext
from magma_gen.coaching.coach_structure import (
    CoachingRequest,
    CoachingTerminalEvent,
    DiagnosisResult,
    RepairFocus,
    TrajectoryStep,
)
from magma_gen.coaching.remote import RemoteCoaching
from magma_gen.graph import AgentNode, CompleteSituationNode, FixedAnswer
from magma_gen.managers import GraphManager, NodeEndManager
from magma_gen.managers.counter.counter_single import SingleBranchCounterManager

RESULTS: list[tuple[bool, str]] = []
STAGE = 0


def check(ok: bool, what: str) -> bool:
    RESULTS.append((ok, what))
    print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    return ok


TOOLS = [
    {"name": "cancel_current_action", "description": "Cancel the current action.", "arguments": {}},
    {"name": "press_button", "description": "Press a button.",
     "arguments": {"id": {"description": "Button name.", "type": "str"}}},
]
ATTRIBUTES = {"objects": ["sw0", "sw1"], "known_robots": ["panda"],
              "robot_statuses": {"panda": "FREE"}}


class Gen:
    """GEN's managers, as `magma_gen`'s runner wires them, without a simulator."""

    def __init__(self, endpoint: str) -> None:
        self.counter = SingleBranchCounterManager(nb_branch=1, max_launch=1)
        self.graph = GraphManager(self.counter, None)
        self.end = NodeEndManager(self.graph, None, None, self.counter,
                                  CoachingConfig(enabled=True))
        self.agent = BaseAgentManager(endpoint, 1, self.graph, self.end, llm_min_interval_time=0,
                                      max_update_size=10, timeout=60)

    def node_id(self) -> int:
        return self.graph.get_new_node_id()


def situation_node(gen: Gen, situation: Situation, parent: AgentNode | None) -> CompleteSituationNode:
    node = CompleteSituationNode(situation=situation, stage_id=STAGE, parent=parent,
                                 skill_state_ref=SkillStateRef(0))
    node.tools = TOOLS
    node.extra_keys = {"inference_mode": False}
    if parent is None:
        gen.graph.root_nodes.append(node)
    else:
        parent.add_child(node)
    return node


def trajectory(gen: Gen):
    """Two nodes of one branch: a press of the wrong button (BAD_CALL), then an invalid answer
    to the environment's feedback. Returns (steps, first node, second node, status)."""
    memory = {"memory_list": ["Always confirm completion to the user."], "history": []}
    first_situation = Situation(memory=memory, attributes=ATTRIBUTES,
                                instruction=UserInstruction("Press sw0 then tell the user."))
    root = situation_node(gen, first_situation, None)
    call = Call(name="press_button", arguments={"id": "sw1"}, target_robot_name="panda")
    first = AgentNode(root, gen.node_id(), ValidAgentAnswer(
        say="", calls=[call], source_node_id=root.get_id(), agent_step_id=root.get_step_level()))
    root.add_child(first)
    first.set_output_skill_state_ref(SkillStateRef(1))
    status = {"infos": "panda: press_button failed with message: sw1 is locked"}
    second_situation = first_situation.copy_with(
        memory=dict(memory, steps=1), history=[], instruction=StatusReturn(status))
    middle = situation_node(gen, second_situation, first)
    second = AgentNode(middle, gen.node_id(), BadAgentAnswer(
        say="", raw_action="", reason="Model output must contain say or action",
        source_node_id=middle.get_id(), agent_step_id=middle.get_step_level()))
    middle.add_child(second)
    # GEN's steps are executed nodes; the invalid one is the request's target, which
    # RemoteCoaching.submit appends to the wire trajectory itself.
    steps = [
        TrajectoryStep(node=first, tool_statuses=[RobotToolStatus(
            robot_name="panda", mess="sw1 is locked", result=False,
            error_flag=ToolErrorFlag.BAD_CALL)], diagnosable=True, in_current_stage=True),
    ]
    return steps, first, second, status


class RecordingCoach:
    """What `RemoteCoaching.submit` calls back on its coach: GEN's `BaseCoach` keeps the request
    in its shared state and finalizes it into a `FixedAnswer`; this one records."""

    def __init__(self) -> None:
        self.logger = logging.getLogger("COACH")
        self.live: set[int] = set()
        self.completed: list[tuple] = []
        self.aborted: list = []

    class _State:
        def __init__(self, coach: "RecordingCoach") -> None:
            self.coach = coach

        def has_request(self, request_id: int) -> bool:
            return request_id in self.coach.live

    @property
    def shared_state(self):
        return RecordingCoach._State(self)

    def _complete_request(self, request, *, fixed_node, main, extras=None, prune_waiting=True):
        self.live.discard(request.request_id)
        self.completed.append((request, fixed_node, main, list(extras or [])))

    def _abort_request(self, request, *, fixed_node=None):
        self.live.discard(request.request_id)
        self.aborted.append(request)


def coached_request(gen: Gen, kind: str):
    """GEN's CoachingRequest for `kind` over a fresh trajectory, with its diagnosis."""
    steps, first, second, status = trajectory(gen)
    event, focus, target, diagnosis = {
        "failure": (CoachingTerminalEvent.FAILURE, RepairFocus.DIAGNOSIS, first,
                    DiagnosisResult(root_cause_step=1, explanation="The robot pressed sw1.",
                                    recommended_repair="I will press sw0 instead.")),
        "suboptimal": (CoachingTerminalEvent.FINISH_SUBOPTIMAL, RepairFocus.SUBOPTIMAL_DIAGNOSIS,
                       first, DiagnosisResult(root_cause_step=1, explanation="A detour.",
                                              recommended_repair="Press sw0 directly.")),
        "format": (CoachingTerminalEvent.FORMAT_ERROR, RepairFocus.FORMAT_FIX, second, None),
    }[kind]
    request = CoachingRequest(
        focus=focus, terminal_event=event, terminal_node=second, target_node=target,
        stage_id=STAGE, request_type=kind, traj_id=[first.id, second.id], steps=steps,
        status_dict=status if kind == "failure" else None,
        error_descriptions=["press_button failed on sw1"],
    )
    return request, diagnosis


def proposals_to_nodes(gen: Gen, remote: RemoteCoaching, coach: RecordingCoach, kinds: list[str]):
    """submit() for each kind, waits for GEN's callback, then GEN's add_coaching_nodes.
    Returns the pending coached nodes with the payload each was given."""
    context = CoachingBuildContext(goal_description="Press sw0 and tell the user.", tools=TOOLS,
                                   stages_description=[], coaching_hint="Use press_button.")
    for kind in kinds:
        request, diagnosis = coached_request(gen, kind)
        coach.live.add(request.request_id)
        sent = remote.submit(kind, request, context, coach, diagnosis)
        check(sent, f"{kind}: RemoteCoaching.submit queued the repair")
    remote.executor.shutdown(wait=True)
    remote.executor = type(remote.executor)(max_workers=2, thread_name_prefix="agent-coaching-http")
    check(not coach.aborted, f"no repair aborted ({len(coach.aborted)} aborted)")
    answers = []
    for request, fixed_node, main, extras in coach.completed:
        answers.append(FixedAnswer(fixed_node=fixed_node, traj_solved=0,
                                   coaching_type=request.coaching_type,
                                   applies_trajectory_diagnostic=request.applies_trajectory_diagnostic,
                                   coaching_request_id=request.request_id, main=main, extras=extras))
    coach.completed.clear()
    gen.agent.add_coaching_nodes(answers)
    return gen.agent.agent_coaching_manager.extract_coaching_pending_nodes(100)


def judge(nodes) -> int:
    good = 0
    for node in nodes:
        payload = node.parent.extra_keys.get("coaching")
        answer = node.get_answer()
        what = f"coached node {node.id}, extra_keys.coaching = {payload}"
        if node.is_bad():
            check(False, f"{what}: the agent's answer is invalid for GEN: {answer.to_string()}")
            continue
        kind = payload.get("kind") if isinstance(payload, dict) else None
        if kind == "replace_say":
            ok = answer.get_say() == payload["text"] and not answer.get_action()
        elif kind == "replace_decision":
            decision = payload["decision"]
            calls = [(c["name"], c.get("arguments", {}), c["target_robot_name"])
                     for c in decision.get("tool_calls", [])]
            ok = answer.get_say() == decision.get("say", "") and [
                (c.name, c.arguments, c.target_robot_name) for c in answer.get_action()] == calls
        else:
            ok = True
        good += bool(check(ok, f"{what}: answered {answer.to_string()}"))
    return good


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--cacert")
    parser.add_argument("--expect-fail", action="store_true")
    args = parser.parse_args()
    if args.cacert:
        os.environ["REQUESTS_CA_BUNDLE"] = args.cacert
    logging.basicConfig(level=logging.WARNING)
    endpoint = args.url.rstrip("/")
    info = AgentInfo.model_validate(requests.get(endpoint + "/v1/info", timeout=30).json())
    kinds = list(info.specialized_coaching)
    check(bool(kinds), f"/v1/info advertises {kinds}")

    writer = CoachingLogWriter(Path(tempfile.mkdtemp(prefix="gen-repair-logs-")))
    config = CoachingSessionConfig(backends={
        "gen": CoachingBackendConfig(type="openai", endpoint="http://127.0.0.1:9/v1",
                                     default_model="gen-model")}, capture_logs=True)
    # GEN's default run id is a uuid4 string (a "/" in it would not reach magma-core's
    # FastAPI routes, which decode %2F before routing).
    remote = RemoteCoaching(endpoint, kinds, str(uuid4()), config, writer)
    bad = 0
    total = 0
    try:
        for batch in [[k] for k in kinds] + [kinds]:
            gen = Gen(endpoint)
            coach = RecordingCoach()
            pending = proposals_to_nodes(gen, remote, coach, batch)
            check(bool(pending), f"{'+'.join(batch)}: {len(pending)} coached node(s) pending in GEN")
            if not pending:
                continue
            gen.agent._send_coaching_pending(pending)
            check(True, f"{'+'.join(batch)}: BaseAgentManager._send_coaching_pending sent "
                        f"{len(pending)} input(s) in one request; the answer validated")
            total += len(pending)
            bad += len(pending) - judge(pending)
    finally:
        remote.close()
    check(remote.session_deleted, "RemoteCoaching.close(): DELETE answered 2xx")
    failed = [what for ok, what in RESULTS if not ok]
    if args.expect_fail:
        print(f"gen repair loop (negative control): {bad} of {total} coached node(s) bad")
        return 0 if bad > 0 else 1
    print(f"gen repair loop: {len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
