"""The workflow builder in Debian's Chromium (Playwright) against the real web server, Celery worker and broker:
from an empty account, create a workflow, drag a chat trigger, an offline agent and a Memory onto the canvas, wire
them, add a Context from the agent, save, see MULTIPLE_CONTEXTS appear and go, Start, chat (the answer uses the
memory tool), Test run, Reset with its confirmation, delete. A second test: a revision conflict is shown and
overwrites nothing; a deleted Context stays deleted. Screenshots of each step land in test-artifacts/builder/."""

from __future__ import annotations

import json
import re

import pytest

from tests.browser.helpers import NODE, api, drag_from_palette, wire
from tests.processes import REPO_ROOT, chromium_page

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "builder"
PASSWORD = "pw-for-builder-1"


@pytest.fixture
def cookie(make_user):
    # Made before the browser starts: Playwright's sync API runs an event loop, and the ORM refuses to run in one.
    from tests.realtime import session_cookie_for

    owner = make_user("builder-owner", password=PASSWORD)
    name, value = session_cookie_for(owner).split("=", 1)
    return {"name": name, "value": value}


@pytest.fixture
def browser_page(tmp_path):
    with chromium_page(tmp_path / "profile", width=1280, height=900) as page:
        yield page


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def edges_count(page) -> int:
    return page.locator("#canvas svg.connection").count()


