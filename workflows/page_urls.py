from django.urls import path

from . import views

urlpatterns = [
    path("workflows/<int:workflow_id>/", views.workflow_detail, name="workflow-detail"),
]
