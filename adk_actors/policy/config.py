"""Strict parsing of a runtime-policy config into immutable, normalized rules.

Every key is known or the config is refused (`invalid_runtime_policy`, naming the
keys). Selectors are the string ``"all"`` or a list of exact names; an omitted
``allow`` selector allows nothing, so a policy fails closed. Limits have finite
defaults and a hard ceiling. Errors name paths, never the offending values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from adk_actors.policy.measure import canonical_json
from providers.errors import AdkError

ALL = "all"
DEFAULT_MAX_ARGUMENT_BYTES = 64 << 10
DEFAULT_MAX_CONTENT_BYTES = 1 << 20
MAX_BUDGET_BYTES = 64 << 20
MAX_POLICY_ID_BYTES = 128
MAX_NAME_BYTES = 256
MAX_SELECTOR_NAMES = 10_000
POLICY_SCHEMA_VERSION = 1

_TOP_KEYS = frozenset({"id", "agents", "tools", "max_argument_bytes", "max_content_bytes"})
_RULE_KEYS = frozenset({"allow", "deny"})
_MAX_KEYS_NAMED = 8


@dataclass(frozen=True, slots=True)
class Selector:
    """One allow or deny selector: every name (``"all"``) or an exact set of names."""

    everything: bool = False
    names: frozenset[str] = frozenset()

    def matches(self, name: str) -> bool:
        """Whether `name` is selected (exact, case-sensitive match)."""
        return self.everything or name in self.names

    def to_config(self) -> str | list[str]:
        """The normalized config form: ``"all"`` or the sorted names."""
        return ALL if self.everything else sorted(self.names)


@dataclass(frozen=True, slots=True)
class Rules:
    """The allow and deny selectors for one kind of subject (agents or tools)."""

    allow: Selector = Selector()
    deny: Selector = Selector()

    def refusal(self, name: str) -> str | None:
        """Why `name` is denied (``explicitly_denied`` beats ``not_allowed``), or None."""
        if self.deny.matches(name):
            return "explicitly_denied"
        if not self.allow.matches(name):
            return "not_allowed"
        return None

    def to_config(self) -> dict[str, Any]:
        """The normalized config form of both selectors."""
        return {"allow": self.allow.to_config(), "deny": self.deny.to_config()}


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """A validated, normalized runtime-policy config and its behaviour fingerprint."""

    id: str
    agents: Rules
    tools: Rules
    max_argument_bytes: int
    max_content_bytes: int
    fingerprint: str


def parse(config: object) -> PolicyConfig:
    """Validate `config` strictly and normalize it; `invalid_runtime_policy` on any fault."""
    top = _mapping(config, "the runtime policy")
    _refuse_unknown_keys(top)
    if "id" not in top:
        _fail("'id' is required")
    policy_id = _bounded_name(top["id"], MAX_POLICY_ID_BYTES)
    if policy_id is None:
        _fail(f"'id' must be a non-empty string of at most {MAX_POLICY_ID_BYTES} UTF-8 bytes")
    agents = _rules(top.get("agents", {}), "agents")
    tools = _rules(top.get("tools", {}), "tools")
    max_argument = _limit(top, "max_argument_bytes", DEFAULT_MAX_ARGUMENT_BYTES)
    max_content = _limit(top, "max_content_bytes", DEFAULT_MAX_CONTENT_BYTES)
    behaviour = {
        "schema_version": POLICY_SCHEMA_VERSION,
        "agents": agents.to_config(),
        "tools": tools.to_config(),
        "max_argument_bytes": max_argument,
        "max_content_bytes": max_content,
    }
    fingerprint = hashlib.sha256(canonical_json(behaviour)).hexdigest()
    return PolicyConfig(policy_id, agents, tools, max_argument, max_content, fingerprint)


def normalize_subject(value: object) -> str | None:
    """`value` if it is a usable subject name (1..256 UTF-8 bytes), else None."""
    return _bounded_name(value, MAX_NAME_BYTES)


def _fail(detail: str) -> NoReturn:
    """Refuse the config; the detail names paths, never values."""
    raise AdkError("invalid_runtime_policy", detail)


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    """`value` as a mapping with string keys, or refuse."""
    if not isinstance(value, Mapping):
        _fail(f"{what} must be a mapping")
    if not all(isinstance(key, str) for key in value):
        _fail(f"{what} must have string keys")
    return value


def _refuse_unknown_keys(top: Mapping[str, Any]) -> None:
    """Refuse unknown keys at every level at once, naming (a bounded number of) their paths."""
    unknown = [key for key in top if key not in _TOP_KEYS]
    for kind in ("agents", "tools"):
        section = top.get(kind)
        if isinstance(section, Mapping):
            unknown += [f"{kind}.{key}" for key in section if key not in _RULE_KEYS]
    if unknown:
        paths = sorted(str(path)[:80] for path in unknown)
        shown = ", ".join(repr(path) for path in paths[:_MAX_KEYS_NAMED])
        more = f" (+{len(paths) - _MAX_KEYS_NAMED} more)" if len(paths) > _MAX_KEYS_NAMED else ""
        _fail(f"unknown keys: {shown}{more}; known: {', '.join(sorted(_TOP_KEYS))}, allow, deny")


def _rules(value: object, kind: str) -> Rules:
    """Parse one ``{"allow": ..., "deny": ...}`` section (both optional, default empty)."""
    section = _mapping(value, f"'{kind}'")
    return Rules(
        allow=_selector(section.get("allow", ()), f"{kind}.allow"),
        deny=_selector(section.get("deny", ()), f"{kind}.deny"),
    )


def _selector(value: object, path: str) -> Selector:
    """Parse ``"all"`` or a list of exact names; wildcards are refused, not guessed at."""
    if isinstance(value, str) and value == ALL:
        return Selector(everything=True)
    if not isinstance(value, list | tuple | set | frozenset):
        _fail(f"'{path}' must be {ALL!r} or a list of names")
    if len(value) > MAX_SELECTOR_NAMES:
        _fail(f"'{path}' has more than {MAX_SELECTOR_NAMES} names")
    names: set[str] = set()
    for index, item in enumerate(value):
        name = _bounded_name(item, MAX_NAME_BYTES)
        if name is None:
            _fail(f"'{path}[{index}]' must be a name of 1 to {MAX_NAME_BYTES} UTF-8 bytes")
        if "*" in name:
            _fail(f"'{path}[{index}]': wildcards are not supported; use {ALL!r} for every name")
        names.add(name)
    return Selector(names=frozenset(names))


def _limit(top: Mapping[str, Any], key: str, default: int) -> int:
    """A byte limit: an integer from 0 to `MAX_BUDGET_BYTES` (the default if omitted)."""
    value = top.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_BUDGET_BYTES:
        _fail(f"'{key}' must be an integer from 0 to {MAX_BUDGET_BYTES}")
    return value


def _bounded_name(value: object, max_bytes: int) -> str | None:
    """`value` if it is a non-empty, valid UTF-8 string of at most `max_bytes` bytes."""
    if not isinstance(value, str) or not value:
        return None
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return None
    return value if size <= max_bytes else None
