"""The demo workflow the main command seeds: chatTrigger -> agent (offline), with Context and Memory."""

from django.db import transaction

from .models import Workflow

DEMO_WORKFLOW_NAME = "Demo assistant"


def demo_graph() -> dict:
    return {
        "nodes": [
            {"id": "trigger", "type": "chatTrigger", "params": {}},
            {
                "id": "assistant",
                "type": "agent",
                "params": {
                    "name": "Assistant",
                    "provider": "offline",
                    "model": "offline-echo",
                    "system_prompt": "You are a helpful assistant. Use the memory tool to remember what matters.",
                },
            },
            {"id": "context", "type": "context", "params": {}},
            {"id": "memory", "type": "simpleMemory", "params": {"reset_policy": "keep"}},
        ],
        "edges": [
            {"source": "trigger", "sourceHandle": "output-main", "target": "assistant", "targetHandle": "input-main"},
            {
                "source": "context",
                "sourceHandle": "output-context",
                "target": "assistant",
                "targetHandle": "input-context",
            },
            {"source": "memory", "sourceHandle": "output-tool", "target": "assistant", "targetHandle": "input-tools"},
        ],
    }


@transaction.atomic
def ensure_demo_workflow(*, owner) -> tuple[Workflow, bool]:
    existing = Workflow.objects.filter(owner=owner, name=DEMO_WORKFLOW_NAME).first()
    if existing:
        return existing, False
    return Workflow.objects.create(owner=owner, name=DEMO_WORKFLOW_NAME, graph=demo_graph()), True
