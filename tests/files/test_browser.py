"""Files in the chat page, in Debian's Chromium against the real web server and worker with the offline agent:
paste an image and attach a PDF, see the chips, send, see the thumbnail, the document chip and the agent's
description, edit the message and the files stay. A refused file says why on its own chip. Screenshots at 1280 and
390 px land in test-artifacts/files/."""

from __future__ import annotations

import base64

import pytest

from tests.chat.helpers import chat_workflow
from tests.files.samples import pdf, png
from tests.processes import REPO_ROOT, chromium_page, running_site

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "files"
PASSWORD = "pw-for-browser-files"

PASTE = """([data, name]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], name, { type: "image/png" }));
  const composer = document.getElementById("composer");
  composer.focus();
  composer.dispatchEvent(new ClipboardEvent("paste", { clipboardData: transfer, bubbles: true, cancelable: true }));
}"""


@pytest.fixture
def setup(make_user):
    from tests.realtime import session_cookie_for

    owner = make_user("files-owner", password=PASSWORD)
    workflow, _, _ = chat_workflow(owner)
    name, value = session_cookie_for(owner).split("=", 1)
    return workflow, {"name": name, "value": value}


@pytest.fixture
def text_only(setup):
    """A workflow of the same owner whose agent's model takes neither images nor documents (the catalogue says)."""
    from tests.agents.factories import agent_node, edge, started_workflow

    workflow, _ = setup
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", "Old", provider="openai", model="gpt-3.5"),
    ]
    edges = [edge("trigger", "output-main", "lead", "input-main")]
    return started_workflow(workflow.owner, nodes, edges, name="text only")[0]


@pytest.fixture
def stack(tmp_path, file_storage_dir):
    folder = str(file_storage_dir)  # the web server stores, the worker reads: one folder for both
    with running_site(tmp_path, web_env={"FILE_STORAGE_DIR": folder}, FILE_STORAGE_DIR=folder) as base_url:
        yield base_url


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_paste_an_image_attach_a_pdf_send_and_edit_and_the_files_stay(setup, stack, tmp_path):
    from playwright.sync_api import expect

    workflow, cookie = setup
    image = png(64, 48)
    with chromium_page(tmp_path / "profile", width=1280, height=860) as page:
        page.context.add_cookies([{**cookie, "url": stack}])
        page.goto(f"{stack}/workflows/{workflow.pk}/chat/")
        page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")

        page.evaluate(PASTE, [base64.b64encode(image).decode(), "image.png"])
        page.set_input_files(
            "#attach-input",
            files=[
                {"name": "report.pdf", "mimeType": "application/pdf", "buffer": pdf(2)},
                {"name": "fake.png", "mimeType": "image/png", "buffer": b"these are words, not a picture"},
            ],
        )
        chips = page.locator("#attachments .attachment")
        expect(page.locator("#attachments .attachment.ready")).to_have_count(2)
        refused = chips.filter(has_text="fake.png")
        expect(refused).to_have_class("attachment error")
        expect(refused.locator(".file-error")).to_have_text("fake.png is named as PNG but its bytes are not.")
        expect(chips.filter(has_text="report.pdf").locator(".file-size")).to_have_text("1 KB")
        expect(page.locator("#attachments-note")).to_be_hidden()  # the offline agent takes every file as itself
        shot(page, "chips-1280")

        page.get_by_label("Message", exact=True).fill("What do you make of these?")
        page.get_by_role("button", name="Send").click()
        expect(page.locator("#notice")).to_have_text("Remove the files that could not be attached, then send.")
        page.get_by_role("button", name="Remove fake.png").click()
        expect(chips).to_have_count(2)
        page.get_by_role("button", name="Send").click()

        answer = page.locator("#thread > li.msg.assistant:not(.streaming)")
        expect(answer).to_have_count(1, timeout=30_000)
        expect(answer).to_contain_text("I received 1 image, 9 KB; 1 PDF, 2 pages.")
        expect(page.locator("#attachments")).to_be_hidden()
        mine = page.locator("#thread > li.msg.user")
        thumb = mine.locator(".file-thumb img")
        expect(thumb).to_have_attribute("alt", "image.png")
        page.wait_for_function("document.querySelector('.file-thumb img').naturalWidth === 64")
        expect(mine.locator(".file-chip .file-name")).to_have_text("report.pdf")
        href = mine.locator(".file-chip").get_attribute("href")
        with page.expect_download() as download:
            mine.locator(".file-chip").click()
        assert download.value.suggested_filename == "report.pdf" and href.startswith("/api/files/")
        shot(page, "sent-1280")

        mine.get_by_role("button", name="Edit this message").click()
        box = page.get_by_label("Edit your message")
        expect(page.locator(".edit-box .meta")).to_contain_text("Its files stay with it.")
        box.fill("And now, in one line?")
        page.get_by_role("button", name="Save and send").click()
        expect(page.locator("#thread > li.msg.user .user-body")).to_have_text("And now, in one line?", timeout=30_000)
        expect(answer).to_contain_text("You said: And now, in one line?", timeout=30_000)
        expect(answer).to_contain_text("I received 1 image, 9 KB; 1 PDF, 2 pages.")
        expect(mine.locator(".file-thumb img")).to_have_count(1)
        expect(mine.locator(".file-chip .file-name")).to_have_text("report.pdf")
        shot(page, "edited-1280")

        page.set_viewport_size({"width": 390, "height": 760})
        page.evaluate(PASTE, [base64.b64encode(png(8, 8, seed=3)).decode(), "phone photo.png"])
        expect(page.locator("#attachments .attachment.ready")).to_have_count(1)
        shot(page, "edited-390")


def test_the_chat_says_before_sending_what_a_text_only_model_gets_instead(setup, text_only, stack, tmp_path):
    from playwright.sync_api import expect

    _, cookie = setup
    with chromium_page(tmp_path / "profile", width=1280, height=700) as page:
        page.context.add_cookies([{**cookie, "url": stack}])
        page.goto(f"{stack}/workflows/{text_only.pk}/chat/")
        page.evaluate(PASTE, [base64.b64encode(png(8, 8)).decode(), "image.png"])
        page.set_input_files("#attach-input", files=[{"name": "report.pdf", "mimeType": "", "buffer": pdf(2)}])
        expect(page.locator("#attachments .attachment.ready")).to_have_count(2)
        expect(page.locator("#attachments-note")).to_have_text(
            "Not every file goes to gpt-3.5 as itself: image.png as a line naming it: this model does not take "
            "images; report.pdf as its extracted text (this model does not take documents)."
        )
        shot(page, "text-only-note-1280")
        page.get_by_role("button", name="Remove image.png").click()
        page.get_by_role("button", name="Remove report.pdf").click()
        expect(page.locator("#attachments-note")).to_be_hidden()
