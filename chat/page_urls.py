from django.urls import path

from . import views

urlpatterns = [
    path("workflows/<int:workflow_id>/chat/", views.chat_page, name="chat-page"),
]
