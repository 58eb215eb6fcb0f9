"""The real web server, Celery worker and broker the editor's browser tests drive Chromium against."""

import pytest

from tests.processes import running_site


@pytest.fixture(scope="module")
def stack(tmp_path_factory, django_db_setup):
    """One site per test file: its processes hold no state a test leaves behind (each test's rows are flushed,
    and every test signs in as a user of its own), and starting the pair costs seconds per test."""
    with running_site(tmp_path_factory.mktemp("site"), OFFLINE_PROVIDER_DELAY_MS="20") as base_url:
        yield base_url
