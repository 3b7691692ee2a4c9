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
frozen one would change the encoding; readers must treat those as read-only too
(`canonical` checks that they are still empty before it trusts its answer). Session stores hand out frozen events, so they can keep one decoded
copy per event, and `providers.content.canonical` can remember its answer for a
frozen content.
"""

from __future__ import annotations

from typing import Any, NoReturn

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
