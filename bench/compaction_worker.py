#!/usr/bin/env python
"""The Celery worker `bench/compaction.py` starts: the project's worker, with every compaction summary taking
BENCH_SUMMARY_SECONDS longer (the offline summary is instant; a real provider's takes seconds, and the bench is
about the turns that keep coming meanwhile). Arguments are Celery's (`-A opencompany worker ...`)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")

import django  # noqa: E402

django.setup()

import providers  # noqa: E402

_summarize = providers.summarize
_delay = float(os.environ.get("BENCH_SUMMARY_SECONDS", "2"))


def slow_summarize(**kwargs):
    time.sleep(_delay)
    return _summarize(**kwargs)


providers.summarize = slow_summarize  # agents.services.compaction calls `providers.summarize` at call time

if __name__ == "__main__":
    from celery.__main__ import main

    sys.argv = ["celery", *sys.argv[1:]]
    sys.exit(main())
