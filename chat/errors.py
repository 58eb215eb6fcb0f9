"""The chat's refusals (docs/chat.md#refusals): a stable code the page and API clients branch on, and plain words
for the owner."""

from core.errors import ConflictError, NotFoundError, ServiceError
from workflows.graph import NO_ANSWERING_AGENT_MESSAGE

PLAIN_WORDS = {
    "run_in_progress": "An answer is still being worked on. Wait for it or press Stop, then try again.",
    "approval_pending": (
        "The answer is waiting for your decision on a tool call. Approve or deny it, or press Stop, then send again."
    ),
    "revision_conflict": "The chat changed in another tab or window. The page has been refreshed; try again.",
    "cannot_rewind": (
        "The agent's conversation was summarized or cleared since then, so it cannot go back to that point."
    ),
    "branch_unavailable": "That version is no longer kept, so the agent cannot return to it.",
    "older_generation": "That message belongs to an earlier run of this workflow (before a Start or Reset).",
    "not_editable": "That message cannot be changed here.",
    "not_found": "That message or answer does not exist.",
    "invalid_request": "The request is not valid.",
    "no_answering_agent": NO_ANSWERING_AGENT_MESSAGE,
    "workflow_stopped": "This workflow is stopped. Start it again to chat.",
}


# Why an answer ended without finishing, in the owner's words (the badge under it); unknown codes show as is.
RUN_END_WORDS = {
    "reset": "the workflow was reset",
    "not_delivered": "no worker picked it up",
    "timed_out": "it took too long",
    "interrupted": "the worker stopped",
    "max_iterations": "too many tool steps",
    "failed": "the agent failed",
    # A provider's refusal (agents/services/execute.py: `provider_` + providers/errors.py's code).
    "provider_auth": "the provider refused the key",
    "provider_rate_limited": "the provider asked to slow down",
    "provider_context_too_long": "the conversation is too long for the model",
    "provider_invalid_request": "the provider refused the request",
    "provider_server_error": "the provider had an error",
    "provider_network": "the provider could not be reached",
    "provider_truncated": "the answer was cut off",
    "provider_provider_error": "the provider failed",
}


def refuse(code: str, message: str | None = None, **extra) -> ServiceError:
    text = message or PLAIN_WORDS.get(code, code.replace("_", " "))
    if code == "not_found":
        return NotFoundError(code, text, extra=extra or None)
    if code in ("invalid_request", "not_editable", "no_answering_agent"):
        return ServiceError(code, text, status=400, extra=extra or None)
    return ConflictError(code, text, extra=extra or None)
