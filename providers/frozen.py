"""Deeply immutable JSON values and msgspec structs: what a store may share safely.

A frozen msgspec struct (an `Event`, a `Content`) still holds mutable dicts and lists
(function arguments, state deltas), so an object handed to two callers could be
changed by one under the other. `freeze` returns the same value with every dict and
list replaced by a read-only subclass (`FrozenDict`, `FrozenList`): equal to the
original, encoded the same by msgspec and json, but any in-place change raises
``TypeError``. A copy (`copy.copy`, `copy.deepcopy`, pickle) is a plain, mutable
dict or list, and each empty one inside a payload is its own object, so a deep copy
or pickle of stored history gives every empty container its own plain one (review of
4173fce, finding 1: one shared empty object became one plain list in every copy). One
exception: an empty dict or list held directly by a struct field whose struct omits
defaults and whose default is a new empty dict or list (``default_factory``; a call
without arguments) stays as it is, since msgspec leaves out such a default only when
it is an exact empty dict or list, and a frozen one would change the encoding.

A struct type may register a shared form (`register_shared_form`): what `freeze`
makes of it, e.g. ``adk_actors.events.EventActions`` becomes a twin whose empty deltas
are the one read-only `EMPTY_DICT` and whose defaults are that object (msgspec omits a
field holding its very default object), so an event without changes holds nothing
plain and a store hands it out as it is. `EMPTY_DICT` / `EMPTY_LIST` are for such
shared forms only: as an ordinary struct default, a deep copy of many instances would
turn them into one plain container. A store that shares a value keeps it with `share`
(the frozen value and where plain empty fields are left, usually nowhere) and hands
each reader `reader_copy`: the value itself, or the same shared parts with fresh empty
dicts and lists of its own, so no reader sees another's edit of one and none reaches
the stored copy (`canonical` checks that they are still empty before it trusts its
answer). Session stores hand out frozen events, so they can keep one decoded copy per
event, and `providers.content.canonical` can remember its answer for a frozen content.

The read-only guard stops accidental edits, not deliberate ones: ``FrozenDict.__init__``
and the unbound base methods (``dict.__setitem__(d, ...)``, ``list.append(l, ...)``)
still change a frozen value, and `canonical` trusts a frozen content not to be changed
so (review of fb2eacc, finding 5: a deliberate bypass, accepted). Such a bypass of
`EMPTY_DICT` or `EMPTY_LIST` would reach every stored event that shares it, so `share`
checks that both are still empty and raises `SharedEmptyChanged` otherwise (review of
4173fce, finding 5).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NoReturn, TypeAlias

import msgspec


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"a stored {type(self).__mro__[1].__name__} is read-only: copy it first")


class FrozenDict(dict[Any, Any]):
    """A dict that refuses every in-place change (made by `freeze`, deep)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """A list that refuses every in-place change (made by `freeze`, deep)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None), bytes})
_SHARED_AS_IS = frozenset({*_SCALAR_TYPES, FrozenDict, FrozenList})
"""Types `freeze` returns unchanged (nothing in them can change)."""

EMPTY_DICT: Any = FrozenDict()
"""The shared read-only empty dict: a registered shared form's default for the empty
fields every reader shares (`register_shared_form`; never made by `freeze` itself)."""
EMPTY_LIST: Any = FrozenList()
"""The shared read-only empty list (as `EMPTY_DICT`)."""


class SharedEmptyChanged(RuntimeError):
    """`EMPTY_DICT` or `EMPTY_LIST` is no longer empty: something bypassed the read-only
    guard (``dict.update(EMPTY_DICT, ...)``) and every value sharing it now carries the
    change, so nothing more is stored until the process is fixed."""


_shared_forms: dict[type, Callable[[Any], Any]] = {}
"""`register_shared_form`'s table: struct type -> its shared form (of a frozen value)."""


