import shutil
import tempfile
from pathlib import Path

import pytest

from tests.scaleout.cluster import ClusterTemplate


@pytest.fixture(scope="session")
def cluster_template():
    """The clusters' starting data, made once per test session (per xdist process); a migration added since the
    last session is in it, as each session migrates afresh. Outside pytest's private temporary root, as
    `services_path` is: PostgreSQL's user must reach it."""
    path = Path(tempfile.mkdtemp(prefix="opencompany-template-"))
    path.chmod(0o755)
    try:
        yield ClusterTemplate.build(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)
