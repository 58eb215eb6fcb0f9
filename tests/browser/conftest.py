"""The real web server, Celery worker and broker the editor's browser tests drive Chromium against."""

import pytest

from tests.processes import running_site


@pytest.fixture
def stack(tmp_path):
    with running_site(tmp_path, OFFLINE_PROVIDER_DELAY_MS="20") as base_url:
        yield base_url
