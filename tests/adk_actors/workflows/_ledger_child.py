"""A separate OS process for the ledger tests: it opens an `LmdbLedger` and claims.

    python _ledger_child.py claim PATH IID NOW LEASE [--hold]

Prints one JSON line: ``{"ok": true, "revision": n, "lease_until": t}`` or
``{"ok": false, "reason": "..."}``. Before claiming it prints ``{"ready": true}`` and
waits for one line on stdin (the go signal), so that several children can contend from
the same moment. With ``--hold`` it then waits for stdin to close before exiting (a
live owner in another process); the parent may kill it instead (a dead one).
"""

from __future__ import annotations

import json
import secrets
import sys


def _say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    from adk_actors.workflows.ledger_lmdb import LmdbLedger
    from providers.errors import AdkError
    from supervision import self_pid

    _, path, iid, now, lease, *flags = argv
    ledger = LmdbLedger(path)
    _say({"ready": True})
    sys.stdin.readline()
    try:
        record = ledger.claim(iid, self_pid(), secrets.token_hex(32), float(now), float(lease))
    except AdkError as error:
        _say({"ok": False, "reason": str(error.reason)})
    else:
        result = {"ok": True, "revision": record.revision, "lease_until": record.lease_until}
        _say(result)
    if "--hold" in flags:
        sys.stdin.read()
    ledger.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
