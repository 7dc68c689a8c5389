"""Stand-in for the MAGMA motion-planner server, which BENCH and GEN call to turn every tool
call into a joint trajectory (`--planner-address` / `magma_planner_address`). The real
server is not on any package registry; this one keeps its HTTP contract and algorithm:

  POST /init {"options": {"robot", "joint_vel_limit", "joint_acc_limit"}, "link_names",
              "joint_names", "base_pose", "control_timesteps", "move_group"?}  -> "OK"
  POST /plan {"pose": [7], "robot_qpos": [...], "base_pose"?}
             -> {"status": "Success"|"Failure", "position": [[7 arm joints], ...] | null}

Planning is mplib's `Planner` (a screw motion first, else a pose goal in the world frame),
with the mplib that mani-skill 3.0.1 pins and the robot's URDF/SRDF from mani-skill's own
assets. Rows hold the 7 arm joints: magma-core's TrajectoryConverter adds the gripper.

Usage: planner.py PORT   (127.0.0.1 only, one request at a time)
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
from mplib import Planner

# mani_skill's robot assets, found without importing mani_skill (that would load torch).
ROBOTS = Path(importlib.util.find_spec("mani_skill").submodule_search_locations[0]) / "assets" / "robots"
STATE: dict = {"planner": None, "time_step": 0.1}


def init(req: dict) -> str:
    options = req["options"]
    robot = options.get("robot", "panda_v2")
    folder = ROBOTS / "panda"
    planner = Planner(
        urdf=str(folder / f"{robot}.urdf"),
        srdf=str(folder / f"{robot}.srdf"),
        user_link_names=req["link_names"],
        user_joint_names=req["joint_names"],
        move_group=req.get("move_group", "panda_hand_tcp"),
        joint_vel_limits=np.ones(7) * options["joint_vel_limit"],
        joint_acc_limits=np.ones(7) * options["joint_acc_limit"],
    )
    planner.set_base_pose(np.asarray(req["base_pose"], dtype=float))
    STATE["planner"], STATE["time_step"] = planner, req["control_timesteps"]
    return "OK"


def plan(req: dict) -> dict:
    planner = STATE["planner"]
    failure = {"status": "Failure", "position": None}
    if planner is None:
        print("planner: /plan before /init", flush=True)
        return failure
    try:
        if req.get("base_pose") is not None:
            planner.set_base_pose(np.asarray(req["base_pose"], dtype=float))
        goal = np.asarray(req["pose"], dtype=float)
        qpos = np.zeros(len(planner.user_joint_names))
        given = np.asarray(req["robot_qpos"], dtype=float)
        qpos[: len(given)] = given
        result = planner.plan_screw(goal, qpos, time_step=STATE["time_step"])
        if result["status"] != "Success":
            result = planner.plan_qpos_to_pose(goal, qpos, time_step=STATE["time_step"], wrt_world=True)
        if result["status"] != "Success":
            return failure
        return {"status": "Success", "position": np.asarray(result["position"])[:, :7].tolist()}
    except Exception:  # noqa: BLE001 - the real server answers Failure too
        traceback.print_exc()
        return failure


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        routes = {"/init": init, "/plan": plan}
        out = routes[self.path](req) if self.path in routes else None
        data = json.dumps(out).encode()
        self.send_response(404 if out is None else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if self.path == "/plan":
            print(f"planner: plan -> {out['status']} ({len(out['position'] or [])} steps)", flush=True)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: planner.py PORT")
    port = int(sys.argv[1])
    print(f"planner: 127.0.0.1:{port}", flush=True)
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
