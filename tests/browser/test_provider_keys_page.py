"""The provider keys page in a real browser: an owner stores a key, never sees it again, tests it with the button
(one call to the provider's model list, here the local fake), and is told why an internal base URL is refused."""

from __future__ import annotations

import pytest

from tests.fakes import FakeAnthropic
from tests.processes import CHROMIUM, CHROMIUM_ARGS, REPO_ROOT, start_web_server

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "provider-keys"
OWNER_KEY = "sk-ant-browser-owner-key-93f1"


def test_store_test_and_refuse_on_the_provider_keys_page(make_user, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    from provider_keys.models import OwnerProviderKey
    from tests.agents.factories import assistant_with
    from tests.realtime import session_cookie_for

    owner = make_user("keys-owner")
    workflow, _, _ = assistant_with(owner, provider="openai_compatible", model="my-local-finetune")
    name, value = session_cookie_for(owner).split("=", 1)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with FakeAnthropic() as fake:
        fake.valid_keys = {OWNER_KEY}
        web, base_url = start_web_server(tmp_path, ANTHROPIC_BASE_URL=fake.base_url)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                context = browser.new_context(viewport={"width": 1100, "height": 1300})
                context.add_cookies([{"name": name, "value": value, "url": base_url}])
                page = context.new_page()
                page.goto(base_url + "/")
                page.click("text=Provider keys")
                assert page.url.endswith("/settings/provider-keys/")
                page.screenshot(path=str(ARTIFACTS / "1-empty.png"), full_page=True)

                section = page.locator("section.provider-key", has=page.locator("h2", has_text="Anthropic"))
                section.locator("input[name=api_key]").fill(OWNER_KEY)
                with page.expect_navigation():
                    section.locator("button[value=save]").click()
                assert "will not be shown again" in page.inner_text("body")
                assert OWNER_KEY not in page.content()
                assert "…93f1" in page.inner_text("body")
                page.screenshot(path=str(ARTIFACTS / "2-stored.png"), full_page=True)

                section = page.locator("section.provider-key", has=page.locator("h2", has_text="Anthropic"))
                with page.expect_navigation():
                    section.locator("button[value=test]").click()
                assert "The key works." in page.inner_text("body")
                page.screenshot(path=str(ARTIFACTS / "3-tested.png"), full_page=True)

                section = page.locator("section.provider-key", has=page.locator("h2", has_text="OpenAI-compatible"))
                section.locator("input[name=api_key]").fill("sk-local")
                section.locator("input[name=base_url]").fill("http://169.254.169.254/latest/")
                with page.expect_navigation():
                    section.locator("button[value=save]").click()
                assert "cloud metadata address" in page.inner_text("body")
                page.screenshot(path=str(ARTIFACTS / "4-refused.png"), full_page=True)

                # The Context panel of an agent on a model the catalogue does not know says so, and how its
                # pressure is measured.
                page.goto(f"{base_url}/workflows/{workflow.pk}/context/")
                assert "Unknown model" in page.inner_text("#ctx-model-note")
                assert "no token counter" in page.inner_text("#ctx-pressure-method")
                page.screenshot(path=str(ARTIFACTS / "5-context-panel.png"), full_page=True)
                browser.close()
        finally:
            web.stop()
    assert [(r.method, r.path, fake.presented_key(r)) for r in fake.requests] == [("GET", "/v1/models", OWNER_KEY)]
    assert list(OwnerProviderKey.objects.values_list("provider", flat=True)) == ["anthropic"]
