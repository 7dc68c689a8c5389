#!/usr/bin/env python3
"""Compares the coaching routes of docs/openapi.json with FastAPI's document for an app built
with magma-core 2.0.1's own `mount_coaching_routes` (`cargo xtask openapi-check` runs it in
the interop venv).

    python coaching_openapi.py docs/openapi.json

For each of `PUT` and `DELETE /v1/coaching/sessions/{run_id}` and `POST /v1/coaching`: the
operation exists in both; the path parameters have the same names, places and types and are
required; the request body refers to the same model; the success status is the same, with
the same response model (or none); every status FastAPI documents is documented. For the
three models the routes carry, the properties and the required ones are the same. Exit 1
on any difference.
"""

from __future__ import annotations

import json
import sys

from fastapi import FastAPI
from magma_core.workers.coaching_sessions import CoachingSessions, mount_coaching_routes

ROUTES = [
    ("/v1/coaching/sessions/{run_id}", "put"),
    ("/v1/coaching/sessions/{run_id}", "delete"),
    ("/v1/coaching", "post"),
]
MODELS = ["CoachingSessionConfig", "SpecializedCoachingRequest", "SpecializedCoachingResponse"]


def ref_name(schema: dict | None) -> str | None:
    if not schema:
        return None
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if ref else None


def params(doc: dict, path: str, method: str) -> list[tuple]:
    item = doc["paths"][path]
    found = list(item.get("parameters", [])) + list(item[method].get("parameters", []))
    return sorted((p["name"], p["in"], bool(p.get("required")), p.get("schema", {}).get("type"))
                  for p in found)


def body_model(op: dict) -> str | None:
    content = op.get("requestBody", {}).get("content", {})
    return ref_name(content.get("application/json", {}).get("schema"))


def success(op: dict) -> list[tuple]:
    out = []
    for code, response in op["responses"].items():
        if code.startswith("2"):
            schema = response.get("content", {}).get("application/json", {}).get("schema")
            # FastAPI documents a schema-less JSON body for a 204 route; there is no body.
            out.append((code, None if code == "204" else ref_name(schema)))
    return sorted(out)


def resolve(doc: dict, name: str) -> dict:
    schema = doc["components"]["schemas"][name]
    return schema


def main() -> int:
    ours = json.load(open(sys.argv[1], encoding="utf-8"))
    app = FastAPI()
    mount_coaching_routes(app, CoachingSessions(supported=False), None)
    theirs = app.openapi()
    problems = []
    for path, method in ROUTES:
        what = f"{method.upper()} {path}"
        if method not in theirs["paths"].get(path, {}):
            problems.append(f"{what}: not in FastAPI's document (the comparison is stale)")
            continue
        if method not in ours["paths"].get(path, {}):
            problems.append(f"{what}: missing from docs/openapi.json")
            continue
        a, b = ours["paths"][path][method], theirs["paths"][path][method]
        for aspect, mine, fastapi in [
            ("path parameters", params(ours, path, method), params(theirs, path, method)),
            ("request body", body_model(a), body_model(b)),
            ("success", success(a), success(b)),
        ]:
            if mine != fastapi:
                problems.append(f"{what}: {aspect} {mine} here, {fastapi} in FastAPI's")
        for code in b["responses"]:
            if code not in a["responses"] and "default" not in a["responses"]:
                problems.append(f"{what}: FastAPI documents {code}, docs/openapi.json does not")
        print(f"{what}: parameters, body and success status as FastAPI's")
    for name in MODELS:
        if name not in ours["components"]["schemas"]:
            problems.append(f"{name}: no schema in docs/openapi.json")
            continue
        mine, fastapi = resolve(ours, name), resolve(theirs, name)
        for key in ["properties", "required"]:
            x = sorted(mine.get(key, {})) if key == "properties" else sorted(mine.get(key, []))
            y = sorted(fastapi.get(key, {})) if key == "properties" else sorted(fastapi.get(key, []))
            if x != y:
                problems.append(f"{name}: {key} {x} here, {y} in FastAPI's")
        print(f"{name}: the same properties and required properties as FastAPI's")
    for p in problems:
        print("PROBLEM", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
