"""Chat text as safe HTML. The owner's messages are shown as typed (escaped; CSS keeps the line breaks). Answers go
through one Markdown renderer with CommonMark/GFM behaviour (markdown-it-py: tables, strikethrough, autolinks, task
lists), fenced code highlighted by Pygments, then an allow-list sanitizer (nh3).

The model's text is untrusted. Raw HTML in it is shown as text (the renderer escapes it), and nh3 keeps only the
tags listed here, only the classes the highlighter emits (prefixed `tok-`, so an answer cannot borrow the app's
own classes such as `notice`), and only absolute http(s)/mailto links, each with rel="noopener noreferrer nofollow".
The page renders every answer with this function, while it streams too (`POST .../chat/render/`), so the text does
not jump when the answer ends.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from mdit_py_plugins.tasklists import tasklists_plugin
from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

TOKEN_PREFIX = "tok-"
HIGHLIGHT_CLASSES = frozenset(TOKEN_PREFIX + short for short in STANDARD_TYPES.values() if short)
TASK_CLASSES = frozenset({"task-list-item", "contains-task-list", "task-list-item-checkbox"})
LINK_PREFIXES = ("http://", "https://", "mailto:")
MAX_HIGHLIGHT_CHARS = 100_000  # longer code is shown plain: highlighting it would cost more than it helps

_TAGS = {
    "p", "br", "hr", "strong", "em", "s", "del", "code", "pre", "span", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td", "input",
}  # fmt: skip
_ATTRIBUTES = {
    "a": {"href", "title"},
    "pre": {"data-lang"},
    "ol": {"start"},
    "input": {"type", "checked", "disabled"},
}  # `class` is not listed: nh3 keeps only the classes in _CLASSES
ALIGN_CLASSES = frozenset({"align-left", "align-center", "align-right"})
_CLASSES = {
    "span": set(HIGHLIGHT_CLASSES),
    "ul": set(TASK_CLASSES),
    "li": set(TASK_CLASSES),
    "input": set(TASK_CLASSES),
    "th": set(ALIGN_CLASSES),
    "td": set(ALIGN_CLASSES),
}
# Table alignment as a class, not a style attribute (the Content-Security-Policy allows no inline styles). Only the
# renderer writes this attribute: raw HTML in the text is escaped before it gets here.
_ALIGN_STYLE = re.compile(r' style="text-align:(left|center|right)"')
_FORMATTER = HtmlFormatter(nowrap=True, classprefix=TOKEN_PREFIX)


def _highlight(code: str, lang: str, _attrs) -> str:
    """Fenced code: `<pre data-lang=…><code>` with Pygments' token spans (plain, escaped, for unknown languages)."""
    name = (lang or "").strip().split()[0] if (lang or "").strip() else ""
    body = None
    if name and len(code) <= MAX_HIGHLIGHT_CHARS:
        try:
            body = pygments_highlight(code, get_lexer_by_name(name), _FORMATTER)
        except ClassNotFound:
            body = None
    if body is None:
        body = html.escape(code)
    label = f' data-lang="{html.escape(name)}"' if name else ""
    return f"<pre{label}><code>{body}</code></pre>"


@lru_cache(maxsize=1)
def _renderer() -> MarkdownIt:
    # `breaks`: a single line break in an answer is a line break, as in the chat apps people use (and as the owner's
    # own messages keep theirs); CommonMark would join the lines.
    md = MarkdownIt("commonmark", {"html": False, "linkify": True, "breaks": True, "highlight": _highlight})
    md.enable(["table", "strikethrough", "linkify"])
    md.use(tasklists_plugin)
    return md


def _keep_attribute(element: str, attribute: str, value: str) -> str | None:
    if element == "a" and attribute == "href":
        # Absolute links only: a relative or protocol-relative one (`//evil.example`) would pass for the app's own.
        return value if value.lower().startswith(LINK_PREFIXES) else None
    if element == "input" and attribute == "type":
        return value if value == "checkbox" else None
    return value


def sanitize(markup: str) -> str:
    return nh3.clean(
        markup,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        allowed_classes=_CLASSES,
        attribute_filter=_keep_attribute,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


def render_markdown(text: str) -> str:
    """An answer (the model's Markdown) as sanitized HTML."""
    return sanitize(_ALIGN_STYLE.sub(r' class="align-\1"', _renderer().render(text or "")))


def render_plain(text: str) -> str:
    """The owner's message exactly as typed: escaped, nothing interpreted (CSS `white-space: pre-wrap` keeps the
    line breaks)."""
    return html.escape(text or "", quote=False)
