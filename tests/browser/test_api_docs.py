"""`/api/docs/` (Swagger UI) renders in Chromium with every request off this machine aborted: the
UI comes from the installed sidecar package, served by the real web server (daphne) with the other static files."""

from __future__ import annotations

import pytest

from tests.processes import CHROMIUM, CHROMIUM_ARGS, REPO_ROOT, start_web_server

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "api-docs"


@pytest.fixture
def cookie(make_user):
    from tests.realtime import session_cookie_for

    name, value = session_cookie_for(make_user("docs-owner")).split("=", 1)
    return {"name": name, "value": value}


def test_api_docs_render_with_the_network_blocked(cookie, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import expect, sync_playwright

    web, base_url = start_web_server(tmp_path)
    blocked: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1200, "height": 900})
            context.add_cookies([{**cookie, "url": base_url}])

            def outside(route):
                blocked.append(route.request.url)
                route.abort()

            context.route(lambda url: not url.startswith(base_url), outside)
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{base_url}/api/docs/")
            expect(page.locator(".swagger-ui .info .title")).to_contain_text("OpenCompany API", timeout=20_000)
            expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
            assert page.locator(".swagger-ui .opblock").count() > 20
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "swagger-offline.png"))
            assert blocked == [], blocked  # Swagger UI did not even try to leave the machine
            browser.close()
            assert not errors, errors
    finally:
        web.stop()
