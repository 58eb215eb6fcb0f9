"""Random input never crashes a handler: the memory tool always answers (a result or a coded error), and the chat
handlers answer random texts and ids with a result or a refusal that carries a code, never a 500."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import ServiceError
from memory.tool import OPERATIONS, memory_tool_call
from tests.chat.helpers import chat_workflow

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Any UTF-8 text but NUL (NUL has its own tests below: PostgreSQL text cannot hold it).
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=60)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
ARGUMENT_NAMES = [
    "content",
    "title",
    "category",
    "tags",
    "expires_at",
    "query",
    "categories",
    "limit",
    "cursor",
    "memory_id",
    "expected_version",
    "patch",
]
tool_arguments = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"operation": st.sampled_from(OPERATIONS) | texts},
        optional={name: json_values for name in ARGUMENT_NAMES},
    ),
    texts,  # the raw JSON string a provider may send
)


def is_coded_error(result) -> bool:
    error = result.get("error") if isinstance(result, dict) else None
    return (
        isinstance(error, dict)
        and all(isinstance(error.get(key), str) and error[key] for key in ("code", "message", "hint"))
        and set(result) == {"error"}
    )


@pytest.fixture
def memory_call(owner):
    from workflows.models import Workflow

    node = "1:simpleMemory:1"
    workflow = Workflow.objects.create(
        owner=owner, name="fuzz", graph={"nodes": [{"id": node, "type": "simpleMemory", "params": {}}], "edges": []}
    )
    keys = iter(range(10**9))

    def call(arguments):
        return memory_tool_call(
            owner=owner,
            workflow=workflow,
            node_id=node,
            arguments=arguments,
            idempotency_key=f"fuzz:{next(keys)}",
            actor="agent:fuzz",
        )

    return call


@FUZZ
@given(arguments=tool_arguments)
def test_the_memory_tool_answers_any_arguments_with_a_result_or_a_coded_error(memory_call, arguments):
    result = memory_call(arguments)
    assert isinstance(result, dict) and result
    if "error" in result:
        # internal_error is the tool's catch-all for a crash underneath: bad arguments must be named as such.
        assert is_coded_error(result) and result["error"]["code"] != "internal_error", result


# PostgreSQL text cannot hold NUL: memory refuses it as bad arguments before the database (it was a 500 once).
@pytest.mark.parametrize(
    "arguments",
    [
        {"operation": "remember", "content": "a\x00b"},
        {"operation": "recall", "query": "a\x00b"},
        {"operation": "list", "categories": ["a\x00b"]},
    ],
)
def test_a_nul_byte_in_the_memory_tools_text_is_refused_as_bad_arguments(memory_call, arguments):
    result = memory_call(arguments)
    assert is_coded_error(result) and result["error"]["code"] == "invalid_arguments", result


@pytest.mark.parametrize(
    "where",
    ["api ?q=", "api ?tag=", "api ?category=", "panel ?q=", "panel new item"],
)
def test_a_nul_byte_in_memory_text_is_refused_not_a_500(owner, owner_client, client, where):
    workflow, _, ids = chat_workflow(owner, memory=True, start=False)
    api = f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/items/"
    panel = f"/workflows/{workflow.pk}/memory/{ids['mem']}/"
    owner_client.raise_request_exception = False
    client.raise_request_exception = False
    client.force_login(owner)
    nul = "a\x00b"
    response = {
        "api ?q=": lambda: owner_client.get(api, {"q": nul}),
        "api ?tag=": lambda: owner_client.get(api, {"tag": nul}),
        "api ?category=": lambda: owner_client.get(api, {"category": nul}),
        "panel ?q=": lambda: client.get(panel, {"q": nul}),
        "panel new item": lambda: client.post(panel + "new/", {"content": nul}),
    }[where]()
    # Refused where it enters (core.text, one check for the API and the pages alike): a JSON 400.
    assert response.status_code == 400 and response.json()["code"] == "invalid_text", response.content


ids = st.one_of(st.integers(min_value=-(2**63), max_value=2**63), texts)


@FUZZ
@given(text=st.one_of(texts, json_values), client_id=st.one_of(st.none(), json_values), revision=json_values)
def test_chat_send_answers_random_bodies_with_a_result_or_a_coded_refusal(
    owner, owner_client, text, client_id, revision
):
    workflow, _, _ = chat_world(owner)
    body = {"text": text, "client_message_id": client_id, "expected_revision": revision}
    response = owner_client.post(f"/api/workflows/{workflow.pk}/chat/messages/", body, format="json")
    assert response.status_code < 500
    if response.status_code >= 400:
        assert response.json()["code"], response.json()


@FUZZ
@given(
    action=st.sampled_from(["edit", "regenerate", "switch", "feedback", "run", "stop"]),
    target=ids,
    body=st.dictionaries(st.sampled_from(["text", "rating", "expected_revision"]), json_values, max_size=3),
)
def test_chat_handlers_answer_random_ids_and_bodies_with_a_result_or_a_coded_refusal(
    owner, owner_client, action, target, body
):
    workflow, _, _ = chat_world(owner)
    base = f"/api/workflows/{workflow.pk}/chat/"
    target = str(target).replace("/", "%2F").replace("?", "%3F").replace("#", "%23") or "0"
    if action in ("run", "stop"):
        path = f"{base}runs/{target}/" + ("stop/" if action == "stop" else "")
    else:
        path = f"{base}messages/{target}/{action}/"
    response = owner_client.get(path) if action == "run" else owner_client.post(path, body, format="json")
    assert response.status_code < 500
    # An id that is not a number does not match the URL at all (Django's plain 404); everything else is coded.
    if response.status_code >= 400 and response.get("Content-Type", "").startswith("application/json"):
        assert response.json()["code"], response.content


@FUZZ
@given(
    text=texts,
    message_id=st.just("real") | st.integers(min_value=-5, max_value=2**40) | texts,
    run_id=st.just("real") | ids,
    rating=json_values,
)
def test_chat_services_refuse_random_input_with_a_service_error(owner, text, message_id, run_id, rating):
    from chat.models import ChatMessage, ChatRun
    from chat.services.branches import chat_message_edit, chat_message_regenerate, chat_message_switch
    from chat.services.feedback import chat_feedback_set
    from chat.services.runs import chat_run_stop

    workflow, _, _ = chat_world(owner)
    if not ChatMessage.objects.filter(session__workflow=workflow).exists():
        from chat.services.runs import chat_message_send

        chat_message_send(workflow=workflow, text="a real message")  # its run stays pending: no commit here
    if message_id == "real":
        message_id = ChatMessage.objects.filter(session__workflow=workflow).latest("id").pk
    if run_id == "real":
        run_id = ChatRun.objects.filter(session__workflow=workflow).latest("id").pk
    for attempt in (
        lambda: chat_message_edit(workflow=workflow, message_id=message_id, text=text),
        lambda: chat_message_switch(workflow=workflow, message_id=message_id),
        lambda: chat_message_regenerate(workflow=workflow, message_id=message_id),
        lambda: chat_feedback_set(workflow=workflow, message_id=message_id, rating=rating),
        lambda: chat_run_stop(workflow=workflow, run_id=run_id),
    ):
        try:
            attempt()
        except ServiceError as exc:
            assert exc.code and exc.message


_worlds: dict[int, tuple] = {}


def chat_world(owner):
    """One chat workflow per test (hypothesis reuses the function's fixtures across examples)."""
    if owner.pk not in _worlds or not type(_worlds[owner.pk][0]).objects.filter(pk=_worlds[owner.pk][0].pk).exists():
        _worlds[owner.pk] = chat_workflow(owner, memory=True)
    return _worlds[owner.pk]
