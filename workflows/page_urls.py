from django.urls import path

from . import views

urlpatterns = [
    path("workflows/new/", views.workflow_new, name="workflow-new"),
    path("workflows/import/", views.workflow_import_page, name="workflow-import"),
    path("workflows/<int:workflow_id>/", views.workflow_detail, name="workflow-detail"),
    path("workflows/<int:workflow_id>/rename/", views.workflow_rename_page, name="workflow-rename"),
    path("workflows/<int:workflow_id>/duplicate/", views.workflow_duplicate_page, name="workflow-duplicate"),
    path("workflows/<int:workflow_id>/delete/", views.workflow_delete_page, name="workflow-delete"),
]
