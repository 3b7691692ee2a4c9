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

Compiled validators are shared: a schema that is JSON as it stands (exactly dicts with
string keys, lists, strings, ints, finite floats, booleans and None) is keyed by its
JSON text, in its own key order (the order fastjsonschema checks properties in), and
compiles once while any agent holds its validator (and for the `RECENT_VALIDATORS` last
used ones). Spawning 50,000 agents with one tool compiles one validator, not 50,000
(about 0.5 ms and 4 KB each). A validator is a pure function, safe to share across
threads. A refusal is never cached; anything else (a tuple, a custom mapping) compiles
afresh, as before.
"""

from __future__ import annotations

import copy
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import fastjsonschema
import msgspec

MAX_SCHEMA_DEPTH = 128
"""Objects and arrays nest at most this deep in a schema document."""

RECENT_VALIDATORS = 256
"""Validators kept compiled after the last agent holding them is gone (most recent)."""

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
    invalid data), or `InvalidSchema`. Nothing is fetched, ever. Equal JSON schemas
    share one validator (see the module docstring)."""
    if type(schema) is dict:
        pass  # read as it is here; compiled from a private copy (see `_compile` below)
    elif isinstance(schema, bool):
        if not allow_bool:
            raise InvalidSchema("not_a_mapping")
    elif not isinstance(schema, Mapping):
        raise InvalidSchema("not_a_mapping")
    else:
        schema = dict(schema)
    key = _cache_key(schema)
    if key is None:  # not plain JSON: a deep copy, fastjsonschema rewrites nested `$ref`s
        return _compile(copy.deepcopy(schema))
    with _lock:
        validator = _recent.get(key)  # held strongly there: the same as in `_shared`
        if validator is not None:
            _recent.move_to_end(key)
            return validator
        validator = _shared.get(key)
        if validator is not None:
            _remember(key, validator)
            return validator
    # Compiled from a copy decoded from the key, outside the lock (a race compiles twice,
    # keeps one): fastjsonschema rewrites `$ref`s under a `$id` in the dict it compiles,
    # and the caller's schema must stay as it was (it may be compiled again, or shown
    # to the model); the copy is also exactly what the key says, whatever the caller
    # changes meanwhile.
    validator = _compile(msgspec.json.decode(key))
    with _lock:
        validator = _shared.setdefault(key, validator)
        _remember(key, validator)
    return validator


def _remember(key: bytes, validator: Callable[[Any], Any]) -> None:
    """Hold `validator` among the `RECENT_VALIDATORS` last used (under `_lock`)."""
    _recent[key] = validator
    _recent.move_to_end(key)
    while len(_recent) > RECENT_VALIDATORS:
        _recent.popitem(last=False)


_lock = threading.Lock()
_shared: weakref.WeakValueDictionary[bytes, Callable[[Any], Any]] = weakref.WeakValueDictionary()
"""JSON text of a schema -> its validator, while anything holds the validator."""
_recent: OrderedDict[bytes, Callable[[Any], Any]] = OrderedDict()
"""The `RECENT_VALIDATORS` last used, held strongly (least recent first)."""
_encoder = msgspec.json.Encoder()


def _cache_key(schema: Any) -> bytes | None:
    """The JSON text of `schema` if it is JSON as it stands (`_plain`), else None:
    compiled afresh, never shared."""
    if not _plain(schema):
        return None
    try:
        return _encoder.encode(schema)
    except Exception:  # a lone surrogate, an int past 64 bits
        return None


_PLAIN_SCALARS = (str, int, bool, type(None))
_MAX_PLAIN_NODES = 100_000


def _plain(schema: Any) -> bool:
    """Only dicts with string keys, lists, strings, ints, finite floats, booleans and
    None, exactly (no subclass: an `IntEnum` equals its int, but fastjsonschema writes
    it differently), at most `MAX_SCHEMA_DEPTH` deep: what the JSON text says is all of
    it. Walked level by level; nothing is decoded."""
    level = [schema]
    budget = _MAX_PLAIN_NODES
    for _ in range(MAX_SCHEMA_DEPTH):
        below: list[Any] = []
        for node in level:
            kind = type(node)
            if kind is dict:
                for key in node:
                    if type(key) is not str:
                        return False
                below.extend(node.values())
            elif kind is list:
                below.extend(node)
            elif kind is float:
                if not math.isfinite(node):
                    return False
            elif kind not in _PLAIN_SCALARS:
                return False
        if not below:
            return True
        budget -= len(below)
        if budget < 0:
            return False
        level = below
    return False


def _compile(schema: Any) -> Callable[[Any], Any]:
    if not isinstance(schema, bool):
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
