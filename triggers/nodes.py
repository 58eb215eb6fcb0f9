"""The trigger node types this app owns, registered by `TriggersConfig.ready()`."""

from __future__ import annotations

import re
from datetime import datetime

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, model_validator

from workflows.nodes import FIRES_ON_ITS_OWN, IS_TRIGGER, KIND_MAIN, Handle, NodeSpec

from .cron import ScheduleError, parse_schedule

DEFAULT_MESSAGE = "It is {date} {time}: time for {name}."


class ScheduleTriggerParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field("Schedule", max_length=100, title="Name", description="Shown on its turns: “Scheduled: name”.")
    cron: str = Field(
        "",
        max_length=100,
        title="Cron",
        description="Five fields: minute hour day month weekday, e.g. “0 8 * * 1-5” (weekdays at 8:00). "
        "Empty: use the interval.",
    )
    every_minutes: int | None = Field(
        None, ge=1, le=525_600, title="Every (minutes)", description="Used when the cron is empty. At least 1."
    )
    timezone: str = Field("UTC", max_length=64, title="Time zone", description="An IANA name, e.g. Europe/Berlin.")
    message: str = Field(
        DEFAULT_MESSAGE,
        min_length=1,
        max_length=4000,
        title="Message",
        description="What the agent receives. {date}, {time}, {name} and {missed} are filled in; nothing else is.",
    )

    @model_validator(mode="after")
    def _schedule(self):
        try:
            parse_schedule(cron=self.cron.strip() or None, every_minutes=self.every_minutes, timezone=self.timezone)
        except ScheduleError as exc:
            raise ValueError(str(exc)) from None
        return self


_PLACEHOLDER = re.compile(r"\{(date|time|name|missed)\}")


def render_message(template: str, *, name: str, local: datetime, missed: int) -> str:
    """The message with its few placeholders filled in. A plain substitution: no format string, no template
    language, so a message cannot reach any object."""
    values = {
        "date": local.strftime("%Y-%m-%d"),
        "time": local.strftime("%H:%M"),
        "name": name,
        "missed": str(missed),
    }
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)[: settings.CHAT_MESSAGE_MAX_CHARS]


SCHEDULE_TRIGGER = NodeSpec(
    type="scheduleTrigger",
    label="Schedule trigger",
    params_model=ScheduleTriggerParams,
    outputs=(Handle("output-main", KIND_MAIN, max_connections=1, label="message"),),
    capabilities=frozenset({IS_TRIGGER, FIRES_ON_ITS_OWN}),
    new_params={"name": "Schedule", "cron": "", "every_minutes": 60, "timezone": "UTC", "message": DEFAULT_MESSAGE},
    extra={"turn_label": "Scheduled"},  # its turns: "Scheduled: <name>" (the chat, the run history)
    description="Sends the answering agent a message on a schedule (cron or interval); its turns continue the "
    "chat's conversation and show in the chat, marked “Scheduled”.",
)


class WebhookTriggerParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field("Webhook", max_length=100, title="Name", description="Shown on its turns: “Webhook: name”.")
    message: str = Field(
        "{body}",
        min_length=1,
        max_length=4000,
        title="Message",
        description="What the agent receives. {body} is the whole body; {body.title} or {body.items[0].name} pick "
        "one field; {name} is this trigger's name. Nothing else is filled in.",
    )
    signing_secret: str = Field(
        "",
        max_length=100,
        title="Signing secret",
        description="The name of one of your secrets (saved through /api/secrets/). When set, a delivery must carry "
        "X-OpenCompany-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of “t.body”>. Empty: the address is the key.",
    )


WEBHOOK_TRIGGER = NodeSpec(
    type="webhookTrigger",
    label="Webhook trigger",
    params_model=WebhookTriggerParams,
    outputs=(Handle("output-main", KIND_MAIN, max_connections=1, label="message"),),
    capabilities=frozenset({IS_TRIGGER, FIRES_ON_ITS_OWN}),
    new_params={"name": "Webhook", "message": "{body}", "signing_secret": ""},
    # The editor shows its address with Copy and Regenerate; its turns are "Webhook: <name>".
    extra={"panel": "webhook", "turn_label": "Webhook"},
    description="Another system posts JSON or a form to this trigger's address; the answering agent receives it "
    "as a message in the chat, marked “Webhook”.",
)
