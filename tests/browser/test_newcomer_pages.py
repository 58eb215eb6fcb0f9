"""The pages as a newcomer uses them (issue 33), in Debian's Chromium against the real web server, worker and
broker: what cannot run is said before Start, a Test run leaves no trace, the agent form follows its provider,
edits can be undone, and the tables fit a phone. Screenshots land in test-artifacts/newcomer/."""

from __future__ import annotations

import re

import pytest

from tests.browser.helpers import NODE, api, drag_from_palette, wire
from tests.processes import REPO_ROOT, chromium_page, running_site

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "newcomer"
PASSWORD = "pw-for-newcomer-1"
NO_AGENT = "This workflow has no agent connected to its chat trigger."


@pytest.fixture
def cookie(make_user):
    from tests.realtime import session_cookie_for

    owner = make_user("newcomer", password=PASSWORD)
    name, value = session_cookie_for(owner).split("=", 1)
    return {"name": name, "value": value}


@pytest.fixture
def page(tmp_path, cookie, stack):
    with chromium_page(tmp_path / "profile", width=1280, height=900) as page:
        page.context.add_cookies([{**cookie, "url": stack}])
        yield page


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def new_workflow(page, stack: str, template: str = "Blank canvas", name: str = "") -> int:
    from playwright.sync_api import expect

    page.goto(stack + "/")
    page.get_by_label(template).check()
    if name:
        page.get_by_label("Name (optional)").first.fill(name)
    page.get_by_role("button", name="Create and open the editor").click()
    expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
    return int(re.search(r"/workflows/(\d+)/", page.url).group(1))


def test_a_graph_nothing_answers_is_flagged_and_start_refuses_it(page, stack):
    from playwright.sync_api import expect

    workflow_id = new_workflow(page, stack)
    # Empty canvas: the check is on the canvas and in Checks, and Start refuses with the same sentence.
    expect(page.locator("#issues [data-code='NO_ANSWERING_AGENT']")).to_contain_text(NO_AGENT)
    expect(page.locator("#canvas-issues")).to_contain_text(NO_AGENT)
    expect(page.locator("#issues")).not_to_contain_text("No problems found")
    shot(page, "01-empty-canvas-check")
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#banner")).to_contain_text(NO_AGENT)
    expect(page.locator("#run-state")).to_contain_text("Never started")
    refused = api(page, "POST", f"/api/workflows/{workflow_id}/start/")
    assert refused["status"] == 400, refused
    assert refused["body"]["code"] == "no_answering_agent" and refused["body"]["message"] == NO_AGENT

    # A trigger and an agent, not wired: the trigger is marked, Start still refuses.
    drag_from_palette(page, "chatTrigger", 60, 60)
    drag_from_palette(page, "agent", 460, 160)
    trigger, agent = f"{NODE}[data-type='chatTrigger']", f"{NODE}[data-type='agent']"
    expect(page.locator(trigger)).to_have_attribute("data-issues", re.compile("NO_ANSWERING_AGENT"), timeout=10_000)
    expect(page.locator(trigger)).to_have_class(re.compile("has-error"))
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#banner")).to_contain_text(NO_AGENT)
    shot(page, "02-unwired-refused")
    assert api(page, "POST", f"/api/workflows/{workflow_id}/start/")["body"]["code"] == "no_answering_agent"

    # Wired: no problem left, Start starts.
    wire(page, trigger, "output-main", agent, "input-main")
    expect(page.locator("#issues")).to_contain_text("No problems found.", timeout=10_000)
    expect(page.locator("#canvas-issues")).to_be_hidden()
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#banner")).to_contain_text("Started generation 1")
    shot(page, "03-wired-started")


def chat_graph(*, memory: bool = True, context: bool = True, **agent_params) -> dict:
    """The chat trigger -> an offline agent (with a Context and a Memory), as the API takes it."""
    agent = {"id": "lead", "type": "agent", "params": {"name": "Lead", "provider": "offline", "model": "offline-echo"}}
    agent["params"].update(agent_params)
    nodes = [{"id": "trigger", "type": "chatTrigger", "params": {}, "position": {"x": 40, "y": 60}}]
    nodes.append({**agent, "position": {"x": 420, "y": 120}})
    edges = [{"source": "trigger", "sourceHandle": "output-main", "target": "lead", "targetHandle": "input-main"}]
    if context:
        nodes.append({"id": "ctx", "type": "context", "params": {}, "position": {"x": 80, "y": 260}})
        edges.append(
            {"source": "ctx", "sourceHandle": "output-context", "target": "lead", "targetHandle": "input-context"}
        )
    if memory:
        nodes.append({"id": "mem", "type": "simpleMemory", "params": {}, "position": {"x": 80, "y": 420}})
        edges.append({"source": "mem", "sourceHandle": "output-tool", "target": "lead", "targetHandle": "input-tools"})
    return {"nodes": nodes, "edges": edges}


