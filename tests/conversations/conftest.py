import pytest

from conversations.store import conversation_key, forget_process_copies
from workflows.models import Workflow


@pytest.fixture(autouse=True)
def _fresh_process_copies():
    # Each test starts without per-process copies, as a fresh worker would.
    forget_process_copies()
    yield
    forget_process_copies()


@pytest.fixture
def workflow(owner):
    return Workflow.objects.create(owner=owner, name="w")


@pytest.fixture
def key(workflow):
    return conversation_key(workflow.pk, 1, f"{workflow.pk}:agent:1")
