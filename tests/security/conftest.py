"""Fixtures of the security tests: the populated `world` (tests/security/helpers.py) and inline firings."""

from __future__ import annotations

import pytest

from tests.security.helpers import World, build_world


@pytest.fixture
def inline(settings):
    settings.AGENT_EXECUTION_MODE = "inline"


@pytest.fixture
def world(transactional_db, make_user, inline) -> World:
    return build_world(make_user)


def pytest_collection_modifyitems(config, items):
    """Known bugs found by schemathesis are strict xfails per API operation (one generated item per operation),
    listed in test_schemathesis.KNOWN_BUGS as "METHOD /path" -> the bug."""
    for item in items:
        known = getattr(item.module, "KNOWN_BUGS", None) if hasattr(item, "module") else None
        if not known:
            continue
        for label, reason in known.items():
            if item.name.endswith(f"[{label}]"):
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
