from django.urls import path

from . import apis

urlpatterns = [
    path("provider-keys/", apis.ProviderKeysApi.as_view(), name="provider-keys"),
    path("provider-keys/<str:provider>/", apis.ProviderKeyApi.as_view(), name="provider-key"),
    path("provider-keys/<str:provider>/test/", apis.ProviderKeyTestApi.as_view(), name="provider-key-test"),
    path("secrets/", apis.SecretsApi.as_view(), name="secrets"),
    path("secrets/<str:name>/", apis.SecretApi.as_view(), name="secret"),
]
