from celery import shared_task

from chat.watchdog import chat_watchdog_sweep


@shared_task(name="chat.watchdog", ignore_result=True)
def chat_watchdog() -> None:
    chat_watchdog_sweep()
