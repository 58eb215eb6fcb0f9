"""Existing DRF tokens (`authtoken_token`, plain-text keys) become hashed ApiTokens, then the old table goes.

A migrated token keeps working with the same key (its SHA-256 is what is stored now), is named "Migrated token",
and expires API_TOKEN_DEFAULT_DAYS after this migration (the old tokens never expired). Raw SQL, because
`rest_framework.authtoken` is no longer installed and its model cannot be loaded.
"""

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.utils import timezone


def hash_legacy_keys(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    expires_at = timezone.now() + timedelta(days=settings.API_TOKEN_DEFAULT_DAYS)
    with connection.cursor() as cursor:
        cursor.execute("select key, user_id, created from authtoken_token")
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        digest = hashlib.sha256(key.encode()).hexdigest()
        if ApiToken.objects.filter(key_hash=digest).exists():
            continue
        token = ApiToken.objects.create(
            user_id=user_id, name="Migrated token", prefix=key[:6], key_hash=digest, expires_at=expires_at
        )
        ApiToken.objects.filter(pk=token.pk).update(created_at=created)
    with connection.cursor() as cursor:
        cursor.execute("drop table authtoken_token")
        # Forget the old app's migrations too, so installing it again would create a fresh, empty table.
        cursor.execute("delete from django_migrations where app = 'authtoken'")


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(hash_legacy_keys, migrations.RunPython.noop),
    ]