def api_workflow(page, stack: str, graph: dict, name: str = "Helper") -> int:
    """Create a workflow through the API (from the page, with its session) and open its editor."""
    from playwright.sync_api import expect

    page.goto(stack + "/")
    created = api(page, "POST", "/api/workflows/", {"name": name, "graph": graph})
    assert created["status"] == 201, created
    workflow_id = created["body"]["id"]
    page.goto(f"{stack}/workflows/{workflow_id}/")
    expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
    return workflow_id


def test_a_test_run_leaves_no_memory_behind(page, stack):
    from playwright.sync_api import expect

    workflow_id = api_workflow(page, stack, chat_graph())
    expect(page.locator("label[for='test-prompt']")).to_contain_text("leaves no trace")
    page.get_by_label(re.compile("^Test run")).fill("remember: my favourite colour is teal")
    page.get_by_role("button", name="Test run").click()
    expect(page.locator("#test-answer.done")).to_contain_text("1 tool call", timeout=30_000)
    shot(page, "10-test-run-no-trace")
    runs = api(page, "GET", f"/api/workflows/{workflow_id}/runs/?generation=0")["body"]
    detail = api(page, "GET", f"/api/workflows/{workflow_id}/runs/{runs[0]['id']}/")["body"]
    # The memory tool ran and answered the model...
    assert [(c["name"], c["is_error"]) for c in detail["tool_calls"]] == [("memory", False)], detail["tool_calls"]
    # ...and nothing was kept.
    items = api(page, "GET", f"/api/workflows/{workflow_id}/memory/{workflow_id}:simpleMemory:1/items/")
    assert items["status"] == 200 and "teal" not in str(items["body"]), items


def select_node(page, node_type: str) -> None:
    page.locator(f"{NODE}[data-type='{node_type}']").first.click(position={"x": 100, "y": 12})


def test_the_agent_form_follows_its_provider(page, stack):
    from playwright.sync_api import expect

    api_workflow(page, stack, chat_graph())
    select_node(page, "agent")
    form = page.locator("#node-form")
    provider, model = form.get_by_label("Provider"), form.get_by_label("Model")
    expect(model).to_have_value("offline-echo")
    # Only the common fields show; advanced ones are folded; no other provider's settings.
    # The temperature and Gemini's "Send this temperature to Gemini 3" both name the temperature: ask for each whole.
    temperature = form.get_by_label("Temperature (optional)", exact=True)
    send_to_gemini = form.get_by_label("Send this temperature to Gemini 3")
    expect(form.get_by_label("Instructions")).to_be_visible()
    expect(temperature).to_be_hidden()
    expect(send_to_gemini).to_be_hidden()
    expect(form.locator("[data-field='project']")).to_be_hidden()
    expect(form.locator("[data-field='rlm_max_depth']")).to_be_hidden()
    expect(form.locator("[data-field='runtime_tools']")).to_be_hidden()
    expect(form).not_to_contain_text("provider-replayable")
    shot(page, "20-agent-form-offline")

    # Another provider: its default model, and green checks are earned, not inherited.
    provider.select_option("openai")
    expect(model).to_have_value("gpt-4.1")
    page.get_by_text("More settings").click()
    expect(temperature).to_be_visible()
    expect(send_to_gemini).to_be_hidden()  # only the Gemini adapter reads it
    expect(form.locator("[data-field='project']")).to_be_hidden()
    expect(page.locator(f"{NODE}[data-type='agent'] .node-sub")).to_contain_text("openai · gpt-4.1")
    # A model the provider knows is kept when switching back and forth between providers that know it.
    provider.select_option("codex_cli")
    expect(model).to_have_value("gpt-4.1")
    expect(form.locator("[data-field='runtime_tools']")).to_be_visible()
    provider.select_option("vertex_agent")
    expect(model).to_have_value("")
    expect(form.get_by_label("Project")).to_be_visible()
    expect(form.locator("[data-field='runtime_tools']")).to_be_hidden()
    expect(page.locator("#issues")).to_contain_text("INVALID_PARAMS", timeout=10_000)
    provider.select_option("anthropic")
    expect(model).to_have_value("claude-sonnet-4-6")
    expect(form.get_by_label("Project")).to_be_hidden()
    expect(page.locator("#issues")).to_contain_text("No problems found.", timeout=10_000)
    expect(send_to_gemini).to_be_hidden()
    shot(page, "21-agent-form-anthropic")
    provider.select_option("gemini")
    expect(temperature).to_be_visible()
    expect(send_to_gemini).to_be_visible()
    expect(send_to_gemini).not_to_be_checked()
    provider.select_option("anthropic")
    expect(model).to_have_value("claude-sonnet-4-6")

    # The side panel scrolls, not the page: Checks and Test run stay on screen.
    assert page.evaluate("document.documentElement.scrollHeight") <= 900 + 2
    expect(page.locator("#issues")).to_be_in_viewport()
    expect(page.locator("#test-run")).to_be_in_viewport()


