"""What both OpenAI-shaped fakes (Responses, Chat Completions) answer on GET /v1/models: the key check included."""

from __future__ import annotations

from .base import ErrorReply, FakeProviderServer, RawReply, RecordedRequest, json_reply


def model_list(fake: FakeProviderServer, request: RecordedRequest, model_id: str) -> RawReply:
    """The model list with the one model `model_id`, or the API's 401 for a key the fake does not accept."""
    if fake.key_refused(request):
        key = fake.presented_key(request)
        return fake.render_error(
            ErrorReply(
                401,
                f"Incorrect API key provided: {key[:3]}***{key[-4:]}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                kind="invalid_request_error",
            )
        )
    model = {"id": model_id, "object": "model", "created": 1754000000, "owned_by": "system"}
    return json_reply(200, {"object": "list", "data": [model]})
