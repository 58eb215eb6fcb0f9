"""Fixtures shared by the runtime's tests."""

import pytest

from agents import dispatch


@pytest.fixture
def broker(settings, monkeypatch):
    """What the runtime sends to the broker, kept instead of sent."""
    settings.AGENT_EXECUTION_MODE = "celery"
    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(dispatch, "_send", lambda name, args, countdown=None: sent.append((name, tuple(args))))
    return sent
