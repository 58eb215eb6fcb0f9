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
