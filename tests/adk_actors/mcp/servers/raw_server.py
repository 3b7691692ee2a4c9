"""A hand-written stdio MCP "server" for the client's failure cases (no SDK).

``python raw_server.py PIDFILE hang``: writes its pid to PIDFILE, reads stdin and never
answers ``initialize``; it ignores stdin closing and SIGTERM too (only the process
group's SIGKILL stops it).
``python raw_server.py PIDFILE big SIZE``: answers ``initialize``, then answers
``tools/list`` with one line of SIZE bytes (written in 1 MiB pieces, so the server
never holds it whole).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

PIECE = 1 << 20


def answer(message_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    with open(sys.argv[1], "w") as pidfile:
        pidfile.write(str(os.getpid()))
    mode = sys.argv[2]
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for _ in sys.stdin:
            pass
        time.sleep(3600)
        return
    size = int(sys.argv[3])
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == "initialize":
            answer(
                message["id"],
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            )
        elif message.get("method") == "tools/list":
            head = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
            out = sys.stdout.buffer
            out.write(head[:-1].encode() + b', "pad": "')
            for _ in range(size // PIECE):
                out.write(b"a" * PIECE)
            out.write(b'"}\n')
            out.flush()


if __name__ == "__main__":
    main()
