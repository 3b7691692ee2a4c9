"""Strict parsing of a runtime-policy config into immutable, normalized rules.

Every key is known or the config is refused (`invalid_runtime_policy`, naming the
keys at every level at once). The shape, types and bounds are msgspec constraints on
`PolicyOptions`, decoded strictly by `providers.errors.decode_options`; what a type
cannot say (UTF-8 byte lengths, no wildcards) is checked after. Selectors are the
string ``"all"`` or a list of exact names; an omitted ``allow`` selector allows
nothing, so a policy fails closed. Limits have finite defaults and a hard ceiling.
Errors name paths, never the offending values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NoReturn

import msgspec

from adk_actors.policy.measure import canonical_json
from providers.errors import AdkError, decode_options

ALL = "all"
DEFAULT_MAX_ARGUMENT_BYTES = 64 << 10
DEFAULT_MAX_CONTENT_BYTES = 1 << 20
MAX_BUDGET_BYTES = 64 << 20
MAX_POLICY_ID_BYTES = 128
MAX_NAME_BYTES = 256
MAX_SELECTOR_NAMES = 10_000
POLICY_SCHEMA_VERSION = 1

_MAX_KEYS_NAMED = 8

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME_BYTES)]
"""A subject name; its UTF-8 size is checked after decoding (`_bounded_name`)."""
NameList = Annotated[list[Name], msgspec.Meta(max_length=MAX_SELECTOR_NAMES)]
SelectorOption = Literal["all"] | NameList
Budget = Annotated[int, msgspec.Meta(ge=0, le=MAX_BUDGET_BYTES)]


class RulesOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``{"allow": ..., "deny": ...}`` section as written (both default to no names)."""

    allow: SelectorOption = msgspec.field(default_factory=list)
    deny: SelectorOption = msgspec.field(default_factory=list)


class PolicyOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A runtime-policy config as written; `parse` normalizes it into a `PolicyConfig`."""

    id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_POLICY_ID_BYTES)]
    agents: RulesOptions = RulesOptions()
    tools: RulesOptions = RulesOptions()
    max_argument_bytes: Budget = DEFAULT_MAX_ARGUMENT_BYTES
    max_content_bytes: Budget = DEFAULT_MAX_CONTENT_BYTES


_TOP_KEYS = frozenset(field.name for field in msgspec.structs.fields(PolicyOptions))
_RULE_KEYS = frozenset(field.name for field in msgspec.structs.fields(RulesOptions))


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
    options = decode_options(
        PolicyOptions, top, "invalid_runtime_policy", keyed=False, what="runtime policy"
    )
    policy_id = _bounded_name(options.id, MAX_POLICY_ID_BYTES)
    if policy_id is None:
        _fail(f"'id' must be a non-empty string of at most {MAX_POLICY_ID_BYTES} UTF-8 bytes")
    agents = _rules(options.agents, "agents")
    tools = _rules(options.tools, "tools")
    behaviour = {
        "schema_version": POLICY_SCHEMA_VERSION,
        "agents": agents.to_config(),
        "tools": tools.to_config(),
        "max_argument_bytes": options.max_argument_bytes,
        "max_content_bytes": options.max_content_bytes,
    }
    fingerprint = hashlib.sha256(canonical_json(behaviour)).hexdigest()
    return PolicyConfig(
        policy_id,
        agents,
        tools,
        options.max_argument_bytes,
        options.max_content_bytes,
        fingerprint,
    )


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


def _rules(section: RulesOptions, kind: str) -> Rules:
    """Normalize one decoded ``{"allow": ..., "deny": ...}`` section."""
    return Rules(
        allow=_selector(section.allow, f"{kind}.allow"),
        deny=_selector(section.deny, f"{kind}.deny"),
    )


def _selector(value: str | list[str], path: str) -> Selector:
    """``"all"``, or exact names checked for size; wildcards are refused, not guessed at."""
    if isinstance(value, str):
        return Selector(everything=True)  # the decoder admits only "all"
    names: set[str] = set()
    for index, item in enumerate(value):
        name = _bounded_name(item, MAX_NAME_BYTES)
        if name is None:
            _fail(f"'{path}[{index}]' must be a name of 1 to {MAX_NAME_BYTES} UTF-8 bytes")
        if "*" in name:
            _fail(f"'{path}[{index}]': wildcards are not supported; use {ALL!r} for every name")
        names.add(name)
    return Selector(names=frozenset(names))


def _bounded_name(value: object, max_bytes: int) -> str | None:
    """`value` if it is a non-empty, valid UTF-8 string of at most `max_bytes` bytes."""
    if not isinstance(value, str) or not value:
        return None
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return None
    return value if size <= max_bytes else None
