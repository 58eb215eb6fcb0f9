"""The one clock memory reads, so expiry can be tested with a frozen time (monkeypatch `memory.clock.now`)."""

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()
