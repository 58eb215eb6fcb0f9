from django.urls import path

from . import views

urlpatterns = [
    path("hooks/<str:token>/", views.hook_deliver, name="hook-deliver"),
    path("hooks/<str:token>/runs/<int:fire_id>/", views.hook_run, name="hook-run"),
]
