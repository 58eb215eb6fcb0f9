"""Re-encrypt every stored provider key under the first of PROVIDER_KEYS_ENCRYPTION_KEYS (see docs/security.md)."""

from django.core.management.base import BaseCommand

from provider_keys.crypto import rotate
from provider_keys.models import OwnerProviderKey


class Command(BaseCommand):
    help = "Re-encrypt owners' provider keys under the newest encryption key."

    def handle(self, *args, **options):
        rotated = 0
        for row in OwnerProviderKey.objects.only("pk", "encrypted_key").iterator():
            OwnerProviderKey.objects.filter(pk=row.pk).update(encrypted_key=rotate(row.encrypted_key))
            rotated += 1
        self.stdout.write(f"re-encrypted {rotated} provider key(s)")
