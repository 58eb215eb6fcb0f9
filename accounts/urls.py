from django.urls import path

from . import apis

urlpatterns = [
    path("tokens/", apis.ApiTokensApi.as_view(), name="api-tokens"),
    path("tokens/<int:token_id>/", apis.ApiTokenApi.as_view(), name="api-token-detail"),
    path("usage/", apis.UsageApi.as_view(), name="usage"),
]
