"""Row locks of accounts. Every `select_for_update` of an accounts row goes through here.

Place in the lock order (docs/architecture.md#lock-order): an API token is locked alone in its transaction
(revoke), outside the numbered order: nothing else is locked with it.
"""

from __future__ import annotations

from .models import ApiToken


def api_token_for_update(*, user, token_id: int) -> ApiToken | None:
    """One of the user's tokens, locked; None for another user's or a missing id."""
    return ApiToken.objects.select_for_update().filter(user=user, pk=token_id).first()
