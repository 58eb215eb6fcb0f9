from django.db import migrations, models

TERMINAL = ("finished", "failed", "stopped")


def working_to_pending(apps, schema_editor):
    """A live firing keeps what it had not saved; a finished one keeps no message list."""
    Firing = apps.get_model("agents", "Firing")
    Firing.objects.filter(state__in=TERMINAL).update(working_messages=[])
    for firing in Firing.objects.exclude(state__in=TERMINAL).iterator():
        prefix = firing.stored_prefix or {}
        if prefix.get("stale") or "length" not in prefix:
            # Whole-list mode: the next save replaces what is stored (as the old runtime's unverified save did).
            firing.pending_messages = firing.working_messages
            firing.stored_prefix = {"replaces": None} if firing.uses_conversation else None
        else:
            firing.pending_messages = firing.working_messages[int(prefix["length"]) :]
        last = firing.working_messages[-1] if firing.working_messages else {}
        # A list that ends with the step's answer still waits for that step's tool results.
        answered = last.get("role") != "assistant"
        firing.results_iteration = firing.iteration if answered else max(firing.iteration - 1, 0)
        firing.save(update_fields=["pending_messages", "stored_prefix", "results_iteration"])


class Migration(migrations.Migration):
    dependencies = [("agents", "0003_firing_compaction_pending")]

    operations = [
        migrations.AddField(model_name="firing", name="pending_messages", field=models.JSONField(default=list)),
        migrations.AddField(
            model_name="firing", name="results_iteration", field=models.PositiveIntegerField(default=0)
        ),
        migrations.RunPython(working_to_pending, migrations.RunPython.noop),
        migrations.RemoveField(model_name="firing", name="working_messages"),
    ]
