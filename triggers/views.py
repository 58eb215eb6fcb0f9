"""The public hook endpoints: `POST /hooks/<id>/` (a delivery) and `GET /hooks/<id>/runs/<run id>/` (its state).
No session, no CSRF: the unguessable address (and the signature, when the hook has a secret) is the credential.
Every answer is JSON; refusals are counted for /metrics."""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from .webhooks import WebhookRefused, webhook_fire_state, webhook_receive


def _refusal(exc: WebhookRefused) -> JsonResponse:
    response = JsonResponse(exc.as_dict(), status=exc.status)
    for name, value in exc.headers.items():
        response[name] = value
    return response


@csrf_exempt
@require_POST
def hook_deliver(request, token: str):
    # One byte past the cap is enough to know it is over; the rest is never read.
    body = request.read(settings.TRIGGERS_WEBHOOK_MAX_BYTES + 1)
    try:
        fire, replayed = webhook_receive(
            token=token, body=body, content_type=request.content_type or "", headers=request.headers
        )
    except WebhookRefused as exc:
        return _refusal(exc)
    return JsonResponse({"run_id": fire.pk, "state": fire.state, "replayed": replayed}, status=202)


@require_GET
def hook_run(request, token: str, fire_id: int):
    try:
        return JsonResponse(webhook_fire_state(token=token, fire_id=fire_id, headers=request.headers))
    except WebhookRefused as exc:
        return _refusal(exc)
