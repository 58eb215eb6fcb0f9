import pytest

from memory.services import memory_namespace_get_or_create
from memory.tool import memory_tool_call
from tests.memory.helpers import NODE, OTHER_NODE, memory_graph
from workflows.models import Workflow


@pytest.fixture
def make_workflow(db):
    def make(owner, name="w", nodes=(NODE, OTHER_NODE)):
        return Workflow.objects.create(owner=owner, name=name, graph=memory_graph(*nodes))

    return make


@pytest.fixture
def workflow(make_workflow, owner):
    return make_workflow(owner)


@pytest.fixture
def namespace(workflow, owner):
    return memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=NODE)


@pytest.fixture
def call(owner, workflow):
    """Call the tool as the runtime does; each call gets a fresh idempotency key unless one is given."""
    counter = iter(range(1, 10**6))

    def invoke(arguments, *, key=None, node_id=NODE, as_owner=None, in_workflow=None, actor="agent:1:agent:1"):
        return memory_tool_call(
            owner=as_owner or owner,
            workflow=in_workflow or workflow,
            node_id=node_id,
            arguments=arguments,
            idempotency_key=key or f"firing-1:call-{next(counter)}",
            actor=actor,
        )

    return invoke


@pytest.fixture
def fts_only(settings):
    """No embedder: the install that chose full-text search only (`MEMORY_EMBEDDER=none`)."""
    settings.MEMORY_EMBEDDER = "none"


@pytest.fixture
def concept_embedder(settings):
    settings.MEMORY_EMBEDDER = "tests.memory.embedders:ConceptEmbedder"


@pytest.fixture
def flaky_embedder(settings):
    from tests.memory.embedders import FlakyConceptEmbedder

    FlakyConceptEmbedder.fail = True
    settings.MEMORY_EMBEDDER = "tests.memory.embedders:FlakyConceptEmbedder"
    yield FlakyConceptEmbedder
    FlakyConceptEmbedder.fail = True
