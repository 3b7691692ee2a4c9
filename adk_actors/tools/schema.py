"""JSON Schema compilation that never fetches anything.

fastjsonschema resolves a ``$ref`` it cannot find in the schema by fetching its URI
(``urlopen``: http, https, file, ftp, ...) while it compiles, that is, when a tool is
defined or an agent spawned. Here a schema is checked first and compiled with
resolution handlers that refuse every scheme:

* a ``$ref`` that is not a local ``#...`` fragment (a URL, a file, a relative path) is
  refused, wherever it is in the schema;
* a local ``$ref`` that would still resolve remotely (under a remote ``$id``) is refused
  by the handlers, before any I/O;
* a schema that is not a mapping (or, for a contract, a boolean), nests more than
  `MAX_SCHEMA_DEPTH` deep, or does not compile, is refused too.

Every refusal is `InvalidSchema`; callers turn it into an `AdkError`: a remote
reference is ``("invalid_schema", "remote_ref", where)``, anything else the caller's
own reason (``("invalid_tool_schema", name)``, ``("invalid_input_schema",)``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import fastjsonschema

MAX_SCHEMA_DEPTH = 128
"""Objects and arrays nest at most this deep in a schema document."""

_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose values are data, not schemas: a ``$ref`` inside them is just a key."""


class InvalidSchema(Exception):
    """A schema refused before or while compiling; `why` is a short structural tag."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why

    def reason(self, otherwise: tuple[str, ...], where: str) -> tuple[str, ...]:
        """The `AdkError` reason: ``("invalid_schema", "remote_ref", where)`` for a
        reference that would be fetched, else the caller's own reason."""
        return ("invalid_schema", "remote_ref", where) if self.why == "remote_ref" else otherwise


def _refuse(uri: str) -> NoReturn:
    raise InvalidSchema("remote_ref")


class _NoRemote(dict[str, Callable[[str], Any]]):
    """fastjsonschema's resolution handlers for every URI scheme: each refuses."""

    def __contains__(self, scheme: object) -> bool:
        return True

    def __missing__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse


_NO_REMOTE = _NoRemote()


def compile_schema(schema: Any, *, allow_bool: bool = False) -> Callable[[Any], Any]:
    """The validator of `schema` (raises `fastjsonschema.JsonSchemaValueException` on
    invalid data), or `InvalidSchema`. Nothing is fetched, ever."""
    if isinstance(schema, bool):
        if not allow_bool:
            raise InvalidSchema("not_a_mapping")
    elif not isinstance(schema, Mapping):
        raise InvalidSchema("not_a_mapping")
    else:
        schema = dict(schema)
        _check_references(schema)
    try:
        return fastjsonschema.compile(schema, handlers=_NO_REMOTE)
    except InvalidSchema:
        raise
    except Exception as error:  # JsonSchemaDefinitionException, RecursionError, a typo
        raise _refusal_within(error) or InvalidSchema("does_not_compile") from None


def _refusal_within(error: BaseException) -> InvalidSchema | None:
    """A handler's refusal that fastjsonschema wrapped in its own exception."""
    seen: BaseException | None = error
    for _ in range(16):
        if seen is None or isinstance(seen, InvalidSchema):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _check_references(schema: Mapping[str, Any]) -> None:
    """Refuse a non-local ``$ref`` and nesting past `MAX_SCHEMA_DEPTH` (no recursion)."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise InvalidSchema("too_deep")
        if isinstance(node, Mapping):
            reference = node.get("$ref")
            if isinstance(reference, str) and not reference.startswith("#"):
                raise InvalidSchema("remote_ref")
            stack.extend(
                (value, depth + 1)
                for key, value in node.items()
                if key not in _DATA_KEYWORDS and isinstance(value, Mapping | list)
            )
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node if isinstance(value, Mapping | list))
