"""What the editor's browser tests do on the page as an owner does: drag from the palette, wire with the mouse,
call the API from the page with its session."""

from __future__ import annotations

NODE = ".drawflow-node"


def drag_from_palette(page, node_type: str, x: int, y: int) -> None:
    canvas = page.locator("#canvas").bounding_box()
    page.locator(f".palette-item[data-type='{node_type}']").drag_to(
        page.locator("#canvas"), target_position={"x": x, "y": y}
    )
    assert canvas is not None


def wire(page, source: str, output: str, target: str, input_: str) -> None:
    """Drag from an output dot to an input dot with the mouse, as an owner does."""
    start = page.locator(f"{source} .output[data-handle='{output}']").bounding_box()
    end = page.locator(f"{target} .input[data-handle='{input_}']").bounding_box()
    page.mouse.move(start["x"] + start["width"] / 2, start["y"] + start["height"] / 2)
    page.mouse.down()
    page.mouse.move(end["x"] + 2, end["y"] + 2, steps=8)
    page.mouse.move(end["x"] + end["width"] / 2, end["y"] + end["height"] / 2, steps=4)
    page.mouse.up()


def api(page, method: str, path: str, body=None):
    """A same-origin request from the page (the session and CSRF cookie it has)."""
    return page.evaluate(
        """async ([method, path, body]) => {
            const token = (document.cookie.match(/csrftoken=([^;]+)/) || [])[1] || "";
            const response = await fetch(path, {method, headers: {"Content-Type": "application/json",
                "X-CSRFToken": token}, body: body === null ? undefined : JSON.stringify(body)});
            return {status: response.status, body: await response.json().catch(() => null)};
        }""",
        [method, path, body],
    )
