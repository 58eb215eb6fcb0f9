from django.urls import path

from . import views

urlpatterns = [
    path("workflows/<int:workflow_id>/runs/", views.workflow_runs_page, name="workflow-runs"),
    path("workflows/<int:workflow_id>/runs/<str:firing_id>/", views.workflow_run_page, name="workflow-run"),
]
