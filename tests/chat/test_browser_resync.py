"""The chat page heals its stream in Debian's Chromium: a delta it never got (dropped on the way) makes it refetch
the text so far, and a Redis that lost its data (a new hub epoch, counters restarted) resets the page's seq so the
answer keeps streaming without a reload. Screenshots land in test-artifacts/chat/."""

from __future__ import annotations

import json
import re
import threading

import pytest
import redis

from tests.chat.helpers import LONG, answers, shot
from tests.processes import running_site, start_spare_redis

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def own_redis_stack(tmp_path):
    """Web server and worker on a Redis of their own, so the test may make it forget everything."""
    server, url = start_spare_redis(tmp_path)
    env = {"REDIS_URL": url, "OFFLINE_PROVIDER_DELAY_MS": "60", "WEBSOCKET_REJOIN_SECONDS": "1"}
    try:
        with running_site(tmp_path, web_env=env, **env) as base_url:
            yield base_url, url
    finally:
        server.kill()
    server.wait(5)


def _open_chat(page, base_url, workflow, cookie):
    page.context.add_cookies([{**cookie, "url": base_url}])
    page.goto(f"{base_url}/workflows/{workflow.pk}/chat/")
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")


def _snapshot_requests(page, workflow) -> list[str]:
    fetched: list[str] = []
    snapshot = re.compile(rf"/api/workflows/{workflow.pk}/chat/$")
    page.on("request", lambda r: fetched.append(r.url) if r.method == "GET" and snapshot.search(r.url) else None)
    return fetched


def test_a_page_that_misses_a_delta_refetches_the_text(setup, own_redis_stack, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    base_url, _ = own_redis_stack
    owner, workflow, _, cookie = setup
    dropped: dict = {}
    lock = threading.Lock()

    def relay(ws):
        # Between the page and the server: every frame passes except the 6th delta of the first run.
        server = ws.connect_to_server()
        deltas = {"n": 0}

        def from_server(message):
            event = json.loads(message)
            if event.get("type") == "run.delta":
                with lock:
                    deltas["n"] += 1
                    if deltas["n"] == 6 and not dropped:
                        dropped.update(event)
                        return
            ws.send(message)

        server.on_message(from_server)
        ws.on_message(lambda message: server.send(message))

    page.route_web_socket(re.compile(r".*/ws/workflows/.*"), relay)
    _open_chat(page, base_url, workflow, cookie)
    fetched = _snapshot_requests(page, workflow)
    page.get_by_label("Message", exact=True).fill(LONG)
    page.keyboard.press("Enter")
    streaming = page.locator("li.streaming")
    expect(streaming).to_contain_text("word30", timeout=20_000)  # well past the dropped delta
    assert dropped, "the relay dropped a delta"
    missing = dropped["text"].strip()
    # While it still streams, the page has the text it never received: it saw the gap and refetched.
    expect(streaming).to_contain_text(missing, timeout=5_000)
    assert len(fetched) >= 2, fetched  # the send's refetch, then the one the gap asked for
    shot(page, "resync-01-missed-delta-refetched")
    expect(answers(page)).to_have_count(1, timeout=30_000)
    assert "word299" in answers(page).first.inner_text()


def test_a_page_keeps_streaming_after_redis_forgets_everything(setup, own_redis_stack, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    base_url, redis_url = own_redis_stack
    owner, workflow, _, cookie = setup
    _open_chat(page, base_url, workflow, cookie)
    epoch_before = page.evaluate("JSON.parse(document.getElementById('chat-thread').textContent).hub_epoch")
    page.get_by_label("Message", exact=True).fill(" ".join(f"word{i}" for i in range(600)))
    page.keyboard.press("Enter")
    streaming = page.locator("li.streaming")
    # Late in the answer: the page's seq (~135) stays above anything the restarted counter reaches before the end,
    # so a page that kept its old seq would ignore every later event, the end included.
    expect(streaming).to_contain_text("word400", timeout=30_000)
    # Redis forgets every key: group memberships, the run's counter and text, the hub epoch.
    redis.Redis.from_url(redis_url).flushall()
    shown = len(streaming.locator(".body").inner_text())
    # The socket re-joins and says hello with a new epoch; the page refetches, takes the new epoch's seq, and the
    # answer goes on growing on the page while it streams (with the old seq it would ignore every new delta).
    page.wait_for_function(
        "document.querySelector('li.streaming .body') && "
        f"document.querySelector('li.streaming .body').innerText.length > {shown + 300}",
        timeout=10_000,
    )
    text = streaming.locator(".body").inner_text()
    assert "You said: word0 word1" in text, text[:200]  # the text from before the flush, re-seeded
    shot(page, "resync-02-after-redis-flush")
    expect(answers(page)).to_have_count(1, timeout=30_000)
    final = answers(page).first.inner_text()
    assert "word599" in final and final.count("word150 ") == 1
    status = page.evaluate(
        "fetch(location.pathname.replace(/^\\/workflows\\/(\\d+)\\/chat\\/$/, '/api/workflows/$1/chat/'))"
        ".then(r => r.json()).then(d => d.hub_epoch)"
    )
    assert status != epoch_before
