from celery import shared_task
from django.conf import settings

from .services import fire_deliver as deliver
from .services import schedules_sweep


@shared_task(name="triggers.sweep", queue=settings.CELERY_QUEUE_HOUSEKEEPING, ignore_result=True)
def schedules_sweep_task() -> int:
    """Beat sends it every TRIGGERS_SWEEP_SECONDS; any number may run at once (claims skip each other's rows)."""
    return len(schedules_sweep().fired)


@shared_task(name="triggers.fire_deliver", queue=settings.CELERY_QUEUE_HOUSEKEEPING, ignore_result=True)
def fire_deliver(fire_id: int) -> str:
    """Idempotent: a settled fire is left alone, a delivered one finds its first message."""
    fire = deliver(fire_id=fire_id)
    return fire.state if fire else "gone"
