"""What goes wrong talking to an MCP server, as the rest of the app is told."""

from __future__ import annotations


class McpFailure(Exception):
    """The server could not be reached or answered nothing usable: `message` is a sentence for the owner (or the
    model) saying what and where, never a secret."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


class McpStopped(Exception):
    """The owner pressed Stop while the call ran: the SDK abandoned it (sending `notifications/cancelled`)."""