def test_build_run_and_delete_a_workflow_from_an_empty_account(cookie, stack, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    page.context.add_cookies([{**cookie, "url": stack}])
    page.goto(stack + "/")
    expect(page.get_by_text("You have no workflows yet")).to_be_visible()
    expect(page.get_by_label("Demo assistant")).to_be_visible()
    shot(page, "01-empty-home")

    # New workflow (blank) -> the editor.
    page.get_by_label("Blank canvas").check()
    page.get_by_label("Name (optional)").first.fill("My first workflow")
    page.get_by_role("button", name="Create and open the editor").click()
    expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
    expect(page.locator("#workflow-name")).to_have_text("My first workflow")
    # The palette comes from /api/node-types/: the Context (systemManaged) is not offered.
    palette = page.locator(".palette-item")
    types = sorted(palette.evaluate_all("items => items.map(i => i.dataset.type)"))
    assert types == ["agent", "chatTrigger", "mcpServer", "scheduleTrigger", "simpleMemory", "todos", "webhookTrigger"]
    shot(page, "02-blank-editor")

    # Drag a chat trigger, an agent and a Memory onto the canvas.
    drag_from_palette(page, "chatTrigger", 60, 60)
    drag_from_palette(page, "agent", 420, 140)
    drag_from_palette(page, "simpleMemory", 80, 420)
    expect(page.locator(NODE)).to_have_count(3)
    expect(page.locator("#save-state")).to_have_text("Unsaved changes")
    agent = f"{NODE}[data-type='agent']"
    trigger = f"{NODE}[data-type='chatTrigger']"
    memory = f"{NODE}[data-type='simpleMemory']"
    expect(page.locator(agent)).to_contain_text("offline")
    shot(page, "03-three-nodes")

    # Wire them; a tool output dropped on the agent's message input is refused.
    wire(page, trigger, "output-main", agent, "input-main")
    wire(page, memory, "output-tool", agent, "input-tools")
    expect(page.locator("#canvas svg.connection")).to_have_count(2)
    wire(page, memory, "output-tool", agent, "input-main")
    expect(page.locator("#banner")).to_contain_text("Not connected")
    expect(page.locator("#canvas svg.connection")).to_have_count(2)
    shot(page, "04-wired-and-refused")

    # Add a Context from the agent's context handle.
    page.locator(f"{agent} .add-context").click()
    expect(page.locator(f"{NODE}[data-type='context']")).to_have_count(1)
    expect(page.locator("#canvas svg.connection")).to_have_count(3)
    expect(page.locator(f"{agent} .add-context")).to_be_hidden()
    shot(page, "05-context-added")

    # Save: the draft is replaced by the normalized graph (canonical ids from the server's aliases).
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#save-state")).to_have_text("Saved · revision 2")
    ids = page.locator(NODE).evaluate_all("nodes => nodes.map(n => n.dataset.nodeId)")
    assert all(re.fullmatch(r"\d+:(agent|chatTrigger|simpleMemory|context):1", i) for i in ids), ids
    expect(page.locator("#issues")).to_contain_text("No problems found.")
    shot(page, "06-saved")
    # Saved nodes link to their panels: the Context to its Context panel, the Memory to its Memory panel.
    workflow_id = int(re.search(r"/workflows/(\d+)/", page.url).group(1))
    page.locator(f"{NODE}[data-type='context']").click(position={"x": 60, "y": 12})
    expect(page.get_by_role("link", name="Open Context panel")).to_have_attribute(
        "href", f"/workflows/{workflow_id}/context/?node={workflow_id}%3Acontext%3A1"
    )
    page.locator(memory).click(position={"x": 100, "y": 12})
    expect(page.get_by_role("link", name="Open Memory panel")).to_have_attribute(
        "href", f"/workflows/{workflow_id}/memory/{workflow_id}%3AsimpleMemory%3A1/"
    )

    # The agent has a Context: the side panel offers no second one (as the node's "+ Context" does not).
    page.locator(agent).click(position={"x": 100, "y": 12})
    expect(page.locator("#node-panel")).to_contain_text("Delete node")
    expect(page.get_by_role("button", name="Add Context")).to_have_count(0)
    # A second Context wired to the same agent by hand: MULTIPLE_CONTEXTS is marked live; deleting it clears it.
    first_agent = f"{NODE}[data-node-id$=':agent:1']"
    drag_from_palette(page, "agent", 560, 420)
    other_agent = f"{NODE}[data-type='agent']:not([data-node-id$=':agent:1'])"
    page.locator(f"{other_agent} .add-context").click()
    expect(page.locator(f"{NODE}[data-type='context']")).to_have_count(2)
    new_context = page.locator(f"{NODE}[data-type='context']:not([data-node-id$=':context:1'])")
    new_context_selector = f"{NODE}[data-type='context']:not([data-node-id$=':context:1'])"
    wire(page, new_context_selector, "output-context", first_agent, "input-context")
    expect(page.locator(first_agent)).to_have_attribute("data-issues", re.compile("MULTIPLE_CONTEXTS"), timeout=10_000)
    expect(page.locator("#issues")).to_contain_text("MULTIPLE_CONTEXTS")
    expect(page.locator(first_agent)).to_have_class(re.compile("has-error"))
    shot(page, "07-multiple-contexts")
    new_context.click(position={"x": 60, "y": 12})
    page.keyboard.press("Delete")
    page.locator(other_agent).click(position={"x": 100, "y": 12})
    page.keyboard.press("Delete")
    expect(page.locator(f"{NODE}[data-type='context']")).to_have_count(1)
    expect(page.locator(agent)).not_to_have_class(re.compile("has-error"), timeout=10_000)
    expect(page.locator("#issues")).to_contain_text("No problems found.")
    expect(page.locator("#save-state")).to_have_text("Saved · revision 2")  # back to what was saved
    shot(page, "08-context-removed")

    # Start, then chat: "remember: ..." makes the offline agent call the memory tool.
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#banner")).to_contain_text("Started generation 1")
    expect(page.locator("#run-state")).to_contain_text("Running: generation 1")
    shot(page, "09-started")
    page.get_by_role("link", name="Open chat").click()
    message = page.get_by_label("Message", exact=True)
    expect(message).to_be_visible()
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
    message.fill("remember: my favourite colour is teal")
    page.keyboard.press("Enter")
    answer = page.locator("#thread > li.msg.assistant:not(.streaming)")
    expect(answer).to_have_count(1, timeout=30_000)
    expect(answer.first).to_contain_text("teal")
    shot(page, "10-chat-answer")
    runs = api(page, "GET", f"/api/workflows/{workflow_id}/runs/")["body"]
    chat_run = next(r for r in runs if r["kind"] == "chat")
    detail = api(page, "GET", f"/api/workflows/{workflow_id}/runs/{chat_run['id']}/")["body"]
    assert [c["name"] for c in detail["tool_calls"]] == ["memory"] and not detail["tool_calls"][0]["is_error"]
    items = api(page, "GET", f"/api/workflows/{workflow_id}/memory/{workflow_id}:simpleMemory:1/items/")
    assert "teal" in json.dumps(items["body"]), items

    # Test run from the editor: the answer shows beside the canvas; generation 0 stores no conversation.
    page.goto(f"{stack}/workflows/{workflow_id}/")
    expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
    page.get_by_label(re.compile("^Test run")).fill("hello from the test run")
    page.get_by_role("button", name="Test run").click()
    expect(page.locator("#test-answer.done")).to_contain_text("hello from the test run", timeout=30_000)
    shot(page, "11-test-run")
    runs = api(page, "GET", f"/api/workflows/{workflow_id}/runs/?generation=0")["body"]
    assert len(runs) == 1 and runs[0]["state"] == "finished"

    # Reset, with a confirmation that says what it clears and what the Memory keeps.
    page.get_by_role("button", name="Reset…").click()
    dialog = page.locator("#reset-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("clears every agent's stored conversation (Context) and the chat thread")
    expect(dialog).to_contain_text("reset_policy “keep” — its items are kept")
    shot(page, "12-reset-confirmation")
    dialog.get_by_role("button", name="Reset").click()
    expect(page.locator("#banner")).to_contain_text("generation 2 is live")
    shot(page, "13-reset-done")
    items = api(page, "GET", f"/api/workflows/{workflow_id}/memory/{workflow_id}:simpleMemory:1/items/")
    assert "teal" in json.dumps(items["body"])  # reset_policy keep

    # The run history shows the chat answer and the test run.
    page.get_by_role("link", name="Run history", exact=True).click()
    expect(page.locator(".run-row")).to_have_count(2)
    shot(page, "14-run-history")

    # Delete it from the list, through its confirmation.
    page.goto(stack + "/")
    expect(page.locator(".workflow-row")).to_have_count(1)
    expect(page.locator(".workflow-row .state")).to_contain_text("Running · generation 2")
    shot(page, "15-list")
    page.get_by_role("link", name="Delete…").click()
    shot(page, "16-delete-confirmation")
    page.get_by_role("button", name="Delete the workflow").click()
    expect(page.get_by_text("You have no workflows yet")).to_be_visible()
    expect(page.locator(".flash")).to_contain_text("Deleted “My first workflow”")
    shot(page, "17-deleted")


def test_a_revision_conflict_overwrites_nothing_and_a_deleted_context_stays_deleted(cookie, stack, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    page.context.add_cookies([{**cookie, "url": stack}])
    page.goto(stack + "/")
    page.get_by_label("Demo assistant").check()
    page.get_by_role("button", name="Create and open the editor").click()
    expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
    expect(page.locator(NODE)).to_have_count(4)
    workflow_id = int(re.search(r"/workflows/(\d+)/", page.url).group(1))
    api_path = f"/api/workflows/{workflow_id}/"
    shot(page, "20-demo-template")

    # Delete the Context in the editor and save: the server keeps it deleted (save never restores a Context).
    page.locator(f"{NODE}[data-type='context']").click(position={"x": 60, "y": 12})
    page.keyboard.press("Backspace")
    expect(page.locator(f"{NODE}[data-type='context']")).to_have_count(0)
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#save-state")).to_have_text("Saved · revision 2")
    stored = api(page, "GET", api_path)["body"]
    assert [n["type"] for n in stored["graph"]["nodes"] if n["type"] == "context"] == []
    page.reload()
    expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
    expect(page.locator(f"{NODE}[data-type='context']")).to_have_count(0)

    # Someone else saves (another tab, the API): the editor's next save is refused and overwrites nothing.
    theirs = api(page, "GET", api_path)["body"]
    renamed = json.loads(json.dumps(theirs["graph"]))
    agent_node = next(n for n in renamed["nodes"] if n["type"] == "agent")
    agent_node["params"]["name"] = "Changed elsewhere"
    assert api(page, "PUT", api_path, {"graph": renamed, "revision": theirs["revision"]})["status"] == 200
    page.locator(f"{NODE}[data-type='agent']").click(position={"x": 100, "y": 12})
    # The agent's Name in the side panel (the header's Rename and "Workflow name" are the workflow's).
    page.locator("#node-form").get_by_label("Name", exact=True).fill("Mine instead")
    page.get_by_role("button", name="Save", exact=True).click()
    conflict = page.locator("#conflict-dialog")
    expect(conflict).to_be_visible()
    expect(conflict).to_contain_text("nothing was overwritten")
    shot(page, "21-conflict")
    stored = api(page, "GET", api_path)["body"]
    assert stored["revision"] == theirs["revision"] + 1
    assert next(n for n in stored["graph"]["nodes"] if n["type"] == "agent")["params"]["name"] == "Changed elsewhere"
    conflict.get_by_role("button", name="Reload the saved version").click()
    expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
    expect(page.locator(f"{NODE}[data-type='agent']")).to_contain_text("Changed elsewhere")
    shot(page, "22-reloaded")

    # Add teammate (on a draft with an unsaved change: it is saved first): the add_subagent service wires a new
    # agent as this one's tool, with a fresh Context of its own.
    page.locator(f"{NODE}[data-type='agent']").click(position={"x": 100, "y": 12})
    page.locator("#node-form").get_by_label("Name", exact=True).fill("Lead")
    page.get_by_role("button", name="Add teammate").click()
    expect(page.locator("#banner")).to_contain_text("Added a teammate")
    expect(page.locator("#banner")).to_contain_text("wired as Lead's tool")
    expect(page.locator(f"{NODE}[data-type='agent']")).to_have_count(2)
    expect(page.locator(f"{NODE}[data-type='context']")).to_have_count(1)
    stored = api(page, "GET", api_path)["body"]
    teammate = next(n for n in stored["graph"]["nodes"] if n["params"].get("name") == "Teammate")
    assert {(e["source"], e["targetHandle"]) for e in stored["graph"]["edges"] if e["target"] == teammate["id"]} == {
        (f"{workflow_id}:context:2", "input-context")
    }
    expect(page.locator("#save-state")).to_have_text(f"Saved · revision {stored['revision']}")
    shot(page, "23-teammate")


def test_the_editor_reads_at_390_px(cookie, stack, tmp_path):
    from playwright.sync_api import expect

    with chromium_page(tmp_path / "profile", width=390, height=844) as page:
        page.context.add_cookies([{**cookie, "url": stack}])
        page.goto(stack + "/")
        shot(page, "30-home-390")
        page.get_by_label("Demo assistant").check()
        page.get_by_role("button", name="Create and open the editor").click()
        expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 392, f"the page scrolls sideways at 390 px ({width})"
        # Keyboard basics: add a node from the palette with Enter, select it from the list, delete it.
        page.locator(".palette-item[data-type='todos']").focus()
        page.keyboard.press("Enter")
        expect(page.locator(f"{NODE}[data-type='todos']")).to_have_count(1)
        page.locator("#canvas").focus()
        page.keyboard.press("Delete")
        expect(page.locator(f"{NODE}[data-type='todos']")).to_have_count(0)
        shot(page, "31-editor-390")
        page.emulate_media(color_scheme="dark")
        shot(page, "32-editor-390-dark")


def test_a_type_registered_in_a_test_appears_in_the_palette_with_its_form(cookie, stack, browser_page):
    """The page has no list of its own: a type registered here (served as /api/node-types/ answers with it) shows up
    in the palette, draws its handles and gets a form from its params schema."""
    from playwright.sync_api import expect
    from pydantic import BaseModel, ConfigDict, Field

    from workflows.node_types import node_type_catalogue
    from workflows.nodes import KIND_TOOL, Handle, NodeSpec, register_node_spec, unregister_node_spec

    class WebhookParams(BaseModel):
        model_config = ConfigDict(extra="forbid")
        url: str = Field(description="Where to send the call.")
        retries: int = Field(3, ge=0, le=10)
        method: str = Field("POST", json_schema_extra={"enum": ["POST", "PUT"]})

    register_node_spec(
        NodeSpec(
            type="testWebhook",
            label="Webhook (test)",
            params_model=WebhookParams,
            outputs=(Handle("output-tool", KIND_TOOL, label="tool"),),
            tool_name="webhook",
            new_params={"url": "http://localhost/hook"},
            description="A tool type registered by this test only.",
        )
    )
    try:
        catalogue = node_type_catalogue()
    finally:
        unregister_node_spec("testWebhook")

    page = browser_page
    page.context.add_cookies([{**cookie, "url": stack}])
    page.route(
        re.compile(r".*/api/node-types/$"),
        lambda route: route.fulfill(status=200, content_type="application/json", body=json.dumps(catalogue)),
    )
    page.goto(stack + "/")
    page.get_by_role("button", name="Create and open the editor").click()
    expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
    item = page.locator(".palette-item[data-type='testWebhook']")
    expect(item).to_contain_text("Webhook (test)")
    drag_from_palette(page, "testWebhook", 200, 200)
    node = page.locator(f"{NODE}[data-type='testWebhook']")
    expect(node).to_have_count(1)
    expect(node.locator(".output[data-handle='output-tool']")).to_have_attribute("data-kind", "tool")
    form = page.locator("#node-form")
    expect(form.get_by_label("Url")).to_have_value("http://localhost/hook")
    expect(form.get_by_label("Retries")).to_have_value("3")
    expect(form.get_by_label("Method")).to_have_value("POST")
    expect(form).to_contain_text("Where to send the call.")
    form.get_by_label("Retries").fill("5")
    expect(page.locator("#save-state")).to_have_text("Unsaved changes")
    shot(page, "40-registered-type")
    # Leaving with unsaved changes asks first.
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.type), dialog.dismiss()))
    page.close(run_before_unload=True)
    for _ in range(200):  # the dialog event arrives while Playwright is pumped; up to 10 s on a loaded machine
        if dialogs:
            break
        page.wait_for_timeout(50)
    assert dialogs == ["beforeunload"]
