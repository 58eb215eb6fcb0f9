"""An owner's provider key: only the Fernet token of the key is stored, never the key itself."""

from __future__ import annotations

from django.conf import settings
from django.db import models

OWNER_KEY_PROVIDERS = (
    ("openai", "OpenAI"),
    ("anthropic", "Anthropic"),
    ("gemini", "Gemini"),
    ("openai_compatible", "OpenAI-compatible server"),
    ("vertex_agent", "Vertex managed agent"),
)


class OwnerProviderKey(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_keys")
    provider = models.CharField(max_length=32, choices=OWNER_KEY_PROVIDERS)
    # Fernet token (AES-128-CBC + HMAC) of the key under PROVIDER_KEYS_ENCRYPTION_KEYS; see docs/security.md.
    encrypted_key = models.TextField()
    # The last four characters, so the owner can tell keys apart without the key ever being shown again.
    key_suffix = models.CharField(max_length=4, blank=True, default="")
    base_url = models.URLField(max_length=500, blank=True, default="")  # openai_compatible only
    last_tested_at = models.DateTimeField(null=True, blank=True)
    last_test_ok = models.BooleanField(null=True, blank=True)
    last_test_message = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "provider"], name="provider_key_one_per_provider")]

    def __str__(self) -> str:
        return f"{self.provider} key …{self.key_suffix} of owner {self.owner_id}"


class AllowedProviderHost(models.Model):
    """A host staff vouch for (an internal inference server): owners' base URLs may point to it although it resolves
    to a private address, and may use plain http."""

    host = models.CharField(max_length=255, unique=True, help_text="Host name or address, optionally host:port.")
    note = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.host


class OwnerSecret(models.Model):
    """A named secret of an owner (an MCP server's bearer token or API key), referenced by name from a node's headers:
    only its Fernet token is stored, under the same keys as provider keys (crypto.py), and no response shows it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=64)
    encrypted_value = models.TextField()
    value_suffix = models.CharField(max_length=4, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="owner_secret_one_per_name")]

    def __str__(self) -> str:
        return f"secret {self.name} of owner {self.owner_id}"
