"""Parsing Python source in tests without CPython 3.11's shared AST-building counter getting in the way.

CPython 3.11 keeps one depth counter per interpreter while it turns a parse into `ast` objects. A garbage
collection during that work can run a finalizer, switch threads, and let another thread parse too (3.11's
traceback printing parses source lines to draw its carets), and then the first parse fails with
`SystemError: AST constructor recursion depth mismatch` although its source is fine. It failed CI once. The
counter starts afresh with every parse, so parsing again is the remedy; any other error is raised at once.
"""

from __future__ import annotations

import ast

_SHARED_COUNTER_MISMATCH = "AST constructor recursion depth mismatch"


def parse(source: str, filename: str = "<source>") -> ast.Module:
    for attempt in range(3):
        try:
            return ast.parse(source, filename)
        except SystemError as exc:
            if _SHARED_COUNTER_MISMATCH not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")
