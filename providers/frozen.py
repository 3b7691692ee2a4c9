"""Deeply immutable JSON values and msgspec structs: what a store may share safely.

A frozen msgspec struct (an `Event`, a `Content`) still holds mutable dicts and lists
(function arguments, state deltas), so an object handed to two callers could be
changed by one under the other. `freeze` returns the same value with every dict and
list replaced by a read-only subclass (`FrozenDict`, `FrozenList`): equal to the
original, encoded the same by msgspec and json, but any in-place change raises
``TypeError``. A copy (`copy.copy`, `copy.deepcopy`, pickle) is a plain, mutable
dict or list. One exception: an empty dict or list held directly by a struct field
(an event's empty ``state_delta``, a call without arguments) stays as it is, since
msgspec leaves out a default only when it is an exact empty dict or list, and a
frozen one would change the encoding. A store that shares a value therefore keeps
it with `share` (the frozen value and where its empty fields are) and hands each
reader `reader_copy`: the same shared parts, but fresh empty dicts and lists of its
own, so no reader sees another's edit of one and none reaches the stored copy
(`canonical` checks that they are still empty before it trusts its answer). Session
stores hand out frozen events, so they can keep one decoded copy per event, and
`providers.content.canonical` can remember its answer for a frozen content.

The read-only guard stops accidental edits, not deliberate ones: ``FrozenDict.__init__``
and the unbound base methods (``dict.__setitem__(d, ...)``, ``list.append(l, ...)``)
still change a frozen value, and `canonical` trusts a frozen content not to be changed
so (review of fb2eacc, finding 5: a deliberate bypass, accepted).
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


_SCALARS = (str, int, float, bool, type(None), bytes)


def freeze(value: Any) -> Any:
    """`value` with every dict and list inside it (through dicts, lists, tuples and
    msgspec structs) read-only; `value` itself when nothing in it was mutable."""
    kind = type(value)
    if kind in _SCALARS or kind is FrozenDict or kind is FrozenList:
        return value
    if isinstance(value, dict):
        return FrozenDict({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return FrozenList([freeze(item) for item in value])
    if isinstance(value, tuple):
        items = tuple(freeze(item) for item in value)
        changed = any(new is not old for new, old in zip(items, value, strict=True))
        return (kind(*items) if hasattr(value, "_fields") else items) if changed else value
    if isinstance(value, msgspec.Struct):
        changes = {}
        for field in value.__struct_fields__:
            old = getattr(value, field)
            if not old and type(old) in (dict, list):
                continue  # msgspec omits only an exact empty default: keep encodings
            new = freeze(old)
            if new is not old:
                changes[field] = new
        return msgspec.structs.replace(value, **changes) if changes else value
    return value


Plan: TypeAlias = tuple[tuple[Any, Any], ...]
"""Where a frozen value holds empty dicts and lists (`empty_fields`): (field name or
sequence index, ``dict``/``list``, a struct type whose every field has its default
(a new one is made), or the nested plan) pairs."""
Refill: TypeAlias = Callable[[Any], Any]
"""A value (of one `Plan`) -> a copy with new empty dicts and lists where they were."""


def share(value: Any) -> tuple[Any, Refill | None]:
    """`value` frozen, with empty fields of its own (none of the caller's object is
    kept), and how to give a reader its own (None: it has none): what a store keeps
    of a value every reader gets through `reader_copy`."""
    frozen = freeze(value)
    plan = empty_fields(frozen)
    if plan is None:
        return frozen, None
    refill = _refiller(plan)
    return refill(frozen), refill


def reader_copy(value: Any, refill: Refill | None) -> Any:
    """`value` (from `share`) for one reader: shared except for its empty fields,
    which are new, so this reader's edit of one stays its own."""
    return value if refill is None else refill(value)


def empty_fields(value: Any) -> Plan | None:
    """Where `freeze` left a plain empty dict or list in `value` (struct fields,
    through structs, tuples and lists; None: nowhere)."""
    if isinstance(value, msgspec.Struct):
        found: list[tuple[str, Any]] = []
        for field in value.__struct_fields__:
            item = getattr(value, field)
            kind = type(item)
            if (kind is dict or kind is list) and not item:
                found.append((field, kind))
            elif kind not in _SCALARS and (sub := empty_fields(item)) is not None:
                found.append((field, kind if _all_default(item) else sub))
        return tuple(found) or None
    if type(value) is tuple or type(value) is FrozenList:
        items = [
            (index, sub)
            for index, item in enumerate(value)
            if type(item) not in _SCALARS and (sub := empty_fields(item)) is not None
        ]
        return tuple(items) or None
    return None


@functools.lru_cache(maxsize=1024)
def _refiller(plan: Plan) -> Refill:
    """`plan` compiled to one expression of nested `msgspec.structs.replace` calls
    (a read copies every shared event: this is its whole cost, so it is generated
    once per shape; field names are struct attribute names, never data)."""
    namespace: dict[str, Any] = {"_replace": msgspec.structs.replace}
    refill: Refill = eval(f"lambda v: {_expression('v', plan, namespace)}", namespace)
    return refill


def _all_default(value: msgspec.Struct) -> bool:
    """Does every field of `value` hold its default (an event's usual `actions`)? A
    new instance is then the cheapest copy with empty fields of its own."""
    try:
        return bool(value == type(value)())
    except TypeError:  # a field without a default
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
    return FrozenList(items) if type(value) is FrozenList else tuple(items)
