"""A scripted OpenAI-compatible chat completions server, standing in for a language model:
for llm-agent (its decisions, and its coach's corrected decisions) and for GEN's own LLM
backend (judge, user simulation), which GEN also hands to the agent's coaching session.

Usage: scripted_provider.py PORT LOG_FILE [--model NAME] [--first-wrong BUTTON]

  GET  /v1/models            {"object": "list", "data": [{"id": NAME}]}
  POST /v1/chat/completions  one scripted answer:
    * with `tools`: the buttons to press are the names like sw1, btn_2, b3 in the latest
      user instruction (a user message that is not environment feedback), in order; every
      "succeed" in the feedback after it counts one press done. While some are left, the
      answer is ONE call of the first tool that is not cancel_current_action, its first
      argument other than target_robot being the next button and target_robot the first
      robot of the enum; once all are pressed, the text "Done: <buttons> pressed.".
      With --first-wrong BUTTON, the very first such request of an agent's turn (not of a
      coach: a coach's system message says "was rejected") presses BUTTON instead, once;
    * without tools: the text "OK.".
Every exchange is appended to LOG_FILE as one JSON line {"t", "role", "request", "response"},
role being "agent", "coach" or "program". 127.0.0.1 only; standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FEEDBACK = "Environment feedback:"
COACH_MARK = "was rejected"
BUTTON = re.compile(r"\b((?:sw|btn_?|button_|b)\d+)\b")


def text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


class Script:
    def __init__(self, first_wrong: str | None):
        self.first_wrong = first_wrong
        self.calls = 0
        self.lock = threading.Lock()

    def role(self, req: dict) -> str:
        if not req.get("tools"):
            return "program"
        system = " ".join(text_of(m) for m in req.get("messages", []) if m.get("role") == "system")
        return "coach" if COACH_MARK in system else "agent"

    def answer(self, req: dict, role: str) -> dict:
        if role == "program":
            return {"role": "assistant", "content": "OK."}
        messages = req.get("messages", [])
        users = [i for i, m in enumerate(messages)
                 if m.get("role") == "user" and not text_of(m).startswith(FEEDBACK)]
        start = users[-1] if users else 0
        instruction = text_of(messages[start]) if users else ""
        done = sum(text_of(m).count("succeed") for m in messages[start + 1:] if m.get("role") == "user")
        wanted = BUTTON.findall(instruction)
        tool = next((t["function"] for t in req["tools"]
                     if t.get("function", {}).get("name") != "cancel_current_action"), None)
        if tool is None:
            return {"role": "assistant", "content": "I have no tool to press a button with."}
        if wanted and done >= len(wanted):
            return {"role": "assistant", "content": "Done: " + ", ".join(wanted) + " pressed."}
        props = tool.get("parameters", {}).get("properties", {})
        robots = props.get("target_robot", {}).get("enum") or ["panda"]
        argument = next((k for k in props if k != "target_robot"), None)
        button = wanted[done] if wanted else "sw1"
        with self.lock:
            if role == "agent" and self.first_wrong:
                button, self.first_wrong = self.first_wrong, None
            self.calls += 1
            call_id = f"call_{self.calls}"
        arguments = {"target_robot": robots[0]}
        if argument:
            arguments[argument] = button
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": tool["name"], "arguments": json.dumps(arguments)}}]}


def make_handler(script: Script, model: str, log_path: str):
    log_lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def send_json(self, code: int, obj) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/").endswith("/models"):
                return self.send_json(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                return self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            try:
                req = json.loads(body or b"{}")
            except ValueError as e:
                return self.send_json(400, {"error": {"message": f"body is not JSON: {e}"}})
            role = script.role(req)
            message = script.answer(req, role)
            resp = {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
                    "model": req.get("model", model),
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
            with log_lock, open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"t": round(time.time(), 3), "role": role, "request": req, "response": resp}) + "\n")
            self.send_json(200, resp)

        def log_message(self, *args):
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("log")
    parser.add_argument("--model", default="scripted-press-button")
    parser.add_argument("--first-wrong", metavar="BUTTON")
    args = parser.parse_args()
    print(f"scripted_provider: 127.0.0.1:{args.port}, model {args.model}", flush=True)
    handler = make_handler(Script(args.first_wrong), args.model, args.log)
    ThreadingHTTPServer(("127.0.0.1", args.port), handler).serve_forever()


if __name__ == "__main__":
    main()
