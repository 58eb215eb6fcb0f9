"""Registries other apps hook into, so the workflows services name no other app.

Register from your AppConfig.ready():

    from workflows.listeners import register_reset_listener, register_archive_listener
    register_reset_listener(my_reset)          # my_reset(*, workflow, previous_generation, new_generation, actor)
    register_archive_listener(my_archive)      # my_archive(*, workflow_id, workflow, reason, context_node_ids,
                                               #            agent_node_ids)
    register_generation_end_listener(my_end)   # my_end(*, workflow, generation): Start superseded it or Stop
                                               #   ended it (a Reset calls the reset listeners instead)
    register_generation_start_listener(my_start)  # my_start(*, workflow, generation): Start or Reset admitted it

Reset listeners run inside the reset transaction (a failure rolls the whole reset back). Archive listeners run
from `workflows.drain_archive_outbox`, inside the transaction that marks the outbox row done; `workflow` is None
when the workflow was deleted. Both must be idempotent: a retried job calls them again. A listener may return a
number or a small dict; it lands in the reset report / outbox result under the listener's name.
"""

from __future__ import annotations

from collections.abc import Callable

ResetListener = Callable[..., object]
ArchiveListener = Callable[..., object]

_reset_listeners: dict[str, ResetListener] = {}
_archive_listeners: dict[str, ArchiveListener] = {}


def _name(fn: Callable, name: str | None) -> str:
    return name or f"{fn.__module__}.{fn.__qualname__}"


def register_reset_listener(fn: ResetListener, *, name: str | None = None) -> ResetListener:
    """Idempotent: registering the same name again replaces the earlier one (ready() may run twice in tests)."""
    _reset_listeners[_name(fn, name)] = fn
    return fn


def unregister_reset_listener(fn_or_name) -> None:
    key = fn_or_name if isinstance(fn_or_name, str) else _name(fn_or_name, None)
    _reset_listeners.pop(key, None)


def reset_listeners() -> dict[str, ResetListener]:
    return dict(_reset_listeners)


def register_archive_listener(fn: ArchiveListener, *, name: str | None = None) -> ArchiveListener:
    _archive_listeners[_name(fn, name)] = fn
    return fn


def unregister_archive_listener(fn_or_name) -> None:
    key = fn_or_name if isinstance(fn_or_name, str) else _name(fn_or_name, None)
    _archive_listeners.pop(key, None)


def archive_listeners() -> dict[str, ArchiveListener]:
    return dict(_archive_listeners)


_generation_end_listeners: dict[str, Callable[..., object]] = {}


def register_generation_end_listener(fn: Callable[..., object], *, name: str | None = None) -> Callable[..., object]:
    """Called inside the transaction of a Start that supersedes the live generation or of a Stop that ends it,
    with the ended `WorkflowGeneration`. Its conversations are never continued (a new generation is a new key)."""
    _generation_end_listeners[_name(fn, name)] = fn
    return fn


def generation_end_listeners() -> dict[str, Callable[..., object]]:
    return dict(_generation_end_listeners)


_generation_start_listeners: dict[str, Callable[..., object]] = {}


def register_generation_start_listener(fn: Callable[..., object], *, name: str | None = None) -> Callable[..., object]:
    """Called inside the transaction of a Start or a Reset that admitted a new live `WorkflowGeneration` (after
    the generation-end or reset listeners heard of the one it replaced), under the workflow row's lock."""
    _generation_start_listeners[_name(fn, name)] = fn
    return fn


def generation_start_listeners() -> dict[str, Callable[..., object]]:
    return dict(_generation_start_listeners)
