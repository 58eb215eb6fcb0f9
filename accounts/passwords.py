"""An owner changing their own password: every other session of theirs ends, and their sockets with it."""

from __future__ import annotations

from django.contrib.auth import update_session_auth_hash
from django.db import transaction


def owner_password_change(*, request, user, new_password: str) -> None:
    """Set `user`'s password and keep only the session `request` carries.

    The other sessions end because they carry the old password's hash (Django checks it on each request; the
    sockets check it when the user save tells them to, `core/socket_access.py`). The session of the request is
    moved to a new key with the new hash, in the same transaction, so the change cannot sign its own owner out.
    """
    with transaction.atomic():
        user.set_password(new_password)
        user.save(update_fields=["password"])
        update_session_auth_hash(request, user)
