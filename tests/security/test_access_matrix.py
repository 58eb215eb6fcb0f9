"""Every URL, socket and admin page against three callers: anonymous, another owner and the owner.

The matrix below is explicit: a URL pattern (or socket route, or admin page) without an entry fails
`test_every_route_has_a_matrix_entry`, so a new handler cannot ship without saying who may call it.

Rules (docs/security.md#who-can-see-what):
- anonymous: API answers 401, a page redirects to the login page, the socket is refused;
- another owner: 404 for every method the handler takes (never 403, never the owner's data); other methods 404/405;
- the owner: not 401/403/404 and never 5xx;
- admin: staff only (anonymous and non-staff owners are sent to the admin login).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from tests.security.helpers import WORLD_FACT, WORLD_NAME, World, open_socket

PUBLIC, PAGE, API, ADMIN = "public", "page", "api", "admin"
# A URL whose unguessable token is the credential (a webhook's address): a made-up token is the same 404 for
# everybody, signed in or not, and shows nothing.
CAPABILITY = "capability"
STAFF = "staff"  # staff sessions (or the metrics bearer token) only; everybody else gets a 404
ALL_METHODS = ("get", "post", "put", "patch", "delete")

# Owner calls run in this order so that a call which destroys something runs after everything that reads it.
READ, MUTATE, DESTROY, LAST, GONE, NEW_TOKEN = 0, 1, 2, 3, 4, 5


@dataclass
class Entry:
    kind: str
    url: Callable[[World], str]
    methods: tuple[str, ...]
    bodies: dict[str, dict] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)
    session_only: tuple[str, ...] = ()  # methods a token may not call (the owner calls them with a session)

    def body(self, method: str, world: World) -> dict | None:
        body = self.bodies.get(method)
        return body(world) if callable(body) else body


def wf(world: World) -> str:
    return f"/api/workflows/{world.workflow.pk}/"


def page(world: World) -> str:
    return f"/workflows/{world.workflow.pk}/"


def mem_api(world: World) -> str:
    return f"{wf(world)}memory/{world.memory_node_id}/"


def mem_page(world: World) -> str:
    return f"{page(world)}memory/{world.memory_node_id}/"


def chat_api(world: World) -> str:
    return f"{wf(world)}chat/"


def spare_token_id(world: World) -> int:
    from accounts.models import ApiToken
    from accounts.tokens import api_token_create

    spare = ApiToken.objects.filter(user=world.owner, name="spare", revoked_at__isnull=True).first()
    return (spare or api_token_create(user=world.owner, name="spare").token).pk


def spare_workflow(world: World) -> int:
    from workflows.services import workflow_create

    return workflow_create(owner=world.owner, name="spare").workflow.pk


def firing_of_run(world: World) -> str:
    from chat.models import ChatRun

    return str(ChatRun.objects.get(pk=world.run_id).firing_id)


def draft_node(world: World, node_type: str, node_id: str) -> str:
    """A node of `node_type` in the owner's draft graph (added once, through the service): an MCP server for Test
    connection, a webhook trigger for its address API."""
    from workflows.services import workflow_save

    found = [n["id"] for n in world.workflow.graph["nodes"] if n["type"] == node_type]
    if found:
        return found[0]
    graph = world.workflow.graph
    nodes = [*graph["nodes"], {"id": node_id, "type": node_type, "params": {}}]
    workflow_save(workflow=world.workflow, graph={**graph, "nodes": nodes}, revision=world.workflow.revision)
    world.workflow.refresh_from_db()
    return node_id


def mcp_node(world: World) -> str:
    return draft_node(world, "mcpServer", "mcp")


def webhook_node(world: World) -> str:
    return draft_node(world, "webhookTrigger", "hook")


def tool_approval(world: World) -> str:
    """A call of the world's answer waiting for the owner's decision (one row, made once; the runtime's own path to
    it is tests/mcp_nodes/test_approvals.py)."""
    from datetime import timedelta

    from django.utils import timezone

    from agents.models import ToolApproval

    approval, _ = ToolApproval.objects.get_or_create(
        firing_id=firing_of_run(world),
        tool_call_id="matrix-call",
        defaults={"iteration": 1, "name": "wipe", "arguments": "{}", "expires_at": timezone.now() + timedelta(days=1)},
    )
    return str(approval.pk)


def owner_file(world: World) -> str:
    """A file of the owner's (uploaded once, through the service), for its download."""
    from files.models import StoredFile
    from files.services import file_upload

    stored = StoredFile.objects.filter(owner=world.owner).first() or file_upload(
        owner=world.owner, name="matrix.txt", data=b"a file of the owner's"
    )
    return f"/api/files/{stored.pk}/"


