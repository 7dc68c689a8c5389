"""Run a harness client with every HTTP answer it receives written down.

Usage: dump_answers.py DUMP_FILE SCRIPT [ARGS...]

Runs SCRIPT (bench_client.py, gen_coaching.py) unchanged with ARGS, after
two patches made before it starts:
  * every answer that `requests` hands to the client is appended to
    DUMP_FILE as one JSON line {"method", "path", "status", "body"} (the
    path without the base URL's scheme and host, the body as latin-1 text,
    so that every byte is kept);
  * `uuid.uuid4` draws from a generator seeded with 36, so two runs send the
    same request ids and run ids, and their answers can be compared byte
    for byte (`cargo xtask interop`, the proxy's part).
The exit status is SCRIPT's.
"""

from __future__ import annotations

import json
import random
import runpy
import sys
import uuid
from urllib.parse import urlsplit

import requests.sessions


def main() -> None:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    dump_path, script = sys.argv[1], sys.argv[2]
    rng = random.Random(36)
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)
    dump = open(dump_path, "w", encoding="utf-8")
    send = requests.sessions.Session.send

    def recording_send(self, request, **kwargs):
        response = send(self, request, **kwargs)
        url = urlsplit(request.url)
        path = url.path + (f"?{url.query}" if url.query else "")
        line = {
            "method": request.method,
            "path": path,
            "status": response.status_code,
            "body": response.content.decode("latin-1"),
        }
        dump.write(json.dumps(line) + "\n")
        dump.flush()
        return response

    requests.sessions.Session.send = recording_send
    sys.argv = [script, *sys.argv[3:]]
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        dump.close()


if __name__ == "__main__":
    main()
