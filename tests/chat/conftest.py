"""Fixtures of the chat's browser tests: the real web server and worker, and an owner's chat with memory."""

from __future__ import annotations

import pytest

from tests.chat.helpers import BROWSER_PASSWORD, chat_workflow
from tests.processes import running_site


@pytest.fixture(scope="module")
def stack(tmp_path_factory, django_db_setup):
    """One site per test file (tests/browser/conftest.py says why that is safe)."""
    site = tmp_path_factory.mktemp("site")
    with running_site(site, OFFLINE_PROVIDER_DELAY_MS="40", AGENT_STOP_POLL_SECONDS="0.05") as base_url:
        yield base_url


@pytest.fixture
def setup(make_user):
    """(owner, workflow, node ids, session cookie). Made before the browser starts: Playwright's sync API runs an
    event loop, and the ORM refuses to run inside one."""
    from tests.realtime import session_cookie_for

    owner = make_user("browser-owner", password=BROWSER_PASSWORD)
    workflow, _, ids = chat_workflow(owner, memory=True)
    name, value = session_cookie_for(owner).split("=", 1)
    return owner, workflow, ids, {"name": name, "value": value}
