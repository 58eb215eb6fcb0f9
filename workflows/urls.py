from django.urls import path

from . import apis

urlpatterns = [
    path("node-types/", apis.NodeTypesApi.as_view(), name="node-types"),
    path("workflows/", apis.WorkflowListCreateApi.as_view(), name="workflows-list"),
    path("workflows/import/", apis.WorkflowImportApi.as_view(), name="workflows-import"),
    path("workflows/<int:workflow_id>/", apis.WorkflowDetailApi.as_view(), name="workflows-detail"),
    path("workflows/<int:workflow_id>/validate/", apis.WorkflowValidateApi.as_view(), name="workflows-validate"),
    path("workflows/<int:workflow_id>/export/", apis.WorkflowExportApi.as_view(), name="workflows-export"),
    path("workflows/<int:workflow_id>/start/", apis.WorkflowStartApi.as_view(), name="workflows-start"),
    path("workflows/<int:workflow_id>/stop/", apis.WorkflowStopApi.as_view(), name="workflows-stop"),
    path("workflows/<int:workflow_id>/reset/", apis.WorkflowResetApi.as_view(), name="workflows-reset"),
    path(
        "workflows/<int:workflow_id>/generations/", apis.WorkflowGenerationsApi.as_view(), name="workflows-generations"
    ),
    path("workflows/<int:workflow_id>/duplicate/", apis.WorkflowDuplicateApi.as_view(), name="workflows-duplicate"),
    path("workflows/<int:workflow_id>/subagents/", apis.WorkflowSubagentApi.as_view(), name="workflows-subagents"),
]
