from django.urls import path

from . import views

app_name = "conversations"

urlpatterns = [
    path("workflows/<int:workflow_id>/context/", views.context_panel, name="context-panel"),
    path("workflows/<int:workflow_id>/context/clear/", views.context_panel_clear, name="context-panel-clear"),
]
