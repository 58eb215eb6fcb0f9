from django.apps import AppConfig


class ProviderKeysConfig(AppConfig):
    name = "provider_keys"
    label = "provider_keys"
    verbose_name = "Provider keys"
    default_auto_field = "django.db.models.BigAutoField"
