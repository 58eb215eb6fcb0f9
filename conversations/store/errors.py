from core.errors import ConflictError, ServiceError


class ConversationLoadFailed(ServiceError):
    """The stored row could not be read. Retryable: the firing fails instead of running with an amnesiac prompt."""

    status = 503
    default_code = "conversation_load_failed"
    retryable = True


class ConversationTooLarge(ServiceError):
    status = 409
    default_code = "conversation_too_large"
    retryable = False


class ConversationInvalid(ServiceError):
    """A caller tried to save a list that is not valid MessageWire."""

    default_code = "conversation_invalid"


class ConversationConflict(ConflictError):
    default_code = "conversation_changed"


class CompactionError(ServiceError):
    """The summarizer failed: terminal for the run (docs/invariants.md#compaction)."""

    status = 502
    default_code = "compaction_failed"


class FiringLeaseBusy(ConflictError):
    default_code = "conversation_busy"