MADE_UP_HOOK = "/hooks/not-a-real-token-0123456789abcdef0123456789abcdef/"


# route pattern (as the URL conf spells it) -> entry
MATRIX: dict[str, Entry] = {
    # --- public -------------------------------------------------------------------------------------------------
    "healthz": Entry(PUBLIC, lambda w: "/healthz", ("get",)),
    "healthz/live": Entry(PUBLIC, lambda w: "/healthz/live", ("get",)),
    "healthz/ready": Entry(PUBLIC, lambda w: "/healthz/ready", ("get",)),
    "metrics": Entry(STAFF, lambda w: "/metrics", ("get",)),
    "login/": Entry(PUBLIC, lambda w: "/login/", ("get",)),
    "logout/": Entry(PUBLIC, lambda w: "/logout/", ("post",)),
    "favicon.ico": Entry(PUBLIC, lambda w: "/favicon.ico", ("get",)),
    "hooks/<str:token>/": Entry(CAPABILITY, lambda w: MADE_UP_HOOK, ("post",)),
    "hooks/<str:token>/runs/<int:fire_id>/": Entry(CAPABILITY, lambda w: MADE_UP_HOOK + "runs/1/", ("get",)),
    # --- login-required pages and API not under a workflow ----------------------------------------------------
    # The schema and its viewer describe handlers, not data, but only to callers with an account (security.md).
    "api/schema/": Entry(API, lambda w: "/api/schema/", ("get",)),
    "api/docs/": Entry(API, lambda w: "/api/docs/", ("get",)),
    # --- node types: the registry as data, the same for every logged-in owner -------------------------------
    "api/node-types/": Entry(API, lambda w: "/api/node-types/", ("get",)),
    "": Entry(PAGE, lambda w: "/", ("get",)),
    "settings/token/": Entry(
        PAGE,
        lambda w: "/settings/token/",
        ("get", "post"),
        bodies={"post": {"action": "create", "name": "matrix"}},
        order={"post": NEW_TOKEN},
    ),
    "settings/usage/": Entry(PAGE, lambda w: "/settings/usage/", ("get",)),
    # The signed-in owner's own password: a wrong current password changes nothing (the form answers 200).
    "settings/password/": Entry(
        PAGE, lambda w: "/settings/password/", ("get", "post"), bodies={"post": {"old_password": "not it"}}
    ),
    # Making a token needs a session (a token cannot mint tokens: tests/accounts/test_tokens.py).
    "api/tokens/": Entry(
        API, lambda w: "/api/tokens/", ("get", "post"), bodies={"post": {"name": "matrix"}}, session_only=("post",)
    ),
    # Another owner's token id is a 404 like any other object of theirs; the owner revokes a spare one.
    "api/tokens/<int:token_id>/": Entry(
        API, lambda w: f"/api/tokens/{spare_token_id(w)}/", ("delete",), order={"delete": NEW_TOKEN}
    ),
    "api/usage/": Entry(API, lambda w: "/api/usage/", ("get",)),
    "settings/provider-keys/": Entry(
        PAGE,
        lambda w: "/settings/provider-keys/",
        ("get", "post"),
        bodies={"post": {"provider": "gemini", "action": "save", "api_key": "AIza-matrix-page-key"}},
        order={"post": MUTATE},
    ),
    "api/provider-keys/": Entry(API, lambda w: "/api/provider-keys/", ("get",)),
    "api/provider-keys/<str:provider>/": Entry(
        API,
        lambda w: "/api/provider-keys/anthropic/",
        ("put", "delete"),
        bodies={"put": {"api_key": "sk-ant-matrix-api-key"}},
        order={"put": MUTATE, "delete": DESTROY},
    ),
    "api/provider-keys/<str:provider>/test/": Entry(
        API, lambda w: "/api/provider-keys/anthropic/test/", ("post",), order={"post": MUTATE}
    ),
    "api/secrets/": Entry(API, lambda w: "/api/secrets/", ("get",)),
    "api/secrets/<str:name>/": Entry(
        API,
        lambda w: "/api/secrets/matrix-token/",
        ("put", "delete"),
        bodies={"put": {"value": "matrix-secret-value-0123"}},
        order={"put": MUTATE, "delete": DESTROY},
    ),
    "api/mcp-servers/stdio/": Entry(API, lambda w: "/api/mcp-servers/stdio/", ("get",)),
    # Test connection of a node without a URL: the owner is told so (400), another owner gets a 404.
    "api/workflows/<int:workflow_id>/mcp-servers/<str:node_id>/tools/": Entry(
        API, lambda w: f"{wf(w)}mcp-servers/{mcp_node(w)}/tools/", ("post",), bodies={"post": {}}
    ),
    # --- workflows API --------------------------------------------------------------------------------------
    "api/workflows/": Entry(API, lambda w: "/api/workflows/", ("get", "post"), bodies={"post": {"name": "new one"}}),
    "api/workflows/import/": Entry(
        API, lambda w: "/api/workflows/import/", ("post",), bodies={"post": {"name": "imported", "graph": {}}}
    ),
    "api/workflows/<int:workflow_id>/": Entry(
        API,
        wf,
        ("get", "put", "delete"),
        bodies={"put": lambda w: {"name": WORLD_NAME, "graph": w.workflow.graph, "revision": w.workflow.revision}},
        order={"put": MUTATE, "delete": GONE},
    ),
    "api/workflows/<int:workflow_id>/validate/": Entry(
        API, lambda w: wf(w) + "validate/", ("post",), bodies={"post": lambda w: {"graph": w.workflow.graph}}
    ),
    "api/workflows/<int:workflow_id>/export/": Entry(API, lambda w: wf(w) + "export/", ("get",)),
    "api/workflows/<int:workflow_id>/start/": Entry(API, lambda w: wf(w) + "start/", ("post",), order={"post": MUTATE}),
    "api/workflows/<int:workflow_id>/stop/": Entry(API, lambda w: wf(w) + "stop/", ("post",), order={"post": DESTROY}),
    "api/workflows/<int:workflow_id>/reset/": Entry(
        API, lambda w: wf(w) + "reset/", ("post",), order={"post": DESTROY}
    ),
    "api/workflows/<int:workflow_id>/subagents/": Entry(
        API,
        lambda w: wf(w) + "subagents/",
        ("post",),
        bodies={"post": lambda w: {"lead_node_id": w.agent_node_id, "params": {"name": "Helper"}}},
        order={"post": MUTATE},
    ),
    "api/workflows/<int:workflow_id>/test-run/": Entry(
        API, lambda w: wf(w) + "test-run/", ("post",), bodies={"post": {"prompt": "a test question"}}
    ),
    "api/workflows/<int:workflow_id>/runs/": Entry(API, lambda w: wf(w) + "runs/", ("get",)),
    "api/workflows/<int:workflow_id>/runs/<str:firing_id>/": Entry(
        API, lambda w: f"{wf(w)}runs/{firing_of_run(w)}/", ("get",)
    ),
    # A tool call that asks first: its card and its decision (another owner's is a 404 like a missing one).
    "api/tool-approvals/<str:approval_id>/": Entry(API, lambda w: f"/api/tool-approvals/{tool_approval(w)}/", ("get",)),
    "api/tool-approvals/<str:approval_id>/decision/": Entry(
        API,
        lambda w: f"/api/tool-approvals/{tool_approval(w)}/decision/",
        ("post",),
        bodies={"post": {"decision": "deny", "reason": "matrix"}},
        order={"post": MUTATE},
    ),
    "api/workflows/<int:workflow_id>/generations/": Entry(API, lambda w: wf(w) + "generations/", ("get",)),
    "api/workflows/<int:workflow_id>/duplicate/": Entry(
        API, lambda w: wf(w) + "duplicate/", ("post",), bodies={"post": {}}
    ),
    # --- conversations API ----------------------------------------------------------------------------------
    # The signed-in owner's own settings: nothing of another owner is addressable through it.
    "api/settings/conversations/": Entry(
        API, lambda w: "/api/settings/conversations/", ("get", "put"), bodies={"put": {"tool_result_max_chars": 500}}
    ),
    "api/workflows/<int:workflow_id>/conversations/": Entry(API, lambda w: wf(w) + "conversations/", ("get",)),
    "api/workflows/<int:workflow_id>/conversations/<str:agent_node_id>/": Entry(
        API, lambda w: f"{wf(w)}conversations/{w.agent_node_id}/", ("get", "delete"), order={"delete": DESTROY}
    ),
    # --- memory API -----------------------------------------------------------------------------------------
    "api/workflows/<int:workflow_id>/memory/<str:node_id>/items/": Entry(
        API, lambda w: mem_api(w) + "items/", ("get", "post"), bodies={"post": {"content": "a new fact"}}
    ),
    "api/workflows/<int:workflow_id>/memory/<str:node_id>/items/<int:item_id>/": Entry(
        API,
        lambda w: f"{mem_api(w)}items/{w.items['read']}/",
        ("get", "patch", "delete"),
        bodies={"patch": {"expected_version": 1, "title": "renamed"}, "delete": {"expected_version": 2}},
        order={"patch": MUTATE, "delete": DESTROY},
    ),
    "api/workflows/<int:workflow_id>/memory/<str:node_id>/clear/": Entry(
        API, lambda w: mem_api(w) + "clear/", ("post",), order={"post": LAST}
    ),
    "api/workflows/<int:workflow_id>/memory/<str:node_id>/history/": Entry(
        API, lambda w: mem_api(w) + "history/", ("get",)
    ),
    "api/workflows/<int:workflow_id>/memory/<str:node_id>/items/<int:item_id>/restore/": Entry(
        API,
        lambda w: f"{mem_api(w)}items/{w.items['api_delete']}/restore/",
        ("post",),
        bodies={"post": {"version": 1, "expected_version": 1}},
    ),
    # --- chat API -------------------------------------------------------------------------------------------
    "api/workflows/<int:workflow_id>/chat/": Entry(API, chat_api, ("get",)),
    "api/workflows/<int:workflow_id>/chat/messages/": Entry(
        API, lambda w: chat_api(w) + "messages/", ("post",), bodies={"post": {"text": "a question"}}, order={"post": 1}
    ),
    "api/workflows/<int:workflow_id>/chat/messages/<int:message_id>/edit/": Entry(
        API,
        lambda w: f"{chat_api(w)}messages/{w.user_message_id}/edit/",
        ("post",),
        bodies={"post": {"text": "edited"}},
        order={"post": MUTATE},
    ),
    "api/workflows/<int:workflow_id>/chat/messages/<int:message_id>/regenerate/": Entry(
        API, lambda w: f"{chat_api(w)}messages/{w.assistant_message_id}/regenerate/", ("post",), order={"post": MUTATE}
    ),
    "api/workflows/<int:workflow_id>/chat/messages/<int:message_id>/switch/": Entry(
        API, lambda w: f"{chat_api(w)}messages/{w.user_message_id}/switch/", ("post",), order={"post": MUTATE}
    ),
    "api/workflows/<int:workflow_id>/chat/messages/<int:message_id>/feedback/": Entry(
        API,
        lambda w: f"{chat_api(w)}messages/{w.assistant_message_id}/feedback/",
        ("post",),
        bodies={"post": {"rating": "good"}},
    ),
    "api/workflows/<int:workflow_id>/chat/runs/<int:run_id>/": Entry(
        API, lambda w: f"{chat_api(w)}runs/{w.run_id}/", ("get",)
    ),
    "api/workflows/<int:workflow_id>/chat/runs/<int:run_id>/stop/": Entry(
        API, lambda w: f"{chat_api(w)}runs/{w.run_id}/stop/", ("post",)
    ),
    "api/workflows/<int:workflow_id>/chat/runs/<int:run_id>/memory/": Entry(
        API, lambda w: f"{chat_api(w)}runs/{w.run_id}/memory/", ("get",)
    ),
    "api/workflows/<int:workflow_id>/chat/runs/<int:run_id>/request/": Entry(
        API, lambda w: f"{chat_api(w)}runs/{w.run_id}/request/", ("get",)
    ),
    "api/workflows/<int:workflow_id>/chat/runs/<int:run_id>/memory/undo/": Entry(
        API, lambda w: f"{chat_api(w)}runs/{w.run_id}/memory/undo/", ("post",)
    ),
    "api/workflows/<int:workflow_id>/chat/messages/<int:message_id>/branch-memory/": Entry(
        API, lambda w: f"{chat_api(w)}messages/{w.user_message_id}/branch-memory/", ("get", "post")
    ),
    "api/workflows/<int:workflow_id>/chat/clear/": Entry(
        API, lambda w: chat_api(w) + "clear/", ("post",), order={"post": DESTROY}
    ),
    # --- attached files --------------------------------------------------------------------------------------
    # The upload takes multipart only: the matrix's JSON body is refused as such (415), after the caller is checked.
    "api/files/": Entry(API, lambda w: "/api/files/", ("post",), bodies={"post": {}}),
    "api/files/<int:file_id>/": Entry(API, owner_file, ("get",)),
    # --- pages under a workflow -----------------------------------------------------------------------------
    "workflows/<int:workflow_id>/": Entry(PAGE, page, ("get",)),
    "workflows/new/": Entry(PAGE, lambda w: "/workflows/new/", ("post",), bodies={"post": {"template": "blank"}}),
    "workflows/import/": Entry(
        PAGE, lambda w: "/workflows/import/", ("post",), bodies={"post": {"document_text": '{"graph": {}}'}}
    ),
    "workflows/<int:workflow_id>/rename/": Entry(
        PAGE, lambda w: page(w) + "rename/", ("post",), bodies={"post": {"name": WORLD_NAME}}, order={"post": MUTATE}
    ),
    "workflows/<int:workflow_id>/duplicate/": Entry(PAGE, lambda w: page(w) + "duplicate/", ("post",)),
    # A workflow of the owner's made for the call: the API's DELETE already takes the world's workflow last.
    "workflows/<int:workflow_id>/delete/": Entry(
        PAGE, lambda w: f"/workflows/{spare_workflow(w)}/delete/", ("get", "post")
    ),
    "workflows/<int:workflow_id>/runs/": Entry(PAGE, lambda w: page(w) + "runs/", ("get",)),
    "workflows/<int:workflow_id>/runs/<str:firing_id>/": Entry(
        PAGE, lambda w: f"{page(w)}runs/{firing_of_run(w)}/", ("get",)
    ),
    "workflows/<int:workflow_id>/context/": Entry(PAGE, lambda w: page(w) + "context/", ("get",)),
    "workflows/<int:workflow_id>/context/clear/": Entry(
        PAGE,
        lambda w: page(w) + "context/clear/",
        ("post",),
        bodies={"post": lambda w: {"node": w.context_node_id}},
        order={"post": DESTROY},
    ),
    "workflows/<int:workflow_id>/memory/<str:node_id>/": Entry(PAGE, mem_page, ("get",)),
    "workflows/<int:workflow_id>/memory/<str:node_id>/new/": Entry(
        PAGE, lambda w: mem_page(w) + "new/", ("post",), bodies={"post": {"content": "typed in the panel"}}
    ),
    "workflows/<int:workflow_id>/memory/<str:node_id>/items/<int:item_id>/edit/": Entry(
        PAGE,
        lambda w: f"{mem_page(w)}items/{w.items['page_forget']}/edit/",
        ("post",),
        bodies={"post": {"content": "edited in the panel", "expected_version": 1}},
        order={"post": MUTATE},
    ),
    "workflows/<int:workflow_id>/memory/<str:node_id>/items/<int:item_id>/forget/": Entry(
        PAGE,
        lambda w: f"{mem_page(w)}items/{w.items['page_forget']}/forget/",
        ("post",),
        bodies={"post": {"expected_version": 2}},
        order={"post": DESTROY},
    ),
    "workflows/<int:workflow_id>/memory/<str:node_id>/clear/": Entry(
        PAGE,
        lambda w: mem_page(w) + "clear/",
        ("get", "post"),
        bodies={"post": {"confirm": "yes"}},
        order={"post": LAST},
    ),
    "workflows/<int:workflow_id>/memory/<str:node_id>/history/": Entry(
        PAGE, lambda w: mem_page(w) + "history/", ("get",)
    ),
    "workflows/<int:workflow_id>/memory/<str:node_id>/items/<int:item_id>/history/": Entry(
        PAGE, lambda w: f"{mem_page(w)}items/{w.items['page_forget']}/history/", ("get",)
    ),
    # A stale expected_version: the owner is served (told it changed meanwhile) and nothing is restored.
    "workflows/<int:workflow_id>/memory/<str:node_id>/items/<int:item_id>/restore/": Entry(
        PAGE,
        lambda w: f"{mem_page(w)}items/{w.items['page_forget']}/restore/",
        ("post",),
        bodies={"post": {"version": 1, "expected_version": 999}},
    ),
    "workflows/<int:workflow_id>/chat/": Entry(PAGE, lambda w: page(w) + "chat/", ("get",)),
    # A webhook trigger's address: its hint, and Make/Regenerate (shown once).
    "api/workflows/<int:workflow_id>/hooks/<str:node_id>/": Entry(
        API, lambda w: f"{wf(w)}hooks/{webhook_node(w)}/", ("get", "post"), order={"post": MUTATE}
    ),
}

