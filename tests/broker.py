"""The Celery broker held: what the code sends is kept in a list instead of reaching a worker.

`hold_broker` serves the `broker` fixture (tests/conftest.py) and the tests that start holding half-way (after an
inline first turn). Firings are admitted but no task reaches a worker, so runs stay pending and the lane stays
taken; a test runs the kept steps itself when it wants them."""

from __future__ import annotations


def hold_broker(monkeypatch, settings) -> list[tuple[str, tuple]]:
    """From now on every task sent is kept as (task name, args), in the order sent, instead of sent."""
    from opencompany.celery import app

    settings.AGENT_EXECUTION_MODE = "celery"
    sent: list[tuple[str, tuple]] = []

    def keep(name, args=None, **options):
        sent.append((name, tuple(args or ())))

    monkeypatch.setattr(app, "send_task", keep)
    return sent
