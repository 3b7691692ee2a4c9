"""Tools named by import path: ``"package.module:attribute"``.

The attribute must be an `adk.Tool` instance (an ``@adk.tool`` function is one) or an
`adk.Toolset`. Modules are imported from ``sys.path`` plus the current directory (as
uvicorn finds an app), so ``"examples.agent_tools:publish_release"`` works from the
repository root. Importing a module runs its top-level code. A module that fails to
import is reported by its path and the exception's class only, never its message (it
may quote anything).

Inside ``with without_tool_imports():`` a path's syntax is checked and nothing is
imported: it resolves to an `UnimportedTool` (``adk config validate
--no-import-tools``, for a file whose modules should not run).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import msgspec

from adk_actors.tools import Tool, Toolset
from providers.errors import AdkError

MAX_PATH_CHARS = 256
_IMPORT_PATH = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*"
    r"(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
)
_IMPORT_TOOLS: ContextVar[bool] = ContextVar("adk_config_import_tools", default=True)


class UnimportedTool(msgspec.Struct, frozen=True):
    """A tool path whose syntax was checked but whose module was not imported
    (`without_tool_imports`); it cannot be spawned."""

    path: str


@contextmanager
def without_tool_imports() -> Iterator[None]:
    """While the block runs (in this thread or task), tool paths are checked for their
    syntax only: no module is imported, so none of their code runs."""
    token = _IMPORT_TOOLS.set(False)
    try:
        yield
    finally:
        _IMPORT_TOOLS.reset(token)


def resolve_tools(paths: Iterable[Any]) -> list[Any]:
    """The tool each import path names, in order; `AdkError` naming the first bad one."""
    return [resolve_tool(path) for path in paths]


def resolve_tool(path: Any) -> Any:
    """The `Tool` or `Toolset` at ``"module:attribute"`` (an `UnimportedTool` inside
    `without_tool_imports`)."""
    if not isinstance(path, str) or len(path) > MAX_PATH_CHARS or not _IMPORT_PATH.fullmatch(path):
        shown = path[:64] if isinstance(path, str) else type(path).__name__
        raise AdkError(
            ("invalid_tool_path", shown),
            'a tool is named "package.module:attribute", e.g. "examples.agent_tools:get_weather"',
        )
    if not _IMPORT_TOOLS.get():
        return UnimportedTool(path)
    module_name, attribute = path.split(":", 1)
    module = _import(module_name, path)
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise AdkError(("unknown_tool", path), f"{module_name} has no attribute {attribute}")
        found = getattr(found, part)
    if isinstance(found, Tool | Toolset):
        return found
    if isinstance(found, type) and issubclass(found, Tool | Toolset):
        raise AdkError(
            ("invalid_tool", path),
            f"{path} is a class; name an instance of it (e.g. publish = {found.__name__}())",
        )
    raise AdkError(
        ("invalid_tool", path),
        f"{path} is a {type(found).__name__}, not an @adk.tool function or adk.Tool instance",
    )


def _import(module_name: str, path: str) -> Any:
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (
            module_name == error.name or module_name.startswith(error.name + ".")
        ):
            raise AdkError(
                ("unknown_tool_module", path), f"no module named {module_name}"
            ) from None
        raise AdkError(
            ("tool_module_import_failed", path), "the module failed to import (ModuleNotFoundError)"
        ) from None
    except (Exception, SystemExit) as error:
        raise AdkError(
            ("tool_module_import_failed", path),
            f"the module failed to import ({type(error).__name__})",
        ) from None