NOT_UNDER_A_WORKFLOW = {
    "",
    "settings/token/",
    "settings/usage/",
    "settings/password/",
    "api/workflows/",
    "api/workflows/import/",
    "api/schema/",
    "api/docs/",
    "api/tokens/",
    "api/usage/",
    "api/settings/conversations/",
    "api/node-types/",
    "workflows/new/",
    "workflows/import/",
    # An owner's own provider keys: another owner reaching these URLs sees and changes only their own keys.
    "settings/provider-keys/",
    "api/provider-keys/",
    "api/provider-keys/<str:provider>/",
    "api/provider-keys/<str:provider>/test/",
    # An owner's own secrets, and the operator's list of stdio MCP servers (names only, the same for everybody).
    "api/secrets/",
    "api/secrets/<str:name>/",
    "api/mcp-servers/stdio/",
    # An upload names nothing of anybody's: it makes a file of the caller's own.
    "api/files/",
}
# The catch-all socket route refuses every path with 4404 (tests/security/test_sockets.py); nobody is admitted.
REFUSING_SOCKET_ROUTES = {""}

SOCKETS: dict[str, Callable[[World], str]] = {
    "ws/workflows/<int:workflow_id>/": lambda w: f"/ws/workflows/{w.workflow.pk}/",
}

