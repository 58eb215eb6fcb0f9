"""Memory's errors: each has a stable code and a hint a model (or a client) can act on."""

from core.errors import ConflictError, NotFoundError, ServiceError


def invalid(message: str, hint: str, *, code: str = "invalid_arguments") -> ServiceError:
    return ServiceError(code, message, status=400, extra={"hint": hint})


def item_not_found() -> NotFoundError:
    return NotFoundError(
        "not_found",
        "No memory with that id exists here (it may have been forgotten or expired).",
        extra={"hint": "Use recall or list to find the current memory ids."},
    )


def version_conflict(*, current_version: int, current: dict | None = None) -> ConflictError:
    extra = {
        "hint": f"The memory changed since you read it. Call get, then retry with expected_version={current_version}.",
        "current_version": current_version,
    }
    if current is not None:
        extra["current"] = current
    return ConflictError("version_conflict", "expected_version is stale.", extra=extra)
