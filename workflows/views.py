from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils.http import urlencode

from opencompany.errors import NotFoundError

from .graph import agent_for_context, nodes_by_id
from .nodes import IS_AGENT, IS_CONTEXT_PANEL, get_node_spec
from .selectors import access_workflow, workflow_generations
from .services import workflow_load


def _panel_url(workflow, node: dict, spec) -> str | None:
    # Panels belong to other apps; a missing one just means no link, never a broken page.
    try:
        if spec.has(IS_CONTEXT_PANEL):
            return reverse("conversations:context-panel", args=[workflow.pk]) + "?" + urlencode({"node": node["id"]})
        if spec.clear_memory is not None:
            return reverse("memory-panel", args=[workflow.pk, node["id"]])
    except NoReverseMatch:
        return None
    return None


@login_required
def workflow_detail(request, workflow_id: int):
    try:
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
    except NotFoundError:
        raise Http404("Workflow not found.") from None
    outcome = workflow_load(workflow=workflow)
    graph = outcome.workflow.graph
    by_id = nodes_by_id(graph)
    rows = []
    for node in graph.get("nodes", []):
        spec = get_node_spec(node.get("type"))
        params = node.get("params") if isinstance(node.get("params"), dict) else {}
        serves = agent_for_context(graph, node["id"]) if spec and spec.has(IS_CONTEXT_PANEL) else None
        rows.append(
            {
                "id": node["id"],
                "type": node.get("type"),
                "label": spec.label if spec else node.get("type"),
                "name": params.get("name") if spec and spec.has(IS_AGENT) else "",
                "detail": params.get("model", "") or params.get("reset_policy", ""),
                "tool_name": spec.tool_name_for(node) if spec else None,
                "serves": (by_id.get(serves) or {}).get("params", {}).get("name", serves) if serves else None,
                "is_context": bool(spec and spec.has(IS_CONTEXT_PANEL)),
                "panel_url": _panel_url(workflow, node, spec) if spec else None,
            }
        )
    context = {
        "workflow": outcome.workflow,
        "nodes": rows,
        "edge_count": len(graph.get("edges", [])),
        "warnings": outcome.warnings,
        "generations": list(workflow_generations(workflow=workflow)[:10]),
    }
    return render(request, "workflows/detail.html", context)
