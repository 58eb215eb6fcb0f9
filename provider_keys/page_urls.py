from django.urls import path

from . import views

urlpatterns = [path("settings/provider-keys/", views.provider_keys_page, name="provider-keys-page")]
