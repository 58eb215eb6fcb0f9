"""Webhook triggers (docs/triggers.md#webhooks): the hook's address, and a delivery's way from the request to a
turn in the owner's chat.

A delivery is checked in this order, each refusal a JSON answer with no fire recorded: unknown address, stopped or
deleted workflow, or a node the live generation does not have (404, all the same); over the hook's rate (429 with
Retry-After); a body over the cap (413); a bad or old signature (401); a content type that is neither JSON nor a
form (415); a body that does not parse (400). Then one fire is recorded (a retried delivery with the same
Idempotency-Key or X-Delivery-Id finds it) and handed to the chat at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import time
from dataclasses import dataclass
from urllib.parse import parse_qs

import redis
from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction

from chat.selectors import chat_run_answer
from core.errors import NotFoundError, ServiceError
from provider_keys.secrets import owner_secret_values
from workflows.graph import nodes_by_id

from .models import TriggerFire, Webhook
from .nodes import WEBHOOK_TRIGGER
from .selectors import webhook_with_live_graph
from .services import fire_hand_over, fire_insert

SIGNATURE_HEADER = "X-OpenCompany-Signature"
DELIVERY_HEADERS = ("Idempotency-Key", "X-Delivery-Id")
REFUSED_KEY = "triggers:webhook:refused:{status}:{window}"
REFUSED_STATUSES = (400, 401, 404, 413, 415, 429)


class WebhookRefused(ServiceError):
    """A delivery refused: answered as JSON with its status (and Retry-After for 429)."""


def _refusal_window(now: float) -> tuple[int, int]:
    """(the current counting window's number, seconds until it ends)."""
    length = settings.TRIGGERS_WEBHOOK_REFUSED_WINDOW_SECONDS
    return int(now) // length, length - int(now) % length


def _refused(status: int, code: str, message: str, **headers) -> WebhookRefused:
    # A counter per status and window, gone when its window ends: refusals (an address scanned, a sender with a
    # wrong secret) leave nothing behind in Redis for ever.
    for _ in range(2):  # a second try when the window ended (its key expired) between the two calls
        window, left = _refusal_window(time.time())
        key = REFUSED_KEY.format(status=status, window=window)
        cache.add(key, 0, timeout=left + 1)
        try:
            cache.incr(key)
            break
        except ValueError:
            continue
    return WebhookRefused(code, message, status=status, headers=headers or None)


def refusal_counts(*, now: float | None = None) -> dict[int, int]:
    """Deliveries refused in the current window (TRIGGERS_WEBHOOK_REFUSED_WINDOW_SECONDS), by status."""
    window, _ = _refusal_window(time.time() if now is None else now)
    keys = {s: REFUSED_KEY.format(status=s, window=window) for s in REFUSED_STATUSES}
    values = cache.get_many(list(keys.values()))
    return {s: int(values.get(key) or 0) for s, key in keys.items()}


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# --- the address ------------------------------------------------------------------------------------------------


def webhook_address_issue(*, workflow, node_id: str) -> tuple[Webhook, str]:
    """Make (or remake: Regenerate) the hook's secret address for a webhook node of the workflow's graph. Returns
    the row and the id, which is shown this once and never stored (only its SHA-256 is)."""
    node = nodes_by_id(workflow.graph if isinstance(workflow.graph, dict) else {}).get(node_id)
    if node is None or node.get("type") != WEBHOOK_TRIGGER.type:
        raise NotFoundError("not_found", "No such webhook trigger.")
    token = secrets.token_urlsafe(32)  # 256 random bits
    with transaction.atomic():
        hook, created = Webhook.objects.get_or_create(
            workflow=workflow, node_id=node_id, defaults={"token_hash": _digest(token), "hint": token[-4:]}
        )
        if not created:
            hook.token_hash, hook.hint = _digest(token), token[-4:]
            hook.save(update_fields=["token_hash", "hint", "updated_at"])
    return hook, token


# --- a delivery -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveHook:
    hook: Webhook
    params: object  # WebhookTriggerParams


def _live_hook(token: str) -> LiveHook:
    """The hook behind an address, while its workflow runs a generation that has the node; else the one 404."""
    hook, graph = webhook_with_live_graph(token_hash=_digest(token or ""))
    node = nodes_by_id(graph).get(hook.node_id) if isinstance(graph, dict) else None
    if node is None or node.get("type") != WEBHOOK_TRIGGER.type:
        raise _refused(404, "not_found", "No such hook.")
    return LiveHook(hook, WEBHOOK_TRIGGER.params_model.model_validate(node.get("params") or {}))


_redis_client: tuple[int, redis.Redis] | None = None


def _redis() -> redis.Redis:
    global _redis_client
    if _redis_client is None or _redis_client[0] != os.getpid():  # a forked worker must not share its sockets
        _redis_client = (
            os.getpid(),
            redis.Redis.from_url(
                settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=settings.REDIS_SOCKET_TIMEOUT_SECONDS
            ),
        )
    return _redis_client[1]


def _rate_check(hook: Webhook) -> None:
    # One round trip: the minute's counter made (expiring) when missing, and counted.
    window = int(time.time()) // 60
    key = f"opencompany:triggers:webhook:rate:{hook.pk}:{window}"
    pipe = _redis().pipeline(transaction=False)
    pipe.set(key, 0, ex=120, nx=True)
    pipe.incr(key)
    _, count = pipe.execute()
    if count > settings.TRIGGERS_WEBHOOK_RATE_PER_MINUTE:
        retry = str(60 - int(time.time()) % 60)
        raise _refused(
            429, "rate_limited", "Too many deliveries to this hook; wait a little.", **{"Retry-After": retry}
        )


def _signature_check(live: LiveHook, body: bytes, header: str, *, now: float) -> None:
    name = live.params.signing_secret
    if not name:
        return
    secret = owner_secret_values(owner_id=live.hook.workflow.owner_id, names=[name]).get(name)
    if not secret:
        raise _refused(401, "bad_signature", "The hook's signing secret is not set.")
    parts = dict(part.split("=", 1) for part in (header or "").split(",") if "=" in part)
    stamp, given = parts.get("t", ""), parts.get("v1", "")
    if not stamp.isdigit():
        raise _refused(401, "bad_signature", f"Sign the delivery: {SIGNATURE_HEADER}: t=<unix time>,v1=<hex>.")
    if abs(now - int(stamp)) > settings.TRIGGERS_WEBHOOK_TOLERANCE_SECONDS:
        raise _refused(401, "stale_signature", "The signature's time is outside the allowed window.")
    expected = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise _refused(401, "bad_signature", "The signature does not match the body.")


def sign(secret: str, body: bytes, *, stamp: int) -> str:
    """The signature header's value for `body` at `stamp` (for callers and tests)."""
    digest = hmac.new(secret.encode(), str(stamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={stamp},v1={digest}"


def _parse(body: bytes, content_type: str):
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        try:
            return json.loads(body.decode("utf-8") or "null")
        except (UnicodeDecodeError, ValueError):
            raise _refused(400, "invalid_json", "The body is not valid JSON.") from None
    if kind == "application/x-www-form-urlencoded":
        try:
            pairs = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body))
        except (UnicodeDecodeError, ValueError):
            raise _refused(400, "invalid_form", "The form body does not parse.") from None
        return {key: values[0] if len(values) == 1 else values for key, values in pairs.items()}
    raise _refused(415, "unsupported_media_type", "Send application/json or application/x-www-form-urlencoded.")


_FIELD = re.compile(r"\{(name|body(?:\.[A-Za-z0-9_\-]+|\[\d+\])*)\}")
_STEP = re.compile(r"\.([A-Za-z0-9_\-]+)|\[(\d+)\]")


def _pick(data, path: str):
    for key, index in _STEP.findall(path[len("body") :]):
        if key and isinstance(data, dict):
            data = data.get(key)
        elif index and isinstance(data, list) and int(index) < len(data):
            data = data[int(index)]
        else:
            return None
    return data


def render_delivery(template: str, *, name: str, body) -> str:
    """The message with {name}, {body} and {body.a.b[0]} filled in by lookup in the parsed body: plain data, no
    template language."""

    def value(match) -> str:
        if match.group(1) == "name":
            return name
        picked = _pick(body, match.group(1))
        if picked is None:
            return ""
        return picked if isinstance(picked, str) else json.dumps(picked, ensure_ascii=False)

    return _FIELD.sub(value, template)[: settings.CHAT_MESSAGE_MAX_CHARS]


def webhook_receive(
    *, token: str, body: bytes, content_type: str, headers, now: float | None = None
) -> tuple[TriggerFire, bool]:
    """Check and record one delivery, and hand it to the chat. Returns (fire, replayed)."""
    now = time.time() if now is None else now
    live = _live_hook(token)
    _rate_check(live.hook)
    if len(body) > settings.TRIGGERS_WEBHOOK_MAX_BYTES:
        raise _refused(413, "too_large", f"The body is over {settings.TRIGGERS_WEBHOOK_MAX_BYTES} bytes.")
    _signature_check(live, body, headers.get(SIGNATURE_HEADER, ""), now=now)
    parsed = _parse(body, content_type)
    key = next((headers.get(h) for h in DELIVERY_HEADERS if headers.get(h)), None)
    key = key.strip()[:200] if key else None
    if key:
        first = TriggerFire.objects.filter(webhook=live.hook, delivery_key=key).first()
        if first is not None:
            return first, True
    text = render_delivery(live.params.message, name=live.params.name, body=parsed)
    empty = not text.strip()
    try:
        # The fire and its turn in one transaction (one commit): a retry with the same key waits on the unique
        # index until this commits, then finds the fire with its run.
        with transaction.atomic():
            fire = TriggerFire(
                webhook=live.hook,
                workflow_id=live.hook.workflow_id,
                node_id=live.hook.node_id,
                kind=TriggerFire.Kind.WEBHOOK,
                name=live.params.name,
                delivery_key=key,
                text=text,
                state=TriggerFire.State.FAILED if empty else TriggerFire.State.QUEUED,
                error_code="empty_message" if empty else "",
            )
            fire_insert(fire)
            if not empty:
                fire_hand_over(fire, workflow=live.hook.workflow)
    except IntegrityError:  # the same delivery, at the same moment, from a retrying sender
        first = TriggerFire.objects.filter(webhook=live.hook, delivery_key=key).first() if key else None
        if first is None:
            raise
        return first, True
    return fire, False


def webhook_fire_state(*, token: str, fire_id, headers, now: float | None = None) -> dict:
    """What a delivery became: its fire's state and, once its turn ended, the answer. The same address (and
    signature over an empty body, when the hook is signed) as a delivery."""
    now = time.time() if now is None else now
    live = _live_hook(token)
    _signature_check(live, b"", headers.get(SIGNATURE_HEADER, ""), now=now)
    try:
        fire = TriggerFire.objects.filter(webhook=live.hook, pk=int(fire_id)).first()
    except (TypeError, ValueError):
        fire = None
    if fire is None:
        raise _refused(404, "not_found", "No such run.")
    return fire_data(fire, workflow=live.hook.workflow)


def fire_data(fire: TriggerFire, *, workflow) -> dict:
    data = {"run_id": fire.pk, "state": fire.state, "error_code": fire.error_code, "chat_run_id": fire.chat_run_id}
    if fire.chat_run_id is not None:
        data["turn"] = chat_run_answer(workflow=workflow, run_id=fire.chat_run_id)
    return data
