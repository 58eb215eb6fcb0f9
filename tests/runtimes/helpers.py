"""Helpers of the runtime tests: a firing run in the background, a process group's end, screenshots."""

from __future__ import annotations

import os

from tests.chat.helpers import answers
from tests.processes import REPO_ROOT
from tests.race import Competitor

__all__ = ["answers", "fire_in_background", "process_group_gone", "shot"]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "runtimes"


def fire_in_background(workflow, generation, agent, prompt) -> Competitor:
    """`firing_start` on its own thread and database connection; `.result(timeout)` is the firing's id."""
    from agents.services.firings import firing_start

    return Competitor(lambda: firing_start(workflow, generation, agent, prompt), name="firing").start()


def process_group_gone(pid: int) -> bool:
    """Whether the process group `pid` is gone: SIGKILLed at Stop, but on a loaded machine the kernel may take a
    moment to tear it down and reap it, so callers poll this."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
