"""Attached files (docs/chat.md#files): one row per upload, the bytes kept once per SHA-256 in file storage.

Writes live in files/services.py; nothing here stores or deletes bytes.
"""

from django.conf import settings
from django.db import models


class StoredFile(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=200)  # sanitised (files/names.py)
    media_type = models.CharField(max_length=100)  # decided from the bytes (files/sniffing.py)
    size = models.PositiveBigIntegerField()
    # Hex SHA-256 of the bytes: their key in file storage. Rows of one hash (any owner) share one stored object.
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["owner", "sha256"], name="stored_file_owner_hash_idx"),
            models.Index(fields=["sha256"], name="stored_file_hash_idx"),
            models.Index(fields=["created_at"], name="stored_file_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.media_type}, {self.size} bytes)"

    def block(self) -> dict:
        """The `file` block a message holds (providers/wire.py FileBlock): a reference, never the bytes."""
        return {
            "type": "file",
            "sha256": self.sha256,
            "media_type": self.media_type,
            "name": self.name,
            "size": self.size,
        }
