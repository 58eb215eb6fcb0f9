"""The on-commit broadcast of `memory.updated`: metadata only, never content (docs/architecture.md#realtime-events)."""

from core.realtime import publish_workflow_event


def memory_updated_event(*, workflow_id: int, memory_node_id: str, item_id, operation: str, version) -> dict:
    return {
        "type": "memory.updated",
        "workflow_id": workflow_id,
        "memory_node_id": memory_node_id,
        "item_id": item_id,
        "operation": operation,
        "version": version,
    }


def publish_memory_updated(*, namespace, item_id, operation: str, version) -> None:
    publish_workflow_event(
        workflow_id=namespace.workflow_id,
        event=memory_updated_event(
            workflow_id=namespace.workflow_id,
            memory_node_id=namespace.node_id,
            item_id=item_id,
            operation=operation,
            version=version,
        ),
    )
