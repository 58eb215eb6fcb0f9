"""Whether an MCP tool runs when the agent calls it, waits for the owner's approval first, or is never offered.

The owner sets it per ticked tool in the node's panel (`policy` in the node's params); a tool left unset gets the
default its server's annotations suggest (docs/tools.md#approvals): a tool the server marks read-only runs, every
other one (marked destructive, or with no annotations at all) asks first. An annotation is the server's word, not
a guarantee, so nothing is trusted to run by default that the server did not say is read-only.
"""

from __future__ import annotations

from typing import Literal

RUN = "run"
ASK = "ask"
NEVER = "never"

Policy = Literal["run", "ask", "never"]

POLICY_WORDS = {RUN: "Run", ASK: "Ask first", NEVER: "Never"}


def default_policy(annotations: dict | None) -> str:
    annotations = annotations or {}
    if annotations.get("readOnlyHint") is True and annotations.get("destructiveHint") is not True:
        return RUN
    return ASK


def effective_policy(policy: str | None, annotations: dict | None) -> str:
    """The owner's choice when they made one, else the default from the annotations."""
    return policy if policy in (RUN, ASK, NEVER) else default_policy(annotations)
