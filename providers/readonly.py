"""Read-only JSON containers for MessageWire messages the conversation store validated when it wrote them.

The unifier does not validate them again on every request (they cannot have changed). A store load hands the caller
the very message objects this process keeps as its copy of the stored list, so a save of
`[*loaded, *new]` finds the stored prefix by identity (a pointer per message) instead of walking every message.
That is only sound if nobody can change those objects, so they refuse every change; a caller that wants a
different message builds a new dict (`{**message, "meta": ...}`), which the save then compares by content.
Copies (`dict(message)`, `{**message}`, `copy.copy`, `copy.deepcopy`, pickling) are ordinary dicts and lists.
"""

from __future__ import annotations

import copy


def _refuse(self, *args, **kwargs):
    raise TypeError(
        "a loaded message is read-only (it is the store's copy of what is stored): build a new dict or list instead"
    )


class ReadOnlyDict(dict):
    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo) -> dict:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self):
        return (dict, (dict(self),))


class ReadOnlyList(list):
    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> list:
        return list(self)

    def __deepcopy__(self, memo) -> list:
        return [copy.deepcopy(value, memo) for value in self]

    def __reduce__(self):
        return (list, (list(self),))


_CONTAINERS = (dict, list)


def read_only(value):
    """The parsed JSON tree `value` rebuilt with read-only containers; strings and numbers are shared as they are."""
    if type(value) is dict:
        for item in value.values():
            if type(item) in _CONTAINERS:
                return ReadOnlyDict({k: (read_only(v) if type(v) in _CONTAINERS else v) for k, v in value.items()})
        return ReadOnlyDict(value)  # only strings and numbers inside: a C-level copy
    return ReadOnlyList([(read_only(v) if type(v) in _CONTAINERS else v) for v in value])
