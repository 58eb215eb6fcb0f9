"""The run history pages of a workflow (their API twins are in `agents/apis.py`)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from workflows.views import workflow_or_404

from .selectors import workflow_compactions, workflow_run_detail, workflow_run_triggers, workflow_runs


@login_required
def workflow_runs_page(request, workflow_id: int):
    workflow = workflow_or_404(request, workflow_id)
    choices = workflow_run_triggers(workflow=workflow)
    # Only a listed choice filters: anything else in the address shows every run.
    trigger = request.GET.get("trigger", "")
    trigger = trigger if any(c["value"] == trigger for c in choices) else ""
    context = {
        "workflow": workflow,
        "runs": workflow_runs(workflow=workflow, limit=100, trigger=trigger or None),
        "trigger_choices": choices,
        "trigger": trigger,
        "compactions": workflow_compactions(workflow=workflow, limit=50),
    }
    return render(request, "workflows/runs.html", context)


@login_required
def workflow_run_page(request, workflow_id: int, firing_id: str):
    workflow = workflow_or_404(request, workflow_id)
    detail = workflow_run_detail(workflow=workflow, firing_id=firing_id)
    if detail is None:
        raise Http404("Run not found.")
    return render(request, "workflows/run_detail.html", {"workflow": workflow, "run": detail})
