import shutil
import tempfile
from pathlib import Path

import pytest

from tests.scaleout import cluster as clusters
from tests.scaleout.cluster import ClusterTemplate

LOG_TAIL_CHARS = 8000


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed scale-out test shows the tail of each web and worker log of its clusters: they are gone after it."""
    report = (yield).get_result()
    if report.when == "call" and report.failed:
        for cluster in clusters.made:
            for name, process in cluster.processes.items():
                report.sections.append((f"cluster process {name} (log tail)", process.log()[-LOG_TAIL_CHARS:]))
    if report.when == "teardown":
        clusters.made.clear()


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