@pytest.fixture
def unreachable_openai_stack(tmp_path):
    """A site whose OpenAI base URL is a loopback port nothing listens on: every call fails to connect."""
    from tests.processes import free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    env = {"OPENAI_API_KEY": "sk-test-0123456789abcdef", "OPENAI_BASE_URL": dead}
    with running_site(tmp_path, web_env=env, OFFLINE_PROVIDER_DELAY_MS="20", **env) as base_url:
        yield base_url


def test_the_chat_says_why_an_answer_failed_in_words(tmp_path, cookie, unreachable_openai_stack):
    from playwright.sync_api import expect

    stack = unreachable_openai_stack
    with chromium_page(tmp_path / "profile", width=1280, height=900) as page:
        page.context.add_cookies([{**cookie, "url": stack}])
        workflow_id = api_workflow(page, stack, chat_graph(memory=False, provider="openai", model="gpt-4.1"))
        page.goto(f"{stack}/workflows/{workflow_id}/chat/")
        page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
        page.get_by_label("Message", exact=True).fill("hello?")
        page.keyboard.press("Enter")
        failed = page.locator("#thread > li.msg.assistant[data-status='error']")
        expect(failed).to_have_count(1, timeout=60_000)
        expect(failed.locator(".badge")).to_have_text("Could not finish: the provider could not be reached")
        expect(failed.locator(".run-error")).to_contain_text("openai: connection failed")
        expect(failed).not_to_contain_text("provider_network")
        shot(page, "30-chat-failed-in-words")


def test_the_keys_page_says_which_key_is_used_and_keeps_a_refused_base_url(page, stack):
    from playwright.sync_api import expect

    page.goto(stack + "/settings/provider-keys/")
    section = page.locator("section.provider-key", has=page.locator("h2", has_text="Anthropic"))
    # The test site sets no server key for Anthropic: the page does not claim one is used.
    expect(section.locator(".key-in-use")).to_have_text(
        "No key is set, yours or the server's: agents on Anthropic cannot answer until you store one."
    )
    expect(page.locator("body")).not_to_contain_text("the server's key is used")

    local = page.locator("section.provider-key", has=page.locator("h2", has_text="OpenAI-compatible"))
    local.locator("input[name=api_key]").fill("sk-local")
    local.locator("input[name=base_url]").fill("http://localhost:11434/v1")
    local.locator("button[value=save]").click()
    local = page.locator("section.provider-key", has=page.locator("h2", has_text="OpenAI-compatible"))
    base_url = local.locator("input[name=base_url]")
    expect(base_url).to_have_value("http://localhost:11434/v1")
    expect(base_url).to_have_attribute("aria-invalid", "true")
    error = local.locator(".field-error")
    expect(error).to_contain_text("a loopback address")
    expect(error).to_contain_text("PROVIDER_BASE_URL_ALLOWED_HOSTS")
    assert base_url.get_attribute("aria-describedby") == error.get_attribute("id")
    expect(base_url).to_be_focused()
    shot(page, "40-keys-refused-base-url")


