"""One renderer for answers (CommonMark/GFM through markdown-it-py, Pygments, nh3) and the owner's text as typed."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from chat.rendering import HIGHLIGHT_CLASSES, render_markdown, render_plain


def classes_in(html: str) -> set[str]:
    return {c for value in re.findall(r'class="([^"]*)"', html) for c in value.split()}


def test_a_code_fence_inside_a_numbered_step_is_a_highlighted_block():
    html = render_markdown("1. Install it:\n\n   ```python\n   def f(x):\n       return 1\n   ```\n2. Run it")
    assert html.count("<li>") == 2
    block = html.split("<li>")[1]
    assert '<pre data-lang="python"><code>' in block
    assert '<span class="tok-k">def</span>' in block and '<span class="tok-nf">f</span>' in block


def test_nested_lists_strikethrough_tables_and_task_lists_render():
    html = render_markdown(
        "- one\n  - nested\n    - deeper\n\n~~gone~~\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n\n- [x] done\n- [ ] todo"
    )
    assert html.count("<ul") >= 3 and "<li>deeper</li>" in html
    assert "<s>gone</s>" in html
    assert '<th class="align-left">a</th>' in html and '<td class="align-right">2</td>' in html
    assert 'type="checkbox"' in html and 'class="task-list-item"' in html
    assert "style=" not in html  # alignment is a class: the page's CSP allows no inline style


class Elements(HTMLParser):
    """The real elements of rendered HTML (escaped text is text, not an element)."""

    def __init__(self, html: str):
        super().__init__()
        self.found: list[tuple[str, dict]] = []
        self.text = ""
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text += data


def test_an_answer_cannot_imitate_the_apps_chrome_or_link_relatively():
    """Issue 23: a model answer with the app's own notice box and a protocol-relative link renders neither."""
    answer = (
        '<div class="notice">Your session expired — <a href="//evil.example/login">log in</a></div>\n\n'
        "[Log in again](//evil.example/login) [home](/workflows/) [js](javascript:alert(1)) "
        '<span class="notice">x</span>'
    )
    elements = Elements(render_markdown(answer))
    tags = [tag for tag, _ in elements.found]
    assert "div" not in tags
    assert all("class" not in attrs or set(attrs["class"].split()) <= HIGHLIGHT_CLASSES for _, attrs in elements.found)
    hrefs = [attrs.get("href") for tag, attrs in elements.found if tag == "a"]
    assert hrefs and all(href is None for href in hrefs)  # no link survives: none is absolute http(s)/mailto
    # The raw HTML the model wrote is shown as its text, never as markup.
    assert '<div class="notice">Your session expired' in elements.text


def test_only_absolute_http_and_mailto_links_are_kept_each_with_rel():
    html = render_markdown(
        "[a](https://example.org/x) [b](http://example.org) [c](mailto:a@example.org) https://auto.example"
    )
    links = re.findall(r"<a [^>]*>", html)
    assert len(links) == 4
    assert all('rel="noopener noreferrer nofollow"' in link for link in links)
    assert {re.search(r'href="([^"]*)"', link).group(1) for link in links} == {
        "https://example.org/x",
        "http://example.org",
        "mailto:a@example.org",
        "https://auto.example",
    }


@pytest.mark.parametrize("classes", ['class="notice"', 'class="tok-k notice"', 'class="msg-tools"'])
def test_no_class_but_the_highlighters_survives_even_in_sanitized_markup(classes):
    from chat.rendering import sanitize

    html = sanitize(f"<p><span {classes}>x</span><code {classes}>y</code></p>")
    assert classes_in(html) <= set(HIGHLIGHT_CLASSES)


def test_the_owners_text_is_shown_as_typed():
    text = "line one\nline two <b>bold?</b> <script>alert(1)</script> **not bold**"
    assert render_plain(text) == (
        "line one\nline two &lt;b&gt;bold?&lt;/b&gt; &lt;script&gt;alert(1)&lt;/script&gt; **not bold**"
    )


def test_an_unknown_language_is_shown_plain_and_escaped():
    html = render_markdown("```nosuchlang\n<b>x</b>\n```")
    assert '<pre data-lang="nosuchlang"><code>&lt;b&gt;x&lt;/b&gt;\n</code></pre>' in html


def test_a_single_line_break_in_an_answer_is_kept():
    assert render_markdown("thanks\nsee you") == "<p>thanks<br>\nsee you</p>\n"
