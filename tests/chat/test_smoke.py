import pytest

from chat.selectors import chat_thread
from chat.services import chat_message_send

pytestmark = pytest.mark.django_db(transaction=True)


def test_send_answers(owner, inline):
    from tests.chat.conftest import chat_workflow

    workflow, generation, ids = chat_workflow(owner)
    message, run, created = chat_message_send(workflow=workflow, text="hello")
    run.refresh_from_db()
    assert run.state == "finished", (run.error_code, run.error_message)
    thread = chat_thread(workflow=workflow)
    print(thread["messages"])
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant"]
