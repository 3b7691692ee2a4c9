"""The /dev/v1 runs routes (see the daemon README)."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
