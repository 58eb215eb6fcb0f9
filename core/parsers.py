"""JSON bodies with a bounded nesting depth and only storable text: refused whole, never recursed into."""

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def json_depth_exceeds(value, limit: int) -> bool:
    """Iterative, so a hostile document cannot exhaust the stack while being measured."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return False


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("The JSON document is nested too deeply.") from None
        if json_depth_exceeds(data, settings.REQUEST_MAX_JSON_DEPTH):
            raise ParseError(f"The JSON document is nested deeper than {settings.REQUEST_MAX_JSON_DEPTH} levels.")
        # Every API body passes here, so graph params, memory items and chat texts are all checked by this one
        # call; the 400 carries the path of the offending value.
        from core.text import require_storable  # not at import: DRF loads this class while its own views load

        return require_storable(data)
