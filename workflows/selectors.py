from opencompany.errors import NotFoundError

from .models import Workflow


def access_workflow(*, user, workflow_id) -> Workflow:
    """The workflow if `user` owns it. Another owner's id answers exactly like a missing one."""
    try:
        workflow_pk = int(workflow_id)
    except (TypeError, ValueError):
        raise NotFoundError(message="Workflow not found.") from None
    if user is None or not user.is_authenticated:
        raise NotFoundError(message="Workflow not found.")
    workflow = Workflow.objects.filter(pk=workflow_pk, owner_id=user.pk).first()
    if workflow is None:
        raise NotFoundError(message="Workflow not found.")
    return workflow


def workflows_for_owner(*, user):
    return Workflow.objects.filter(owner_id=user.pk).order_by("-updated_at", "-id")
