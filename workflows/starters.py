"""What a new workflow can start from: a blank canvas or a template. The demo `dev.py run` seeds is one of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .demo import DEMO_WORKFLOW_NAME, demo_graph


@dataclass(frozen=True)
class Starter:
    key: str
    label: str
    description: str
    graph: Callable[[], dict]
    default_name: str


STARTERS: tuple[Starter, ...] = (
    Starter("blank", "Blank canvas", "An empty graph: add a chat trigger, an agent and tools.", dict, "New workflow"),
    Starter(
        "demo",
        "Demo assistant",
        "A chat trigger, an offline agent with a Context (it keeps the conversation) and a Memory tool.",
        demo_graph,
        DEMO_WORKFLOW_NAME,
    ),
)


def starter(key: str) -> Starter | None:
    return next((s for s in STARTERS if s.key == key), None)