def chat_once(page, stack: str, workflow_id: int, text: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{stack}/workflows/{workflow_id}/chat/")
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
    before = page.locator("#thread > li.msg.assistant:not(.streaming)").count()
    page.get_by_label("Message", exact=True).fill(text)
    page.keyboard.press("Enter")
    expect(page.locator("#thread > li.msg.assistant:not(.streaming)")).to_have_count(before + 1, timeout=30_000)


def test_the_context_panel_gives_one_token_count_and_costs_read_alike(page, stack):
    from playwright.sync_api import expect

    workflow_id = api_workflow(page, stack, chat_graph(memory=False))
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#run-state")).to_contain_text("Running")
    chat_once(page, stack, workflow_id, "hello there, how are you today?")
    page.goto(f"{stack}/workflows/{workflow_id}/context/")
    box = page.locator(".ctx-pressure")
    expect(box.locator("#ctx-next-turn")).to_be_visible()
    # Every size of the conversation the panel states (the room kept free for the answer is not one).
    counts = set(re.findall(r"([\d,]+) tokens(?! kept free)", box.inner_text()))
    assert len(counts) == 1, f"the panel gives {counts} as the conversation's size"
    expect(box).to_contain_text("as counted for the last answer")
    expect(box).to_contain_text("nothing (the offline model is free)")
    expect(box).not_to_contain_text("has no price")
    shot(page, "50-context-one-count")

    # Costs: the same "$0.0000" form on the run detail and the Usage page.
    page.goto(f"{stack}/workflows/{workflow_id}/runs/")
    page.locator(".run-row a").first.click()
    run_text = page.locator("main").inner_text()
    assert "$0.000000" not in run_text and "cost $0.0000" in run_text, run_text
    page.goto(f"{stack}/settings/usage/")
    expect(page.locator("table.usage").first).to_contain_text("$0.0000")
    shot(page, "51-usage-costs")


def test_export_import_reset_and_login_read_as_a_person_expects(page, stack, tmp_path):
    from playwright.sync_api import expect

    graph = chat_graph()
    graph["nodes"].append({"id": "spare", "type": "simpleMemory", "params": {"reset_policy": "clear"}})
    workflow_id = api_workflow(page, stack, graph, name="Support desk")

    # Export saves a file named after the workflow.
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Export").click()
    download = download_info.value
    assert download.suggested_filename == "Support desk.json"
    exported = tmp_path / download.suggested_filename
    download.save_as(exported)

    # The Reset dialog names the Memory by its name, not its internal id.
    page.get_by_role("button", name="Reset…").click()
    dialog = page.locator("#reset-dialog")
    expect(dialog.locator("li")).to_have_text(
        [
            "“Memory 1”: reset_policy “keep” — its items are kept.",
            "“Memory 2”: reset_policy “clear” — its items are deleted.",
        ]
    )
    expect(dialog).not_to_contain_text(f"{workflow_id}:simpleMemory")
    shot(page, "60-reset-names")
    dialog.get_by_role("button", name="Cancel").click()

    # Importing it next to the original: the copy's name says it is the imported one.
    page.goto(stack + "/")
    page.get_by_text("Import a workflow (JSON export)").click()
    page.locator("#import-file").set_input_files(str(exported))
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#workflow-name")).to_have_text("Support desk (imported)")
    page.goto(stack + "/")
    page.get_by_text("Import a workflow (JSON export)").click()
    page.locator("#import-file").set_input_files(str(exported))
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#workflow-name")).to_have_text("Support desk (imported 2)")
    # With no file chosen, the message speaks of the form there is (no paste field).
    page.goto(stack + "/")
    page.get_by_text("Import a workflow (JSON export)").click()
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator(".flash")).to_contain_text("Choose a workflow's export file (.json) to import.")
    expect(page.locator(".flash")).not_to_contain_text("paste")

    # A wrong password keeps the username typed.
    page.context.clear_cookies()
    page.goto(stack + "/login/")
    page.get_by_label("Username").fill("newcomer")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("did not match")
    expect(page.get_by_label("Username")).to_have_value("newcomer")
    expect(page.get_by_label("Password")).to_be_focused()
    shot(page, "61-login-kept")


def node_count(page, node_type: str) -> int:
    return page.locator(f"{NODE}[data-type='{node_type}']").count()


