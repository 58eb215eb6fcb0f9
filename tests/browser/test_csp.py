"""Every page runs under the enforced Content-Security-Policy with no violation, in a real browser.

Chromium loads each page (the owner's pages, the API docs, admin, the login page) from the real server with the
policy enforced; a `securitypolicyviolation` event or a CSP message in the console fails the test. The policy
itself is checked on every response: nonces, no 'unsafe-inline' or 'unsafe-eval', frame-ancestors 'none'; static
files carry the security headers too.
"""

from __future__ import annotations

import urllib.request

import pytest

from tests.agents.factories import agent_node, edge, started_workflow
from tests.processes import CHROMIUM, CHROMIUM_ARGS, REPO_ROOT, start_web_server

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "csp"

# Recorded by the page itself, from before any of its scripts run (an init script is not subject to the CSP).
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sample || ""));
});
"""


@pytest.fixture
def world(make_user, settings):
    from accounts.tokens import api_token_create
    from chat.services.runs import chat_message_send
    from memory.services import memory_item_remember, memory_item_update, memory_namespace_get_or_create
    from tests.realtime import session_cookie_for

    settings.AGENT_EXECUTION_MODE = "inline"
    owner = make_user("csp-owner", is_staff=True, is_superuser=True)
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", "Lead"),
        {"id": "ctx", "type": "context", "params": {}},
        {"id": "mem", "type": "simpleMemory", "params": {}},
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("ctx", "output-context", "lead", "input-context"),
        edge("mem", "output-tool", "lead", "input-tools"),
    ]
    workflow, _generation, ids = started_workflow(owner, nodes, edges, name="csp")
    chat_message_send(workflow=workflow, text="hello **there**\n\n```python\nprint(1)\n```")
    namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=ids["mem"])
    item = memory_item_remember(namespace=namespace, content="a fact", title="t", actor="owner")["item"]
    memory_item_update(
        namespace=namespace, item_id=item["id"], expected_version=1, patch={"content": "a changed fact"}, actor="owner"
    )
    api_token_create(user=owner, name="listed")
    name, value = session_cookie_for(owner).split("=", 1)
    pages = [
        "/",
        "/settings/token/",
        "/settings/usage/",
        "/settings/password/",
        f"/workflows/{workflow.pk}/",
        f"/workflows/{workflow.pk}/chat/",
        f"/workflows/{workflow.pk}/context/",
        f"/workflows/{workflow.pk}/memory/{ids['mem']}/",
        f"/workflows/{workflow.pk}/memory/{ids['mem']}/clear/",
        "/api/docs/",
        "/admin/",
        "/admin/accounts/apitoken/",
        "/admin/accounts/spendinglimit/add/",
        f"/admin/memory/memoryitem/{item['id']}/change/",
        f"/admin/memory/memoryitem/{item['id']}/history/",
        "/admin/workflows/workflow/",
    ]
    return {"cookie": {"name": name, "value": value}, "pages": pages}


def check_policy(path: str, headers: dict) -> None:
    policy = headers.get("content-security-policy", "")
    assert policy, f"{path}: no Content-Security-Policy"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy, f"{path}: {policy}"
    assert "frame-ancestors 'none'" in policy, f"{path}: {policy}"
    assert headers.get("x-content-type-options") == "nosniff", path
    assert headers.get("x-frame-options") == "DENY", path


def test_every_page_runs_under_the_csp_without_a_violation(world, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import expect, sync_playwright

    web, base_url = start_web_server(tmp_path)
    violations: list[str] = []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            anonymous = browser.new_context()
            anonymous.add_init_script(RECORD_VIOLATIONS)
            page = anonymous.new_page()
            page.on("console", lambda m: "Content Security Policy" in m.text and violations.append(f"login: {m.text}"))
            response = page.goto(base_url + "/login/")
            check_policy("/login/", response.headers)
            # No page needs an inline script, so no nonce is issued (django-csp adds one only when a template
            # asks for `request.csp_nonce`): scripts come from our origin only.
            assert "script-src 'self'" in response.headers["content-security-policy"]
            page.wait_for_load_state("networkidle")
            violations += [f"/login/: {v}" for v in page.evaluate("window.__cspViolations")]
            page.screenshot(path=str(ARTIFACTS / "login.png"))

            context = browser.new_context()
            context.add_init_script(RECORD_VIOLATIONS)
            context.add_cookies([{**world["cookie"], "url": base_url}])
            page = context.new_page()
            current = {"path": ""}
            page.on(
                "console",
                lambda m: "Content Security Policy" in m.text and violations.append(f"{current['path']}: {m.text}"),
            )
            page.on("dialog", lambda dialog: dialog.accept())
            for path in world["pages"]:
                current["path"] = path
                response = page.goto(base_url + path)
                assert response.status == 200, path
                check_policy(path, response.headers)
                page.wait_for_load_state("networkidle")
                violations += [f"{path}: {v}" for v in page.evaluate("window.__cspViolations")]
                page.screenshot(path=str(ARTIFACTS / (path.strip("/").replace("/", "_") or "home")) + ".png")

            # The token page's own scripts work under the policy: make a token, see it once, copy it.
            current["path"] = "/settings/token/ (make)"
            page.goto(base_url + "/settings/token/")
            page.fill("#token-name", "browser")
            page.click("button:has-text('Make token')")
            page.wait_for_selector("#new-token")
            context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
            page.click("button.copy")
            page.wait_for_selector(".copy-status:has-text('Copied.'), .copy-status:has-text('Selected')")
            violations += [f"token page: {v}" for v in page.evaluate("window.__cspViolations")]
            page.screenshot(path=str(ARTIFACTS / "token_made.png"))

            # Revoking asks first (confirm.js's dialog, under the same policy); Cancel keeps the token.
            row = page.locator("table.tokens tr", has_text="browser")
            row.get_by_role("button", name="Revoke").click()
            dialog = page.locator("dialog.confirm")
            dialog.get_by_role("button", name="Cancel").click()
            expect(dialog).to_be_hidden()
            assert "active" in row.inner_text()
            row.get_by_role("button", name="Revoke").click()
            page.screenshot(path=str(ARTIFACTS / "token_revoke_confirm.png"))
            # The confirmed form posts and the page reloads; wait for the reloaded row, not for network silence,
            # which can come before the post starts.
            with page.expect_navigation():
                dialog.get_by_role("button", name="Revoke").click()
            expect(page.locator("table.tokens tr", has_text="browser")).to_contain_text("revoked")
            violations += [f"token revoke: {v}" for v in page.evaluate("window.__cspViolations")]

            # The control: an inline script added to a page is blocked and seen, so silence above means something.
            current["path"] = "control"
            control = page.evaluate(
                """() => { const s = document.createElement("script"); s.textContent = "window.__ran = 1";
                document.body.appendChild(s); return window.__ran === 1; }"""
            )
            page.wait_for_function("window.__cspViolations.length > 0")
            assert control is False
            assert any("script-src" in v for v in page.evaluate("window.__cspViolations"))
            assert any(v.startswith("control: ") for v in violations)
            violations = [v for v in violations if not v.startswith("control: ")]
            browser.close()
        # Static files skip the middleware; they carry the same headers all the same.
        for static_path in ("/static/js/app.js", "/static/css/app.css"):
            with urllib.request.urlopen(base_url + static_path) as response:
                headers = {key.lower(): value for key, value in response.headers.items()}
            check_policy(static_path, headers)
            assert headers["cross-origin-resource-policy"] == "same-origin"
    finally:
        web.stop()
    assert violations == [], "\n".join(violations)
