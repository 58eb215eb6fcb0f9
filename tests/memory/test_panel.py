import pytest
from django.test import Client

from memory.listeners import register_memory_edit_listener, unregister_memory_edit_listener
from memory.models import MemoryItem
from tests.memory.helpers import NODE

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(owner):
    client = Client()
    client.force_login(owner)
    return client


@pytest.fixture
def panel(workflow):
    return f"/workflows/{workflow.pk}/memory/{NODE}/"


def _item(call, content="Likes <script>alert(1)</script> jazz", **extra):
    return call({"operation": "remember", "content": content, **extra})["item"]


def test_panel_lists_escaped_items_with_pagination_and_search(browser, panel, call):
    item = _item(call)
    for n in range(25):
        _item(call, f"filler note {n}")
    page = browser.get(panel)
    html = page.content.decode()
    assert page.status_code == 200
    assert "filler note 24" in html and "Next page" in html
    second = browser.get(panel + "?" + html.split(f"{panel}?", 1)[1].split('"', 1)[0].replace("&amp;", "&"))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in second.content.decode()
    assert "<script>alert(1)</script>" not in second.content.decode()
    found = browser.get(panel, {"q": "jazz"}).content.decode()
    assert f'id="memory-{item["id"]}"' in found and "filler note" not in found


def test_edit_checks_the_version_and_leaves_a_chat_note(browser, panel, call, django_capture_on_commit_callbacks):
    item = _item(call, "old text")
    edits = []
    listener = register_memory_edit_listener(edits.append)
    try:
        url = f"{panel}items/{item['id']}/edit/"
        with django_capture_on_commit_callbacks(execute=True):
            response = browser.post(url, {"expected_version": 1, "content": "new text", "title": "", "tags": "a, b"})
        assert response.status_code == 302
        stored = MemoryItem.objects.get(pk=item["id"])
        assert (stored.content, stored.version, stored.tags) == ("new text", 2, ["a", "b"])
        assert [(e.note_key, e.operation, e.version, e.actor.startswith("owner:")) for e in edits] == [
            (f"memory:{item['id']}", "update", 2, True)
        ]
        # a stale form is refused and says so, keeping the owner's draft beside the current version
        stale = browser.post(url, {"expected_version": 1, "content": "my draft", "title": "", "tags": ""})
        html = stale.content.decode()
        assert stale.status_code == 409 and "changed while you were editing" in html
        assert '<textarea name="content" rows="4" required>my draft</textarea>' in html
        assert 'id="conflict-current">new text</p>' in html
        assert '<input type="hidden" name="expected_version" value="2">' in html
        assert MemoryItem.objects.get(pk=item["id"]).content == "new text"
        # saving the draft again (from the conflict form) replaces the current version on purpose
        assert browser.post(url, {"expected_version": 2, "content": "my draft"}).status_code == 302
        assert MemoryItem.objects.get(pk=item["id"]).content == "my draft"
    finally:
        unregister_memory_edit_listener(listener)


def test_agent_writes_leave_no_chat_note(call, django_capture_on_commit_callbacks):
    edits = []
    listener = register_memory_edit_listener(edits.append)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            _item(call)
        assert edits == []
    finally:
        unregister_memory_edit_listener(listener)


def test_forget_and_create(browser, panel, call):
    item = _item(call)
    assert browser.post(f"{panel}items/{item['id']}/forget/", {"expected_version": 7}).status_code == 302
    assert MemoryItem.objects.filter(pk=item["id"]).exists()
    browser.post(f"{panel}items/{item['id']}/forget/", {"expected_version": 1})
    assert not MemoryItem.objects.filter(pk=item["id"]).exists()
    browser.post(f"{panel}new/", {"content": "from the panel", "tags": "x"})
    assert MemoryItem.objects.get().content == "from the panel"


def test_clear_needs_confirmation(browser, panel, call):
    _item(call)
    confirm = browser.get(f"{panel}clear/")
    assert confirm.status_code == 200 and "Clear Memory" in confirm.content.decode()
    browser.post(f"{panel}clear/", {})
    assert MemoryItem.objects.count() == 1
    browser.post(f"{panel}clear/", {"confirm": "yes"})
    assert MemoryItem.objects.count() == 0


def test_csrf_is_enforced(owner, panel, call):
    item = _item(call)
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(f"{panel}items/{item['id']}/forget/", {"expected_version": 1}).status_code == 403
    assert client.post(f"{panel}clear/", {"confirm": "yes"}).status_code == 403
    assert MemoryItem.objects.count() == 1


def test_other_owner_gets_404_and_anonymous_is_sent_to_login(other_owner, panel, call):
    item = _item(call)
    intruder = Client()
    intruder.force_login(other_owner)
    assert intruder.get(panel).status_code == 404
    assert intruder.post(f"{panel}items/{item['id']}/forget/", {"expected_version": 1}).status_code == 404
    assert intruder.post(f"{panel}clear/", {"confirm": "yes"}).status_code == 404
    assert Client().get(panel).status_code == 302
    assert MemoryItem.objects.count() == 1