def test_undo_and_redo_every_canvas_edit(page, stack):
    from playwright.sync_api import expect

    new_workflow(page, stack)
    undo, redo = page.get_by_role("button", name="Undo"), page.get_by_role("button", name="Redo")
    expect(undo).to_be_disabled()
    trigger, agent = f"{NODE}[data-type='chatTrigger']", f"{NODE}[data-type='agent']"

    # Add (two nodes), then undo one with Ctrl-Z and bring it back with Shift-Ctrl-Z.
    drag_from_palette(page, "chatTrigger", 60, 60)
    drag_from_palette(page, "agent", 460, 160)
    expect(page.locator(NODE)).to_have_count(2)
    page.locator("#canvas").focus()
    page.keyboard.press("Control+z")
    expect(page.locator(agent)).to_have_count(0)
    expect(page.locator(trigger)).to_have_count(1)
    page.keyboard.press("Control+Shift+z")
    expect(page.locator(agent)).to_have_count(1)

    # Wire, undo (button), redo (button).
    wire(page, trigger, "output-main", agent, "input-main")
    expect(page.locator("#canvas svg.connection")).to_have_count(1)
    undo.click()
    expect(page.locator("#canvas svg.connection")).to_have_count(0)
    redo.click()
    expect(page.locator("#canvas svg.connection")).to_have_count(1)

    # Move the agent, undo puts it back.
    before = page.locator(agent).bounding_box()
    page.locator(f"{agent} .node-kind").hover()
    page.mouse.down()
    page.mouse.move(before["x"] + 150, before["y"] + 220, steps=6)
    page.mouse.up()
    moved = page.locator(agent).bounding_box()
    assert abs(moved["y"] - before["y"]) > 100
    undo.click()
    back = page.locator(agent).bounding_box()
    assert abs(back["x"] - before["x"]) < 3 and abs(back["y"] - before["y"]) < 3, (before, back)

    # A param edit: typing a name is one step; undo brings the old name back in the card and the form.
    select_node(page, "agent")
    page.locator("#node-form").get_by_label("Name", exact=True).fill("Support bot")
    expect(page.locator(f"{agent} .node-title")).to_have_text("Support bot")
    page.locator("#canvas").focus()
    page.keyboard.press("Control+z")
    expect(page.locator(f"{agent} .node-title")).to_have_text("Agent")
    expect(page.locator("#node-form").get_by_label("Name", exact=True)).to_have_value("Agent")
    page.keyboard.press("Control+y")
    expect(page.locator(f"{agent} .node-title")).to_have_text("Support bot")

    # Delete the agent (its wire goes with it): one undo brings both back.
    select_node(page, "agent")
    page.keyboard.press("Delete")
    expect(page.locator(agent)).to_have_count(0)
    expect(page.locator("#canvas svg.connection")).to_have_count(0)
    page.keyboard.press("Control+z")
    expect(page.locator(agent)).to_have_count(1)
    expect(page.locator("#canvas svg.connection")).to_have_count(1)
    shot(page, "70-undo-redo")

    # Undo survives a save: undoing after it restores the saved node (its canonical id), not a new one.
    select_node(page, "agent")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#save-state")).to_have_text("Saved · revision 2")
    expect(page.locator(agent)).to_have_class(re.compile("selected"))  # the selection survives the save
    saved_id = page.locator(agent).get_attribute("data-node-id")
    select_node(page, "agent")
    page.keyboard.press("Delete")
    page.keyboard.press("Control+z")
    expect(page.locator(agent)).to_have_attribute("data-node-id", saved_id)
    expect(page.locator("#save-state")).to_have_text("Saved · revision 2")


def test_copy_paste_palette_search_and_enter_added_nodes_in_free_space(page, stack):
    from playwright.sync_api import expect

    new_workflow(page, stack)
    search = page.get_by_label("Search node types")
    search.fill("memo")
    expect(page.locator(".palette-item:visible")).to_have_count(1)
    expect(page.locator(".palette-item:visible")).to_contain_text("Memory")
    search.fill("nothing like this")
    expect(page.locator("#palette-none")).to_be_visible()
    search.fill("agent")
    search.press("Enter")
    expect(page.locator(f"{NODE}[data-type='agent']")).to_have_count(1)
    search.fill("")

    # Enter on palette items: each new node lands where no other node is.
    for _ in range(3):
        page.locator(".palette-item[data-type='todos']").focus()
        page.keyboard.press("Enter")
    expect(page.locator(NODE)).to_have_count(4)
    boxes = page.locator(NODE).evaluate_all("nodes => nodes.map(n => n.getBoundingClientRect().toJSON())")
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = (
                a["right"] <= b["left"] or b["right"] <= a["left"] or a["bottom"] <= b["top"] or b["bottom"] <= a["top"]
            )
            assert apart, f"two nodes overlap: {a} {b}"
    expect(page.locator("#editor-live")).to_have_text("Added Todos.")

    # Copy and paste a node: a second one with the same settings.
    select_node(page, "agent")
    page.locator("#node-form").get_by_label("Name", exact=True).fill("Original")
    page.locator("#canvas").focus()
    page.keyboard.press("Control+c")
    page.keyboard.press("Control+v")
    expect(page.locator(f"{NODE}[data-type='agent']")).to_have_count(2)
    expect(page.locator(f"{NODE}[data-type='agent'] .node-title")).to_have_text(["Original", "Original"])
    expect(page.locator("#editor-live")).to_have_text("Pasted Original.")
    shot(page, "71-copy-paste-search")


