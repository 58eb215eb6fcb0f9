"""Log lines with their structured fields: `... message key=value key=value`.

Code logs ids, timings and counts through `extra={...}`; this formatter prints them so a
line can be grepped and parsed. Message content and keys are never passed as extras.
"""

import logging

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}
        if not fields:
            return line
        return line + " " + " ".join(f"{key}={_value(value)}" for key, value in sorted(fields.items()))


def _value(value) -> str:
    text = str(value)
    return f'"{text}"' if (" " in text or not text) else text


class QuietPeriodicTasks(logging.Filter):
    """Celery's INFO lines about the periodic housekeeping tasks (heartbeat, watchdogs, drains: one every few
    seconds) are DEBUG lines here, so a worker's log at INFO shows the work, not the clock. A sweep that did
    something logs its own INFO line (agents/services/watchdog.py, chat/watchdog.py)."""

    LOGGERS = ("celery.app.trace", "celery.worker.strategy", "celery.beat")

    def __init__(self, task_names) -> None:
        super().__init__()
        self.task_names = tuple(sorted(set(task_names)))

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not record.name.startswith(self.LOGGERS):
            return True
        message = record.getMessage()
        if not any(name in message for name in self.task_names):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
