"""A logging reverse proxy between a MAGMA program (BENCH, GEN) and an agent, so that
`cargo xtask e2e` keeps the exact wire traffic for reading and for its checks.

Usage: wire_proxy.py LISTEN_PORT UPSTREAM_URL LOG_FILE

Every request is forwarded as it came (method, path, body, headers except Host and the
hop-by-hop ones) to UPSTREAM_URL; the answer is returned as it came. Each exchange is
appended to LOG_FILE as one JSON line:
  {"t", "method", "path", "status", "ms", "request": JSON or text, "response": JSON or text}
An upstream that cannot be reached gives 502 with {"detail": "wire_proxy: <why>"}, logged
the same way. Standard library only; one thread per connection; 127.0.0.1 only.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"host", "connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}


def decoded(body: bytes):
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")


def make_handler(upstream, log_path: str):
    lock = threading.Lock()

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            started = time.time()
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=900)
            try:
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                data, status = answer.read(), answer.status
                out_headers = [(k, v) for k, v in answer.getheaders()
                               if k.lower() not in HOP_BY_HOP | {"content-length"}]
            except OSError as e:
                status = 502
                data = json.dumps({"detail": f"wire_proxy: {e}"}).encode()
                out_headers = [("Content-Type", "application/json")]
            finally:
                conn.close()
            self.send_response(status)
            for k, v in out_headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if data:
                self.wfile.write(data)
            record = {"t": round(started, 3), "method": self.command, "path": self.path,
                      "status": status, "ms": round((time.time() - started) * 1000),
                      "request": decoded(body), "response": decoded(data)}
            with lock, open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

        do_GET = do_POST = do_PUT = do_DELETE = forward

        def log_message(self, *args):
            pass

    return Proxy


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit("usage: wire_proxy.py LISTEN_PORT UPSTREAM_URL LOG_FILE")
    port, upstream, log_path = int(sys.argv[1]), urlsplit(sys.argv[2]), sys.argv[3]
    print(f"wire_proxy: 127.0.0.1:{port} -> {sys.argv[2]}, log {log_path}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), make_handler(upstream, log_path)).serve_forever()


if __name__ == "__main__":
    main()
