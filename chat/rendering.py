"""Stored messages as safe HTML: Markdown (fenced code highlighted by Pygments) then an allow-list sanitizer.

The model's text is untrusted: nh3 removes every tag and attribute not listed here, so a reply cannot carry
script, styles or event handlers into the owner's page.
"""

from __future__ import annotations

import markdown
import nh3

_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "code", "pre", "span", "div", "blockquote",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "span": {"class"}, "div": {"class"}, "code": {"class"}, "th": {"align"}}


def render_markdown(text: str) -> str:
    html = markdown.markdown(
        text or "",
        extensions=["fenced_code", "codehilite", "tables", "sane_lists"],
        extension_configs={"codehilite": {"guess_lang": False, "css_class": "codehilite"}},
        output_format="html",
    )
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
