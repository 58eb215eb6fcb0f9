"""Waiting on facts, not on time: poll a condition until it holds.

The timeout only bounds a failure (a test that would otherwise hang says what it was waiting for); no test waits
a fixed time and then asserts that something did, or did not, happen. To prove an absence, send a marker after it
(`tests/realtime.py`); to force an order, run the competing change at an exact point (`tests/race.py`).
"""

from __future__ import annotations

import time

DEFAULT_TIMEOUT = 30.0


def wait_until(predicate, *, timeout: float = DEFAULT_TIMEOUT, what: str = "the condition", interval: float = 0.02):
    """Poll `predicate()` until it returns something truthy, and return that; fail the test naming `what` once
    `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