def check_shared_empties() -> None:
    """Raise `SharedEmptyChanged` unless `EMPTY_DICT` and `EMPTY_LIST` are still empty:
    `share` and a shared form call it before they hand either out (review of 4173fce,
    finding 5: a bypass on one would reach every stored value sharing it)."""
    if EMPTY_DICT or EMPTY_LIST:
        raise SharedEmptyChanged(
            f"providers.frozen.EMPTY_DICT / EMPTY_LIST were changed in place "
            f"({len(EMPTY_DICT)} keys / {len(EMPTY_LIST)} items) through a bypass of the "
            f"read-only guard: every stored value sharing them now carries the change"
        )


def register_shared_form(kind: type, form: Callable[[Any], Any]) -> None:
    """Make `freeze` return ``form(frozen)`` for a value of exactly type `kind`, after
    freezing its fields: a form that swaps its empty fields for `EMPTY_DICT` /
    `EMPTY_LIST` (under defaults that are those objects) leaves nothing a reader could
    edit, so `share` needs no per-read copy for it. The form must encode as the value."""
    _shared_forms[kind] = form


def freeze(value: Any) -> Any:
    """`value` with every dict and list inside it (through dicts, lists, tuples and
    msgspec structs) read-only; `value` itself when nothing in it was mutable.

    `_frozen_with_plan` (what `share` runs) applies these rules again in its own walk
    (one walk instead of two, issue 20 section 4): a change here must be made there
    too; tests/providers/test_s28_frozen_differential.py compares the two on generated
    values (review of 7f05ca6, finding L1)."""
    kind = type(value)
    if kind in _SHARED_AS_IS:
        return value
    if kind is dict:  # an empty one too gets its own object (deep copies: finding 1)
        if _SHARED_AS_IS.issuperset(map(type, value.values())):  # one C-level pass
            return FrozenDict(value)  # keys are kept as they are, as below
        return FrozenDict({key: freeze(item) for key, item in value.items()})
    if kind is list:
        if _SHARED_AS_IS.issuperset(map(type, value)):  # as above
            return FrozenList(value)
        return FrozenList([freeze(item) for item in value])
    if kind is tuple:
        return _freeze_tuple(value, kind)
    fields = _struct_fields(kind)
    if fields is not None:
        changes = None
        values = _astuple(value)
        if not _SHARED_AS_IS.issuperset(map(type, values)):  # one C-level pass: else none
            for (field, keep_plain), old in zip(fields, values, strict=True):
                kind = type(old)
                if kind in _SHARED_AS_IS:
                    continue
                if keep_plain and not old and (kind is dict or kind is list):
                    continue  # msgspec omits only an exact empty default: keep encodings
                new = freeze(old)
                if new is not old:
                    if changes is None:
                        changes = {}
                    changes[field] = new
        if changes is not None:
            value = msgspec.structs.replace(value, **changes)
        form = _shared_forms.get(type(value))
        return value if form is None else form(value)
    if isinstance(value, dict):
        return FrozenDict({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return FrozenList([freeze(item) for item in value])
    if isinstance(value, tuple):
        return _freeze_tuple(value, kind)
    return value


def _freeze_tuple(value: tuple[Any, ...], kind: type) -> Any:
    items = tuple(freeze(item) for item in value)
    changed = any(new is not old for new, old in zip(items, value, strict=True))
    return (kind(*items) if hasattr(value, "_fields") else items) if changed else value


_astuple = msgspec.structs.astuple  # a struct's field values in one call

_FIELD_CACHE_SIZE = 1024
_fields_of: dict[type, tuple[tuple[str, bool], ...] | None] = {}
"""`_struct_fields`' answers by type (emptied when it reaches `_FIELD_CACHE_SIZE`)."""
_UNKNOWN: Any = object()


def _struct_fields(kind: type) -> tuple[tuple[str, bool], ...] | None:
    """A msgspec struct type's fields, each with whether an empty dict or list in it
    must stay plain (its struct omits defaults and its default is a new empty dict or
    list); None for any other type. Remembered per type (`freeze` runs per event)."""
    found = _fields_of.get(kind, _UNKNOWN)
    if found is _UNKNOWN:
        if len(_fields_of) >= _FIELD_CACHE_SIZE:
            _fields_of.clear()
        found = _fields_of[kind] = _fields_plan(kind)
    return found  # type: ignore[no-any-return]


def _fields_plan(kind: type) -> tuple[tuple[str, bool], ...] | None:
    """`_struct_fields` worked out (msgspec's own tables: no annotation is evaluated)."""
    if not issubclass(kind, msgspec.Struct):
        return None
    names: tuple[str, ...] = kind.__struct_fields__
    defaults: tuple[Any, ...] = kind.__struct_defaults__  # those of the last fields
    if not kind.__struct_config__.omit_defaults:
        return tuple((name, False) for name in names)
    padded = (None,) * (len(names) - len(defaults)) + defaults
    return tuple(
        (name, getattr(default, "factory", None) in (dict, list) and _is_factory(default))
        for name, default in zip(names, padded, strict=True)
    )


def _is_factory(default: Any) -> bool:
    """A msgspec ``default_factory`` (also what ``= []`` or ``= {}`` becomes)."""
    return type(default).__name__ == "Factory" and type(default).__module__.startswith("msgspec")


Plan: TypeAlias = tuple[Any, ...]
"""Where a frozen value holds plain empty dicts and lists (`empty_fields`): (field
name or sequence index, ``dict``/``list``, a struct type whose every field has its
default (a new one is made), or the nested plan) pairs; for a dict,
``(_IN_DICT, ((key, plan), ...))``."""
_IN_DICT = "dict entries"
"""The first item of a dict's plan (a struct's or a sequence's plan starts with a pair)."""
Refill: TypeAlias = Callable[[Any], Any]
"""A value (of one `Plan`) -> a copy with new empty dicts and lists where they were."""


def share(value: Any) -> tuple[Any, Refill | None]:
    """`value` frozen, with empty fields of its own (none of the caller's object is
    kept), and how to give a reader its own (None: it has none): what a store keeps
    of a value every reader gets through `reader_copy`. One walk of `value` does both
    (`freeze`, then `empty_fields` of its result, would walk it twice)."""
    check_shared_empties()
    frozen, plan = _frozen_with_plan(value)
    if plan is None:
        return frozen, None
    refill = _refiller(plan)
    return refill(frozen), refill


def _frozen_with_plan(value: Any) -> tuple[Any, Plan | None]:
    """``(freeze(value), empty_fields(freeze(value)))`` in one walk instead of two
    (issue 20 section 4: `share` runs per stored event, and its second walk was a third
    of a store's append). A value already frozen (`FrozenDict`, `FrozenList`) and a
    registered shared form's result are only searched for their plan. The rules are
    `freeze`'s and `empty_fields`': change them together (see `freeze`)."""
    kind = type(value)
    if kind in _SCALAR_TYPES:
        return value, None
    if kind is FrozenDict or kind is FrozenList:
        return value, empty_fields(value)
    if kind is dict:  # an empty one too gets its own object (deep copies: finding 1)
        if _SCALAR_TYPES.issuperset(map(type, value.values())):  # one C-level pass
            return FrozenDict(value), None
        entries: dict[Any, Any] = {}
        in_entries: list[tuple[Any, Plan]] = []
        for key, item in value.items():
            entries[key], sub = _frozen_with_plan(item)
            if sub is not None:
                in_entries.append((key, sub))
        return FrozenDict(entries), ((_IN_DICT, tuple(in_entries)) if in_entries else None)
    if kind is list or kind is tuple:
        if _SCALAR_TYPES.issuperset(map(type, value)):  # one C-level pass: nothing inside
            return (FrozenList(value) if kind is list else value), None
        items: list[Any] = []
        in_items: list[tuple[int, Plan]] = []
        for index, item in enumerate(value):
            new, sub = _frozen_with_plan(item)
            items.append(new)
            if sub is not None:
                in_items.append((index, sub))
        plan = tuple(in_items) or None
        if kind is list:
            return FrozenList(items), plan
        changed = any(new is not old for new, old in zip(items, value, strict=True))
        return (tuple(items) if changed else value), plan
    fields = _struct_fields(kind)
    if fields is None:  # a subclass of dict, list or tuple, or a value left as it is
        frozen = freeze(value)
        return frozen, empty_fields(frozen)
    values = _astuple(value)
    changes: dict[str, Any] | None = None
    in_fields: list[tuple[str, Any]] = []
    if not _SCALAR_TYPES.issuperset(map(type, values)):  # one C-level pass: else none
        for (field, keep_plain), old in zip(fields, values, strict=True):
            kind = type(old)
            if kind in _SCALAR_TYPES or old is EMPTY_DICT or old is EMPTY_LIST:
                continue
            if keep_plain and not old and (kind is dict or kind is list):
                in_fields.append((field, kind))  # msgspec omits only an exact empty default
                continue
            new, sub = _frozen_with_plan(old)
            if new is not old:
                if changes is None:
                    changes = {}
                changes[field] = new
            if sub is not None:
                in_fields.append((field, type(new) if _all_default(new) else sub))
    if changes is not None:
        value = msgspec.structs.replace(value, **changes)
    form = _shared_forms.get(type(value))
    if form is not None:
        value = form(value)
        return value, empty_fields(value)
    return value, tuple(in_fields) or None


def reader_copy(value: Any, refill: Refill | None) -> Any:
    """`value` (from `share`) for one reader: shared except for its empty fields,
    which are new, so this reader's edit of one stays its own."""
    return value if refill is None else refill(value)


def empty_fields(value: Any) -> Plan | None:
    """Where `freeze` left a plain empty dict or list in `value` (struct fields,
    through structs, tuples, lists and dict values; None: nowhere)."""
    kind = type(value)
    if kind is tuple or kind is FrozenList:
        if _SCALAR_TYPES.issuperset(map(type, value)):  # one C-level pass (or empty)
            return None
        items = [
            (index, sub)
            for index, item in enumerate(value)
            if type(item) not in _SCALAR_TYPES and (sub := empty_fields(item)) is not None
        ]
        return tuple(items) or None
    if kind is FrozenDict:  # a struct in a dict value (issue 20 leftover: was shared)
        if _SCALAR_TYPES.issuperset(map(type, value.values())):  # as above
            return None
        entries = [
            (key, sub)
            for key, item in value.items()
            if type(item) not in _SCALAR_TYPES and (sub := empty_fields(item)) is not None
        ]
        return (_IN_DICT, tuple(entries)) if entries else None
    fields = _struct_fields(kind)
    if fields is None:  # a NamedTuple's items too (was shared by readers: review of 7f05ca6)
        return empty_fields(tuple(value)) if isinstance(value, tuple) else None
    values = _astuple(value)
    if _SCALAR_TYPES.issuperset(map(type, values)):  # one C-level pass: nothing inside
        return None
    found: list[tuple[str, Any]] = []
    for (field, keep_plain), item in zip(fields, values, strict=True):
        kind = type(item)
        if kind in _SCALAR_TYPES or item is EMPTY_DICT or item is EMPTY_LIST:
            continue
        if (kind is dict or kind is list) and not item:
            if keep_plain:  # `freeze` leaves no other empty one plain
                found.append((field, kind))
        elif (sub := empty_fields(item)) is not None:
            found.append((field, kind if _all_default(item) else sub))
    return tuple(found) or None


def _refiller(plan: Plan) -> Refill:
    """How to copy a value of `plan` with new empty dicts and lists: compiled once per
    shape (`_compiled`) when the plan names only fields and indexes; a plan that holds
    a dict's keys (data) is put together from its parts instead, so user keys never
    fill the compile cache nor cost a compile each (review of 4173fce, finding 4)."""
    if not _holds_keys(plan):
        return _compiled(plan)
    if plan[0] == _IN_DICT:
        return functools.partial(
            _refill_entries, tuple((key, _refiller(sub)) for key, sub in plan[1])
        )
    if isinstance(plan[0][0], int):
        return functools.partial(
            _refill_items, tuple((index, _refiller(sub)) for index, sub in plan)
        )
    steps = tuple(
        (field, sub, None) if isinstance(sub, type) else (field, None, _refiller(sub))
        for field, sub in plan
    )
    return functools.partial(_refill_fields, steps)


def _holds_keys(plan: Plan) -> bool:
    """Does `plan` (or one inside it) hold a dict's entries?"""
    if plan[0] == _IN_DICT:
        return True
    return any(isinstance(sub, tuple) and _holds_keys(sub) for _, sub in plan)


@functools.lru_cache(maxsize=1024)
def _compiled(plan: Plan) -> Refill:
    """`plan` compiled to one expression of nested `msgspec.structs.replace` calls
    (a read copies every shared event: this is its whole cost, so it is generated
    once per shape; field names are struct attribute names, never data)."""
    namespace: dict[str, Any] = {"_replace": msgspec.structs.replace}
    refill: Refill = eval(f"lambda v: {_expression('v', plan, namespace)}", namespace)
    return refill


def _all_default(value: msgspec.Struct) -> bool:
    """Does every field of `value` hold its default as msgspec sees it: the default
    object itself, or for a ``default_factory`` of dict or list an exact empty one?
    A new instance is then the cheapest copy with empty fields of its own, and it
    encodes as `value`. Equality is not enough: msgspec omits only such fields, so an
    empty `FrozenList` or list subclass, or an equal but distinct string, is written
    out and a new instance would drop it (review of 7f05ca6, note B)."""
    kind = type(value)
    defaults: tuple[Any, ...] | None = getattr(kind, "__struct_defaults__", None)
    if defaults is None:  # a tuple, a FrozenList or a FrozenDict holding a plan
        return False
    values = _astuple(value)
    if len(defaults) != len(values):  # a field without a default
        return False
    for item, default in zip(values, defaults, strict=True):
        if item is default:
            continue
        factory = getattr(default, "factory", None)
        exact_empty = type(item) is factory and not item  # what msgspec omits as well
        if not (exact_empty and factory in (dict, list) and _is_factory(default)):
            return False
    try:  # and a new one is built alike (a `__post_init__` may change its fields)
        return bool(value == kind())
    except TypeError:
        return False


def _expression(var: str, plan: Plan, namespace: dict[str, Any]) -> str:
    if isinstance(plan[0][0], int):  # a tuple or FrozenList: copied by a helper
        name = f"_seq{len(namespace)}"
        namespace[name] = functools.partial(
            _refill_items, tuple((index, _refiller(sub)) for index, sub in plan)
        )
        return f"{name}({var})"
    args = []
    for field, sub in plan:
        if sub is dict or sub is list:
            args.append(f"{field}={'{}' if sub is dict else '[]'}")
        elif isinstance(sub, type):  # every field at its default: a new one
            name = f"_new{len(namespace)}"
            namespace[name] = sub
            args.append(f"{field}={name}()")
        else:
            args.append(f"{field}={_expression(f'{var}.{field}', sub, namespace)}")
    return f"_replace({var}, {', '.join(args)})"


def _refill_items(refills: tuple[tuple[int, Refill], ...], value: Any) -> Any:
    items = list(value)
    for index, refill in refills:
        items[index] = refill(items[index])
    kind = type(value)
    if kind is tuple or kind is FrozenList:
        return kind(items)
    return kind(*items) if hasattr(value, "_fields") else kind(items)  # a NamedTuple


def _refill_entries(refills: tuple[tuple[Any, Refill], ...], value: Any) -> Any:
    entries = dict(value)
    for key, refill in refills:
        entries[key] = refill(entries[key])
    return FrozenDict(entries)


def _refill_fields(steps: tuple[tuple[str, Any, Refill | None], ...], value: Any) -> Any:
    """`_compiled`'s expression for a struct, step by step: (field, a type to make anew
    or None, a refill of the old value or None) per field."""
    changes = {
        field: make() if refill is None else refill(getattr(value, field))
        for field, make, refill in steps
    }
    return msgspec.structs.replace(value, **changes)
