"""The demo workflow the main command seeds (`services.workflow_demo_ensure`): chatTrigger -> agent (offline),
with a Context and a Memory tool."""

DEMO_WORKFLOW_NAME = "Demo assistant"


def demo_graph() -> dict:
    # Client-style ids; the create service gives them canonical ids `<workflow_id>:<type>:<n>`.
    return {
        "nodes": [
            {"id": "trigger", "type": "chatTrigger", "params": {}, "position": {"x": 40, "y": 40}},
            {
                "id": "assistant",
                "type": "agent",
                "params": {
                    "name": "Assistant",
                    "provider": "offline",
                    "model": "offline-echo",
                    "system_prompt": "You are a helpful assistant. Use the memory tool to remember what matters.",
                },
                "position": {"x": 400, "y": 120},
            },
            {"id": "context", "type": "context", "params": {}, "position": {"x": 60, "y": 220}},
            {
                "id": "memory",
                "type": "simpleMemory",
                "params": {"reset_policy": "keep"},
                "position": {"x": 60, "y": 360},
            },
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
