"""The browser console: ``GET /dev`` serves the page, ``/dev/static/{name}`` its assets.

The page and its assets (a stylesheet and plain ES modules, no build step) ship in
the package (``adk_actors/daemon/static``) and are read through `importlib.resources`,
once. They need no token: the page holds the token the operator types in its memory
and sends it only in the ``Authorization`` header of its ``/dev/v1`` calls. Every answer carries a strict
Content-Security-Policy (scripts and styles from this origin only, no inline code,
no framing, Trusted Types so that no script can assign HTML), ``nosniff`` and
``no-referrer``. Only the whitelisted names below are ever served.
"""

from __future__ import annotations

import functools
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from adk_actors.daemon.errors import ApiError

PAGE = "index.html"

_JAVASCRIPT = "text/javascript; charset=utf-8"

ASSETS: dict[str, str] = {
    "console.css": "text/css; charset=utf-8",
    "console.js": _JAVASCRIPT,  # the entry point; it imports the modules below
    "api.js": _JAVASCRIPT,
    "browse.js": _JAVASCRIPT,
    "render.js": _JAVASCRIPT,
    "run.js": _JAVASCRIPT,
    "sse.js": _JAVASCRIPT,
    "view.js": _JAVASCRIPT,
}
"""The files ``/dev/static/`` serves, with their content types; nothing else."""

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'none'",
        "object-src 'none'",
        "media-src 'none'",
        "worker-src 'none'",
        "manifest-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    )
)

SECURITY_HEADERS: dict[str, str] = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
    "cache-control": "no-store",
}
"""Headers on every console answer (the page and its assets)."""


@functools.cache
def _static_bytes(name: str) -> bytes:
    """The packaged file `name` (a whitelisted name: never a path from a request)."""
    return resources.files("adk_actors.daemon").joinpath("static", name).read_bytes()


def _file_response(name: str, media_type: str) -> Response:
    return Response(_static_bytes(name), 200, headers=SECURITY_HEADERS, media_type=media_type)


async def console_page(request: Request) -> Response:
    """``GET /dev``: the console's single page."""
    return _file_response(PAGE, "text/html; charset=utf-8")


async def console_asset(request: Request) -> Response:
    """``GET /dev/static/{name}``: one whitelisted asset, 404 ``not_found`` otherwise."""
    name = request.path_params["name"]
    media_type = ASSETS.get(name)
    if media_type is None:
        raise ApiError(404, "not_found", "Resource not found", headers=SECURITY_HEADERS)
    return _file_response(name, media_type)


ROUTES: list[BaseRoute] = [
    Route("/dev", console_page, name="console_page"),
    Route("/dev/", console_page, name="console_page_slash"),
    Route("/dev/static/{name}", console_asset, name="console_asset"),
]
