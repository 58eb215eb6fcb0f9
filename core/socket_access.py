"""Whether an open socket may live on, and the signals that tell sockets to close or re-check at once."""

from __future__ import annotations

import logging
from importlib import import_module

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_save
from django.utils.crypto import constant_time_compare

from core.errors import NotFoundError
from core.realtime import send_socket_control, session_group_name, user_group_name, workflow_group_name

logger = logging.getLogger(__name__)

_workflow_access = None


def socket_access_problem(*, session_key: str, user_id: int, workflow_id: int) -> str | None:
    """None while the socket may stay open; "session_ended" or "not_found" otherwise.

    The session must still exist, still name this user, and still carry the user's current password hash (what
    Django's own request authentication checks); the workflow must still be one the user may open.
    """
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    data = store.load()
    if str(data.get(SESSION_KEY, "")) != str(user_id):
        return "session_ended"
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None or not constant_time_compare(data.get(HASH_SESSION_KEY, ""), user.get_session_auth_hash()):
        return "session_ended"
    if _workflow_access is None:
        raise LookupError("no workflow access check registered (workflows registers it in WorkflowsConfig.ready)")
    try:
        _workflow_access(user=user, workflow_id=workflow_id)
    except NotFoundError:
        return "not_found"
    return None


def _on_logout(sender, request, user, **kwargs):
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if session_key:
        send_socket_control(group=session_group_name(session_key), message_type="socket.session_ended")


def _on_user_saved(sender, instance, update_fields=None, **kwargs):
    if update_fields is not None and set(update_fields) <= {"last_login"}:
        return  # a login: nothing that could end another session changed
    # A new password or a deactivation ends the user's other sessions; their sockets check and close.
    send_socket_control(group=user_group_name(instance.pk), message_type="socket.recheck")


def _on_workflow_deleted(sender, instance, **kwargs):
    send_socket_control(group=workflow_group_name(instance.pk), message_type="socket.recheck")


def connect_signals() -> None:
    user_logged_out.connect(_on_logout, dispatch_uid="socket-access-logout")
    post_save.connect(_on_user_saved, sender=get_user_model(), dispatch_uid="socket-access-user-saved")


def register_workflow_access(*, check, workflow_model) -> None:
    """Workflows tells the socket, at start-up, who may open a workflow (`check(user=, workflow_id=)` raises
    NotFoundError otherwise) and which model's deletion closes its sockets; this module names no app above it."""
    global _workflow_access
    _workflow_access = check
    post_delete.connect(_on_workflow_deleted, sender=workflow_model, dispatch_uid="socket-access-workflow-deleted")
