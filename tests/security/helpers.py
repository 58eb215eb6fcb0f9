"""A populated "world" for the security tests: two owners and a staff user, and under the owner's started workflow
an agent with a Context, a memory node with items, a stored conversation and a chat session with a finished run.

Everything is built through the apps' services (and one inline chat run), the way owners create it. The `world`
fixture (tests/security/conftest.py) serves it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

WORLD_NAME = "world-workflow-name-7d1c"
WORLD_FACT = "world-memory-fact-52be"


@dataclass
class World:
    owner: object
    intruder: object
    staff: object
    workflow: object
    intruder_workflow: object
    generation: int
    agent_node_id: str
    context_node_id: str
    memory_node_id: str
    items: dict = field(default_factory=dict)  # purpose -> item id
    user_message_id: int = 0
    assistant_message_id: int = 0
    run_id: int = 0
    owner_token: str = ""
    intruder_token: str = ""


def build_world(make_user) -> World:
    from accounts.tokens import api_token_create
    from chat.models import ChatMessage, ChatRun
    from chat.services.runs import chat_message_send
    from memory.services import memory_item_remember, memory_namespace_get_or_create
    from tests.chat.helpers import chat_workflow

    owner = make_user("owner")
    intruder = make_user("intruder")
    staff = make_user("staff", is_staff=True, is_superuser=True)
    workflow, generation, ids = chat_workflow(owner, memory=True)
    workflow.name = WORLD_NAME
    workflow.save(update_fields=["name"])
    intruder_workflow, _, _ = chat_workflow(intruder, memory=True)

    namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=ids["mem"])
    items = {}
    for purpose in ("read", "api_delete", "page_forget"):
        result = memory_item_remember(
            namespace=namespace, content=f"{WORLD_FACT} ({purpose})", title=purpose, actor="owner"
        )
        items[purpose] = result["item"]["id"]

    # One chat turn in inline mode: stores the lead's conversation and leaves a finished run.
    message, run, _ = chat_message_send(workflow=workflow, text="hello world")
    run = ChatRun.objects.get(pk=run.pk)
    assert run.state == ChatRun.State.FINISHED, run.state
    reply = ChatMessage.objects.filter(session=message.session, role=ChatMessage.Role.ASSISTANT).latest("id")
    return World(
        owner=owner,
        intruder=intruder,
        staff=staff,
        workflow=workflow,
        intruder_workflow=intruder_workflow,
        generation=generation,
        agent_node_id=ids["lead"],
        context_node_id=ids["ctx"],
        memory_node_id=ids["mem"],
        items=items,
        user_message_id=message.pk,
        assistant_message_id=reply.pk,
        run_id=run.pk,
        owner_token=api_token_create(user=owner, name="world").raw_key,
        intruder_token=api_token_create(user=intruder, name="world").raw_key,
    )


@contextlib.contextmanager
def open_socket(path: str, *, user=None):
    """A SocketClient on a fresh channel layer: a closed socket leaves the process-wide layer bound to its stopped
    loop, and the next socket (on another loop) could not receive."""
    from channels.layers import channel_layers

    from tests.realtime import SocketClient

    channel_layers.backends.clear()
    socket = SocketClient(path, user=user)
    try:
        yield socket
    finally:
        socket.close()
        channel_layers.backends.clear()
