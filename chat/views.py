"""The chat page: server-rendered shell plus the thread snapshot; static/js/chat.js renders and streams."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from chat.apis import ThreadOutputSerializer
from chat.errors import PLAIN_WORDS, RUN_END_WORDS
from chat.selectors import chat_panel_links, chat_thread
from core.errors import NotFoundError
from workflows.selectors import access_workflow


@login_required
@ensure_csrf_cookie
def chat_page(request, workflow_id: int):
    try:
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
    except NotFoundError:
        raise Http404("Workflow not found.") from None
    thread = ThreadOutputSerializer(chat_thread(workflow=workflow)).data
    links = chat_panel_links(workflow=workflow)
    context = {
        "workflow": workflow,
        "thread": thread,
        "links": links,
        "config": {
            "agent_name": links["agent_name"],
            "max_chars": settings.CHAT_MESSAGE_MAX_CHARS,
            # Attachments (docs/chat.md#files): the picker's hint; the server decides the type from the bytes.
            "file_accept": ".png,.jpg,.jpeg,.webp,.gif,.pdf,.txt,.md,.csv,.json,image/*,application/pdf,text/*",
            "file_max_bytes": settings.FILE_MAX_BYTES,
            "file_max_count": settings.FILE_MESSAGE_MAX_FILES,
            "agent_model": links["agent_model"],
            "file_forms": links["file_forms"],
            "plain_codes": RUN_END_WORDS,
            "workflow_id": workflow.pk,
            "api": f"/api/workflows/{workflow.pk}/chat/",
            "socket": f"/ws/workflows/{workflow.pk}/",
            "plain_words": PLAIN_WORDS,
            # Where "See in the Memory panel" goes for an answer whose saved items are all forgotten.
            "memory_nodes": [memory["node_id"] for memory in links["memory"]],
        },
    }
    return render(request, "chat/page.html", context)
