"""An MCP server node in Debian's Chromium (Playwright) against the real web server, Celery worker and broker, and
the SDK-written test server: drag "MCP server" onto the canvas, wire it to the agent, point it at the server, Test
connection lists its tools, tick two, Start, chat `call hang: {...}` and `call echo: {...}` and see each step name
the tool and the server while it runs, then the answer; run history shows the calls. Screenshots at 1280 and 390 px
land in test-artifacts/mcp/."""

from __future__ import annotations

import re

import pytest

from tests.browser.helpers import NODE, api, drag_from_palette
from tests.processes import REPO_ROOT, chromium_page, running_site

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "mcp"
MCP_ENV = {"MCP_HTTP_ALLOWED_HOSTS": "127.0.0.1"}


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _option(page, select: str, starts: str, ends: str) -> str:
    return page.locator(f"{select} option").evaluate_all(
        "(options, [starts, ends]) => options.find(o => o.text.startsWith(starts) && o.text.endsWith(ends)).value",
        [starts, ends],
    )


@pytest.fixture
def cookie(make_user):
    from tests.realtime import session_cookie_for

    owner = make_user("mcp-owner", password="pw-for-mcp-1")
    name, value = session_cookie_for(owner).split("=", 1)
    return {"name": name, "value": value}


def test_wire_test_tick_start_and_call_an_mcp_server(cookie, tmp_path, http_server):
    from playwright.sync_api import expect

    with (
        running_site(tmp_path, web_env=MCP_ENV, OFFLINE_PROVIDER_DELAY_MS="20", **MCP_ENV) as site,
        chromium_page(tmp_path / "profile", width=1280, height=900) as page,
    ):
        page.context.add_cookies([{**cookie, "url": site}])
        page.goto(site + "/")
        graph = {
            "nodes": [
                {"id": "t", "type": "chatTrigger", "params": {}},
                {"id": "a", "type": "agent", "params": {"name": "Lead", "provider": "offline", "model": "offline-1"}},
                {"id": "c", "type": "context", "params": {}},
            ],
            "edges": [
                {"source": "t", "sourceHandle": "output-main", "target": "a", "targetHandle": "input-main"},
                {"source": "c", "sourceHandle": "output-context", "target": "a", "targetHandle": "input-context"},
            ],
        }
        created = api(page, "POST", "/api/workflows/", {"name": "MCP", "graph": graph})
        assert created["status"] == 201, created
        workflow_id = created["body"]["id"]
        page.goto(f"{site}/workflows/{workflow_id}/")
        expect(page.locator("#editor")).to_have_attribute("data-state", "ready")

        # Drag "MCP server" from the palette, wire its tool output to the agent, point it at the test server.
        expect(page.locator(".palette-item[data-type='mcpServer']")).to_contain_text("MCP server")
        drag_from_palette(page, "mcpServer", 80, 460)
        mcp = f"{NODE}[data-type='mcpServer']"
        # Wired with the editor's keyboard form (From: the MCP server's tool output, To: the agent's tools input).
        page.get_by_text("Wire and select with the keyboard").click()
        page.locator("#connect-from").select_option(value=_option(page, "#connect-from", "MCP server (", " · tool"))
        page.locator("#connect-to").select_option(value=_option(page, "#connect-to", "Lead (", " · tools"))
        page.get_by_role("button", name="Connect", exact=True).click()
        expect(page.locator("#canvas svg.connection")).to_have_count(3)
        shot(page, "00-wired")
        page.locator(mcp).click(position={"x": 100, "y": 12})
        # The transports in words: Streamable HTTP (the test server's), the older HTTP+SSE, detect, stdio.
        expect(page.locator("#param-transport option")).to_have_text(
            [
                "",
                "Streamable HTTP",
                "HTTP+SSE (older servers)",
                "HTTP: detect (Streamable HTTP, else HTTP+SSE)",
                "stdio (a server the operator lists)",
            ]
        )
        expect(page.locator("#param-transport")).to_have_value("http")
        page.locator("#param-url").fill(http_server.url)
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.locator("#save-state")).to_have_text(re.compile(r"Saved · revision \d+"))

        # Test connection lists the server's tools with their annotations; tick two.
        page.locator(mcp).click(position={"x": 100, "y": 12})
        page.get_by_role("button", name="Test connection").click()
        expect(page.locator("#mcp-status")).to_contain_text(f"9 tools on {http_server.url}")
        expect(page.locator("#mcp-tools li.mcp-tool")).to_have_count(9)
        expect(page.locator("label[for='mcp-tool-wipe']")).to_contain_text("destructive")
        expect(page.locator("label[for='mcp-tool-echo']")).to_contain_text("read-only")
        page.locator("#mcp-tool-echo").check()
        page.locator("#mcp-tool-hang").check()
        shot(page, "01-tools-ticked-1280")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.locator("#save-state")).to_have_text(re.compile(r"Saved · revision \d+"))
        expect(page.locator("#issues")).to_contain_text("No problems found.")
        saved = api(page, "GET", f"/api/workflows/{workflow_id}/")["body"]["graph"]["nodes"]
        (node,) = [n for n in saved if n["type"] == "mcpServer"]
        assert [t["name"] for t in node["params"]["tools"]] == ["echo", "hang"]

        page.set_viewport_size({"width": 390, "height": 844})
        page.locator(mcp).click(position={"x": 60, "y": 12})
        page.get_by_role("button", name="Test connection").click()
        expect(page.locator("#mcp-tool-echo")).to_be_checked()
        shot(page, "02-tools-390")
        page.set_viewport_size({"width": 1280, "height": 900})

        # Start, chat `call hang: {...}` then `call echo: {...}`: while a call runs its step names the tool and the
        # server, then says it was called; the answer carries the server's reply.
        page.get_by_role("button", name="Start").click()
        expect(page.locator("#banner")).to_contain_text("Started generation 1")
        page.goto(f"{site}/workflows/{workflow_id}/chat/")
        message = page.get_by_label("Message", exact=True)
        page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
        message.fill('call hang: {"seconds": 4}\ncall echo: {"text": "hello from the browser"}')
        page.keyboard.press("Enter")
        server = http_server.url.removeprefix("http://")
        expect(page.locator(".step .step-name").first).to_have_text(f"Calling hang on {server}…", timeout=30_000)
        expect(page.locator(".step .step-state.running")).to_have_count(1)
        shot(page, "03-step-running-1280")
        answer = page.locator("#thread > li.msg.assistant:not(.streaming)")
        expect(answer).to_have_count(1, timeout=30_000)
        expect(answer.first).to_contain_text("echo: hello from the browser")
        expect(page.locator(".step .step-name")).to_have_text([f"Called hang on {server}", f"Called echo on {server}"])
        shot(page, "04-chat-1280")
        page.set_viewport_size({"width": 390, "height": 844})
        shot(page, "05-chat-390")
        page.set_viewport_size({"width": 1280, "height": 900})

        # Run history shows the call: the tool, its server, the arguments, the outcome.
        runs = api(page, "GET", f"/api/workflows/{workflow_id}/runs/")["body"]
        firing_id = runs[0]["id"] if isinstance(runs, list) else runs["runs"][0]["id"]
        page.goto(f"{site}/workflows/{workflow_id}/runs/{firing_id}/")
        # The call's line names tool, server and outcome; its arguments unfold under it.
        call = page.locator("details.tool-call").nth(1)
        expect(page.locator("details.tool-call")).to_have_count(2)
        summary = call.locator("summary")
        expect(summary).to_contain_text("echo")
        expect(summary).to_contain_text(http_server.url)
        expect(summary).to_contain_text("ok, 28 characters")
        arguments = call.locator("pre.tool-io").first
        expect(arguments).to_be_hidden()
        summary.click()
        expect(arguments).to_be_visible()
        expect(arguments).to_contain_text("hello from the browser")
        shot(page, "06-run-history-1280")
    assert http_server.calls("echo") == [{"tool": "echo", "arguments": {"text": "hello from the browser"}}]
    assert http_server.calls("hang") == [{"tool": "hang", "arguments": {"seconds": 4}}]