# Admin pages: every pattern Django admin generates is one of these kinds (by URL name).
ADMIN_SITE_NAMES = {"index", "logout", "password_change", "password_change_done", "autocomplete", "app_list"}
ADMIN_PUBLIC_NAMES = {"login", "jsi18n"}  # the admin login form and its translations are for everybody
ADMIN_MODEL_SUFFIXES = ("_changelist", "_add", "_history", "_delete", "_change", "_password_change")
ADMIN_UNNAMED = {"<path:object_id>/", "(?P<url>.*)$", "r/<path:content_type_id>/<path:object_id>/"}
# Our own admin views, behind admin_view like the generated ones (staff only; the POST also needs the model's change
# permission): tests/memory/test_admin.py checks anonymous, owners and view-only staff.
ADMIN_CUSTOM_NAMES = {"memory_memoryitem_restore"}


def walk(resolver=None, prefix: str = ""):
    for pattern in (resolver or get_resolver()).url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from walk(pattern, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern


def implemented_methods(pattern: URLPattern) -> set[str] | None:
    view_class = getattr(pattern.callback, "view_class", None) or getattr(pattern.callback, "cls", None)
    if view_class is None:
        return None
    return {m for m in ALL_METHODS if hasattr(view_class, m)}


def test_every_route_has_a_matrix_entry():
    from opencompany.routing import websocket_urlpatterns

    missing, stale, wrong_methods = [], set(MATRIX), []
    for route, pattern in walk():
        if route.startswith("admin/"):
            name = pattern.name or ""
            tail = route.removeprefix("admin/")
            known = (
                name in ADMIN_SITE_NAMES
                or name in ADMIN_PUBLIC_NAMES
                or name in ADMIN_CUSTOM_NAMES
                or name.endswith(ADMIN_MODEL_SUFFIXES)
                or any(tail.endswith(unnamed) for unnamed in ADMIN_UNNAMED)
            )
            if not known:
                missing.append(route)
            continue
        if route not in MATRIX:
            missing.append(route)
            continue
        stale.discard(route)
        methods = implemented_methods(pattern)
        if MATRIX[route].kind == API and methods is not None and methods != set(MATRIX[route].methods):
            wrong_methods.append((route, sorted(methods), sorted(MATRIX[route].methods)))
    for pattern in websocket_urlpatterns:
        if str(pattern.pattern) not in SOCKETS and str(pattern.pattern) not in REFUSING_SOCKET_ROUTES:
            missing.append("websocket " + str(pattern.pattern))
    assert not missing, f"routes without an access-matrix entry (add them to MATRIX): {missing}"
    assert not stale, f"matrix entries for routes that no longer exist: {sorted(stale)}"
    assert not wrong_methods, f"handlers whose methods differ from the matrix: {wrong_methods}"


def call(client, method: str, url: str, body: dict | None, *, kind: str):
    if kind == API:
        return getattr(client, method)(url, body, format="json") if body is not None else getattr(client, method)(url)
    return getattr(client, method)(url, body or {})


def api_client(token: str | None) -> APIClient:
    client = APIClient()
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def page_client(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def shows_owner_data(response) -> bool:
    content = response.content.decode(errors="replace")
    return WORLD_NAME in content or WORLD_FACT in content


@pytest.mark.django_db(transaction=True)
def test_anonymous_and_other_owners_are_refused_and_the_owner_is_served(world):
    problems: list[str] = []
    anonymous = {API: api_client(None), PAGE: page_client()}
    intruder = {API: api_client(world.intruder_token), PAGE: page_client(world.intruder)}
    owner = {API: api_client(world.owner_token), PAGE: page_client(world.owner)}
    owner_session_api = APIClient()
    owner_session_api.force_login(world.owner)
    owner_calls = []

    for route, entry in MATRIX.items():
        url = entry.url(world)
        if entry.kind == STAFF:
            for caller in (page_client(), page_client(world.intruder), page_client(world.owner)):
                response = call(caller, "get", url, None, kind=PAGE)
                if response.status_code != 404:
                    problems.append(f"staff-only GET {route}: {response.status_code} for a non-staff caller")
            continue
        if entry.kind == CAPABILITY:
            for caller in (page_client(), page_client(world.intruder), page_client(world.owner)):
                for method in entry.methods:
                    response = call(caller, method, url, None, kind=PAGE)
                    if response.status_code != 404 or shows_owner_data(response):
                        problems.append(f"made-up capability {method.upper()} {route}: {response.status_code}")
            continue
        if entry.kind == PUBLIC:
            for method in entry.methods:
                response = call(page_client(), method, url, None, kind=PAGE)
                # /healthz may say 503 (no worker heartbeat in this test); it must not refuse or leak.
                if response.status_code in (401, 403, 404) or response.status_code > 503 or shows_owner_data(response):
                    problems.append(f"public {method.upper()} {route}: {response.status_code}")
            continue

        # Given nobody logged in: refused before anything is looked up.
        for method in entry.methods:
            response = call(anonymous[entry.kind], method, url, entry.body(method, world), kind=entry.kind)
            if entry.kind == API:
                ok = response.status_code == 401 and response.json().get("code")
            else:
                ok = response.status_code == 302 and response["Location"].startswith("/login/")
            if not ok or shows_owner_data(response):
                problems.append(f"anonymous {method.upper()} {route}: {response.status_code}")

        # Given another owner: every handled method is a 404 exactly like a missing id; nothing else leaks.
        for method in ALL_METHODS:
            if route in NOT_UNDER_A_WORKFLOW:
                break  # nothing of the owner's in the URL: another owner is simply an owner there
            response = call(intruder[entry.kind], method, url, entry.body(method, world), kind=entry.kind)
            expected = {404} if method in entry.methods else {404, 405}
            if response.status_code not in expected or shows_owner_data(response):
                problems.append(f"other owner {method.upper()} {route}: {response.status_code}")
            elif entry.kind == API and response.status_code == 404 and response.json().get("code") != "not_found":
                problems.append(f"other owner {method.upper()} {route}: 404 without code not_found")

        owner_calls += [(entry.order.get(m, READ), route, entry, m) for m in entry.methods]

    # When the owner calls everything (readers first, destroyers last): served, never refused, never a 5xx.
    for _, route, entry, method in sorted(owner_calls, key=lambda c: c[0]):
        caller = owner_session_api if method in entry.session_only else owner[entry.kind]
        response = call(caller, method, entry.url(world), entry.body(method, world), kind=entry.kind)
        refused = response.status_code in (401, 403, 404) or response.status_code >= 500
        if entry.kind == PAGE and response.status_code == 302 and response["Location"].startswith("/login/"):
            refused = True
        if refused:
            problems.append(f"owner {method.upper()} {route}: {response.status_code} {response.content[:200]!r}")

    assert not problems, "\n".join(problems)


@pytest.mark.django_db(transaction=True)
def test_the_workflow_socket_admits_only_the_owner(world):
    # The product's sockets share one channel layer per process; the owner's (accepted) socket goes last.
    for route, url_of in SOCKETS.items():
        url = url_of(world)
        missing = url.replace(f"/{world.workflow.pk}/", f"/{world.workflow.pk + 10_000}/")
        refused = (("anonymous", None, url), ("other owner", world.intruder, url), ("missing id", world.owner, missing))
        for who, user, path in refused:
            with open_socket(path, user=user) as socket:
                assert not socket.connect(), f"{who} admitted on {route}"
        with open_socket(url, user=world.owner) as socket:
            assert socket.connect(), f"owner refused on {route}"
            assert socket.receive()["type"] == "hello"


def admin_urls(world: World) -> list[str]:
    """The changelist, add, change, history and delete page of every registered model (with a real object)."""
    urls = ["/admin/", "/admin/password_change/"]
    for model in admin.site._registry:
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        urls.append(base)
        urls.append(base + "add/")
        first = model._default_manager.order_by("pk").first()
        if first is not None:
            urls += [f"{base}{first.pk}/change/", f"{base}{first.pk}/history/", f"{base}{first.pk}/delete/"]
    app_labels = {model._meta.app_label for model in admin.site._registry}
    urls += [f"/admin/{label}/" for label in sorted(app_labels)]
    return urls


@pytest.mark.django_db(transaction=True)
def test_admin_is_for_staff_only(world):
    problems = []
    staff = page_client(world.staff)
    for url in admin_urls(world):
        for who, client in (("anonymous", page_client()), ("owner (not staff)", page_client(world.owner))):
            response = client.get(url)
            if response.status_code != 302 or not response["Location"].startswith("/admin/login/"):
                problems.append(f"{who} GET {url}: {response.status_code}")
            response = client.post(url, {})
            if response.status_code not in (302, 403) or (
                response.status_code == 302 and not response["Location"].startswith("/admin/login/")
            ):
                problems.append(f"{who} POST {url}: {response.status_code}")
        response = staff.get(url)
        # Add and delete pages answer 403 for models whose admin forbids them (history is written by services).
        allowed = {200, 403} if url.endswith(("/add/", "/delete/")) else {200}
        if response.status_code not in allowed:
            problems.append(f"staff GET {url}: {response.status_code}")
    assert not problems, "\n".join(problems)


OBJECT_IDS = ("<int:item_id>", "<int:message_id>", "<int:run_id>")


@pytest.mark.django_db(transaction=True)
def test_an_objects_id_under_another_workflow_is_a_404(world):
    """Objects below a workflow are looked up through it: the intruder's own workflow id with the owner's item,
    message or run id finds nothing (and shows nothing), for every method."""
    problems = []
    intruder = {API: api_client(world.intruder_token), PAGE: page_client(world.intruder)}
    theirs, mine = f"/workflows/{world.intruder_workflow.pk}/", f"/workflows/{world.workflow.pk}/"
    for route, entry in MATRIX.items():
        if not any(part in route for part in OBJECT_IDS):
            continue
        url = entry.url(world).replace(mine, theirs)
        for method in entry.methods:
            response = call(intruder[entry.kind], method, url, entry.body(method, world), kind=entry.kind)
            if response.status_code != 404 or shows_owner_data(response):
                problems.append(f"{method.upper()} {route} with the owner's id: {response.status_code}")
    assert not problems, "\n".join(problems)


@pytest.mark.django_db(transaction=True)
def test_every_page_form_needs_its_csrf_token(world):
    """Session-authenticated POSTs without the CSRF token are refused (pages, and the API used with a session)."""
    problems = []
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.owner)
    for route, entry in MATRIX.items():
        if entry.kind not in (PAGE, API):
            continue
        for method in entry.methods:
            if method == "get":
                continue
            response = call(client, method, entry.url(world), entry.body(method, world), kind=PAGE)
            if response.status_code != 403:
                problems.append(f"{method.upper()} {route} without a CSRF token: {response.status_code}")
    assert not problems, "\n".join(problems)
