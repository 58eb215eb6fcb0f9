from django.urls import path

from . import apis

urlpatterns = [
    path("workflows/<int:workflow_id>/test-run/", apis.WorkflowTestRunApi.as_view(), name="workflows-test-run"),
    path("workflows/<int:workflow_id>/runs/", apis.WorkflowRunsApi.as_view(), name="workflows-runs"),
    path(
        "workflows/<int:workflow_id>/runs/<str:firing_id>/",
        apis.WorkflowRunDetailApi.as_view(),
        name="workflows-run-detail",
    ),
    path("tool-approvals/<str:approval_id>/", apis.ToolApprovalApi.as_view(), name="tool-approval"),
    path(
        "tool-approvals/<str:approval_id>/decision/",
        apis.ToolApprovalDecisionApi.as_view(),
        name="tool-approval-decision",
    ),
]
