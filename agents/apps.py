from django.apps import AppConfig


class AgentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"

    def ready(self) -> None:
        from celery.signals import worker_shutting_down

        from conversations.events import register_conversation_listener
        from core.metrics import register_metrics_source
        from workflows.listeners import (
            register_archive_listener,
            register_generation_end_listener,
            register_reset_listener,
        )
        from workflows.selectors import register_activity_source

        from .dispatch import mark_worker_stopping, register_steps
        from .listeners import end_firings_on_reset
        from .metrics import firing_metrics
        from .selectors import last_firing_at
        from .services.compaction import compact_context
        from .services.execute import execute_llm_step
        from .services.persist import persist_turn
        from .services.prepare import prepare_payload
        from .services.runtime_dirs import (
            runtime_dirs_on_archive,
            runtime_dirs_on_conversation_change,
            runtime_dirs_on_generation_end,
            runtime_dirs_on_reset,
        )

        register_steps(
            {
                "agent.prepare_payload": prepare_payload,
                "agent.execute_llm_step": execute_llm_step,
                "agent.persist_turn": persist_turn,
                "agent.compact_context": compact_context,
            }
        )
        register_reset_listener(end_firings_on_reset, name="agents")
        # Agent runtimes' directories go once nothing will use them (agents/services/runtime_dirs.py).
        register_reset_listener(runtime_dirs_on_reset, name="agents.runtime_dirs")
        register_archive_listener(runtime_dirs_on_archive, name="agents.runtime_dirs")
        register_generation_end_listener(runtime_dirs_on_generation_end, name="agents.runtime_dirs")
        register_conversation_listener(runtime_dirs_on_conversation_change)
        register_activity_source(last_firing_at)
        register_metrics_source(firing_metrics)
        worker_shutting_down.connect(mark_worker_stopping, weak=False, dispatch_uid="agents.worker_stopping")