def fits_the_phone(page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 392, f"the page scrolls sideways at 390 px ({width})"


def test_the_tables_header_and_chat_fit_a_phone(tmp_path, cookie, stack):
    from playwright.sync_api import expect

    with chromium_page(tmp_path / "phone", width=390, height=844) as page:
        page.context.add_cookies([{**cookie, "url": stack}])
        graph = chat_graph()
        graph["nodes"].append({"id": "spare", "type": "simpleMemory", "params": {}, "position": {"x": 600, "y": 400}})
        workflow_id = api_workflow(page, stack, graph, name="A workflow with a rather long name for a phone")
        page.get_by_role("button", name="Start").click()
        expect(page.locator("#run-state")).to_contain_text("Running")
        chat_once(page, stack, workflow_id, "hello from a phone")

        # The chat: every link and Clear chat on screen.
        fits_the_phone(page)
        expect(page.get_by_role("button", name="Clear chat")).to_be_in_viewport(ratio=1)
        shot(page, "80-chat-390")

        # The header's links are in a menu that opens and closes.
        menu = page.get_by_role("button", name="Menu")
        expect(page.get_by_role("link", name="Provider keys")).to_be_hidden()
        menu.click()
        expect(menu).to_have_attribute("aria-expanded", "true")
        for name in ("API tokens", "Usage", "Provider keys", "API docs"):
            expect(page.get_by_role("link", name=name)).to_be_in_viewport(ratio=1)
        expect(page.get_by_role("button", name="Log out")).to_be_in_viewport(ratio=1)
        shot(page, "81-menu-open-390")
        page.keyboard.press("Escape")
        expect(page.get_by_role("link", name="Provider keys")).to_be_hidden()
        menu.click()
        page.get_by_role("link", name="API tokens").click()

        # API tokens: make two, each row's Replace and Revoke are reachable on screen.
        for name in ("laptop script", "a token whose name is long enough to wrap on a phone"):
            page.get_by_label("Name").fill(name)
            page.get_by_role("button", name="Make token").click()
            expect(page.locator("#new-token")).to_be_visible()
        fits_the_phone(page)
        rows = page.locator("table.tokens tbody tr")
        expect(rows).to_have_count(2)
        for row in rows.all():
            for action in ("Replace", "Revoke"):
                button = row.get_by_role("button", name=action)
                button.scroll_into_view_if_needed()
                expect(button).to_be_in_viewport(ratio=1)
        shot(page, "82-tokens-390")
        rows.first.get_by_role("button", name="Revoke").click()
        page.get_by_role("button", name="Revoke", exact=True).last.click()
        expect(page.locator("table.tokens")).to_contain_text("revoked")

        # Usage and Run history: rows stack; nothing runs off the screen.
        page.goto(stack + "/settings/usage/")
        fits_the_phone(page)
        expect(page.locator("table.usage td[data-label='Cost']").first).to_be_in_viewport()
        shot(page, "83-usage-390")
        page.goto(f"{stack}/workflows/{workflow_id}/runs/")
        fits_the_phone(page)
        link = page.locator(".run-row a").first
        expect(link).to_be_in_viewport(ratio=1)
        for label in ("Outcome", "Duration"):
            expect(page.locator(f".run-row td[data-label='{label}']").first).to_be_in_viewport()
        shot(page, "84-runs-390")


def test_wiring_with_the_keyboard_keeps_choices_announces_and_removes(page, stack):
    from playwright.sync_api import expect

    workflow_id = api_workflow(page, stack, chat_graph(context=False, memory=False) | {"edges": []})
    page.get_by_text("Wire and select with the keyboard").click()
    trigger_id, agent_id = f"{workflow_id}:chatTrigger:1", f"{workflow_id}:agent:1"
    source = page.get_by_label("From (output)")
    target = page.get_by_label("To (input)")
    source.select_option(label=f"Chat trigger ({trigger_id}) · message")
    target.select_option(label=f"Lead ({agent_id}) · message")
    chosen = (source.input_value(), target.input_value())
    connect = page.get_by_role("button", name="Connect")
    connect.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#canvas svg.connection")).to_have_count(1)
    live = page.locator("#editor-live")
    expect(live).to_have_text("Connected Chat trigger · message → Lead · message.")
    # The choices are kept and focus stays where the owner was.
    assert (source.input_value(), target.input_value()) == chosen
    expect(connect).to_be_focused()
    page.keyboard.press("Enter")
    expect(live).to_have_text("Already connected: Chat trigger · message → Lead · message.")
    expect(page.locator("#canvas svg.connection")).to_have_count(1)
    # A wrong pair is refused in the handles' own words.
    target.select_option(label=f"Lead ({agent_id}) · tools")
    connect.click()
    expect(live).to_contain_text(
        "Not connected: “message” is a main output and only joins a main input; “tools” takes tool."
    )
    shot(page, "90-keyboard-wiring")

    # Removing a wire from the keyboard.
    wires = page.get_by_label("Wires")
    expect(wires.locator("option")).to_have_text(["Chat trigger · message → Lead · message"])
    page.get_by_role("button", name="Remove wire").click()
    expect(page.locator("#canvas svg.connection")).to_have_count(0)
    expect(live).to_have_text("Removed the wire Chat trigger · message → Lead · message.")
    expect(page.get_by_role("button", name="Remove wire")).to_be_disabled()


def test_a_tapped_wire_can_be_deleted_on_a_touch_screen(tmp_path, cookie, stack):
    from playwright.sync_api import expect

    with chromium_page(tmp_path / "touch", width=1280, height=900, touch=True) as page:
        page.context.add_cookies([{**cookie, "url": stack}])
        api_workflow(page, stack, chat_graph(context=False, memory=False))
        expect(page.locator("#canvas svg.connection")).to_have_count(1)
        path = page.locator("#canvas svg.connection .main-path")
        box = path.bounding_box()
        # A point on the curve: its middle, found from the path itself.
        point = path.evaluate(
            """p => { const m = p.getPointAtLength(p.getTotalLength() / 2); const r = p.ownerSVGElement
                .getScreenCTM(); return {x: m.x * r.a + r.e, y: m.y * r.d + r.f}; }"""
        )
        assert box is not None
        page.touchscreen.tap(point["x"], point["y"])
        delete = page.get_by_role("button", name="Delete wire")
        expect(delete).to_be_visible()
        shot(page, "91-tapped-wire")
        delete.tap()
        expect(page.locator("#canvas svg.connection")).to_have_count(0)
        expect(delete).to_be_hidden()
        expect(page.locator("#save-state")).to_have_text("Unsaved changes")


def test_rename_in_the_editor_tool_arguments_forget_words_and_the_history_diff(page, stack):
    from playwright.sync_api import expect

    workflow_id = api_workflow(page, stack, chat_graph(), name="Draft name")
    # Rename inside the editor, without leaving it.
    page.get_by_role("button", name="Rename this workflow").click()
    page.get_by_label("Workflow name").fill("Final name")
    page.get_by_label("Workflow name").press("Enter")
    expect(page.locator("#workflow-name")).to_have_text("Final name")
    assert re.search(rf"/workflows/{workflow_id}/$", page.url)
    assert api(page, "GET", f"/api/workflows/{workflow_id}/")["body"]["name"] == "Final name"

    # A tool call in the run detail shows its arguments and result, folded.
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#run-state")).to_contain_text("Running")
    chat_once(page, stack, workflow_id, "remember: the office plant is called Fern")
    page.goto(f"{stack}/workflows/{workflow_id}/runs/")
    page.locator(".run-row a").first.click()
    call = page.locator("details.tool-call").first
    expect(call.locator("pre.tool-io").first).to_be_hidden()
    call.locator("summary").click()
    expect(call.locator("pre.tool-io").first).to_contain_text('"operation": "remember"')
    expect(call.locator("pre.tool-io").first).to_contain_text("Fern")
    expect(call.locator("pre.tool-io").nth(1)).to_be_visible()
    shot(page, "95-run-detail-tool-call")

    # The Memory panel: edit one word; the history list marks that word, as the side-by-side view does.
    page.goto(f"{stack}/workflows/{workflow_id}/memory/{workflow_id}:simpleMemory:1/")
    item = page.locator(".memory-item").first
    item.get_by_text("Edit", exact=True).click()
    content = item.get_by_label("Content")
    old = content.input_value()
    assert "Fern" in old
    content.fill(old.replace("Fern", "Ivy"))
    item.get_by_role("button", name="Save changes").click()
    expect(page.locator(".memory-item").first).to_contain_text("Ivy")
    # The Forget dialog tells an owner without admin access where the history is.
    page.locator(".memory-item").first.get_by_role("button", name="Forget…").click()
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_contain_text("History page")
    expect(dialog).not_to_contain_text("admin")
    shot(page, "96-forget-dialog")
    dialog.get_by_role("button", name="Cancel").click()
    page.get_by_role("link", name="History: every change and where it came from").click()
    change = page.locator(".history-row.op-update .history-change").first
    expect(change.locator("del")).to_have_text("Fern")
    expect(change.locator("ins")).to_have_text("Ivy")
    shot(page, "97-history-diff")


SEEN = (
    "main a, main button, main input, main select, main textarea, header a, header button, main h1, main h2, "
    "main td, main th, main p"
)
# Elements of the page that reach past its left or right edge, unless a box scrolls them on purpose.
CUT_OFF = (
    "width => [...document.querySelectorAll('" + SEEN + "')].filter(e => {"
    """
        const r = e.getBoundingClientRect(); const s = getComputedStyle(e);
        if (!r.width || !r.height || s.visibility === 'hidden') return false;
        if (!e.checkVisibility({checkVisibilityCSS: true})) return false;  // e.g. inside a closed <details>
        for (let p = e.parentElement; p; p = p.parentElement) {
            // Hidden for the eye on purpose (a visually-hidden table head, read by screen readers only).
            if (getComputedStyle(p).overflow === 'hidden' && p.getBoundingClientRect().width <= 1) return false;
            const o = getComputedStyle(p).overflowX;
            if ((o === 'auto' || o === 'scroll') && p.scrollWidth > p.clientWidth) return false;
            if (p.id === 'canvas' || p.classList.contains('canvas-wrap')) return false;
        }
        return r.left < -1 || r.right > width + 1;
    }).map(e => e.tagName + ' ' + (e.id || e.className || '') + ' ' + (e.textContent || '').trim().slice(0, 40))"""
)


@pytest.mark.parametrize("width,height", [(1280, 900), (390, 844)])
def test_every_page_at_desktop_and_phone_width(tmp_path, cookie, stack, width, height):
    from playwright.sync_api import expect

    with chromium_page(tmp_path / f"w{width}", width=width, height=height) as page:
        page.context.add_cookies([{**cookie, "url": stack}])
        workflow_id = api_workflow(page, stack, chat_graph(), name="Screenshots")
        page.get_by_role("button", name="Start").click()
        expect(page.locator("#run-state")).to_contain_text("Running")
        chat_once(page, stack, workflow_id, "remember: screenshots are taken at two widths")
        firing = api(page, "GET", f"/api/workflows/{workflow_id}/runs/")["body"][0]["id"]
        api(page, "POST", "/api/tokens/", {"name": "phone check"})

        pages = {
            "home": "/",
            "editor": f"/workflows/{workflow_id}/",
            "chat": f"/workflows/{workflow_id}/chat/",
            "context": f"/workflows/{workflow_id}/context/",
            "memory": f"/workflows/{workflow_id}/memory/{workflow_id}:simpleMemory:1/",
            "run-detail": f"/workflows/{workflow_id}/runs/{firing}/",
            "usage": "/settings/usage/",
            "api-tokens": "/settings/token/",
            "provider-keys": "/settings/provider-keys/",
        }
        problems = {}
        for name, path in pages.items():
            page.goto(stack + path)
            if name == "editor":
                expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
                select_node(page, "agent")
                expect(page.locator("#node-form")).to_be_visible()
            if name == "home":
                page.locator("details.rename summary").first.click()  # its form open, as an owner renaming
            if name == "chat":
                page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
            scroll = page.evaluate("document.documentElement.scrollWidth")
            cut = page.evaluate(CUT_OFF, width)
            if scroll > width + 2 or cut:
                problems[name] = {"scroll_width": scroll, "cut_off": cut[:5]}
            shot(page, f"screens-{width}-{name}")
        assert not problems, problems
