"""The conversation store (docs/architecture.md#conversation-store): the public API other apps call. Import from
here, not from submodules."""

from conversations.events import ConversationChange, register_conversation_listener, unregister_conversation_listener

from .appending import append_conversation
from .clearing import clear_conversation, clearable_result_sizes
from .compaction import (
    CompactionOutcome,
    CompactionSnapshot,
    PrefixIdentity,
    compact_conversation,
    compaction_activation,
    compaction_candidate,
    compaction_land_locked,
    compaction_snapshot,
    compaction_summarize,
    should_compact,
)
from .compaction_slot import (
    compaction_beat,
    compaction_claim,
    compaction_finish,
    compaction_ready,
    compaction_release_unawaited,
    compaction_status,
    compaction_wait,
    compaction_waiter,
)
from .copies import forget_process_copies
from .errors import (
    CompactionError,
    ConversationConflict,
    ConversationInvalid,
    ConversationLoadFailed,
    ConversationTooLarge,
    FiringLeaseBusy,
)
from .keys import ConversationKey, conversation_key
from .leases import (
    acquire_firing_lease,
    firing_lease,
    firing_lease_holder,
    release_firing_lease,
    release_firing_lease_statements,
    renew_firing_lease,
)
from .listing import conversation_pressure_record, conversation_pressure_statements, list_conversations
from .loading import (
    conversation_prefix_messages,
    load_conversation,
    load_conversation_snapshot,
    stored_cursor,
    stored_starts_with,
)
from .locks import compaction_slot_for_update, lock_conversations
from .results import LoadedConversation, LockedConversation, SaveResult, StoredPrefix
from .retained import prune_retained
from .saving import replace_conversation_locked, save_conversation, save_conversation_safely
from .transcript import (
    CLEARED_PLACEHOLDER,
    COMPACTION_SUMMARY_HEADER,
    NOT_COMPLETED,
    cap_tool_result,
    clear_old_tool_results,
    close_unanswered_tool_calls,
    conversation_cursor,
    is_compaction_summary,
    latest_turn_start,
    message_hash,
    seed_request,
    starts_with,
)

__all__ = [
    "CLEARED_PLACEHOLDER",
    "COMPACTION_SUMMARY_HEADER",
    "NOT_COMPLETED",
    "CompactionError",
    "CompactionOutcome",
    "CompactionSnapshot",
    "PrefixIdentity",
    "ConversationChange",
    "ConversationConflict",
    "ConversationInvalid",
    "ConversationKey",
    "ConversationLoadFailed",
    "ConversationTooLarge",
    "FiringLeaseBusy",
    "LoadedConversation",
    "LockedConversation",
    "SaveResult",
    "StoredPrefix",
    "append_conversation",
    "clearable_result_sizes",
    "conversation_prefix_messages",
    "prune_retained",
    "acquire_firing_lease",
    "cap_tool_result",
    "clear_conversation",
    "clear_old_tool_results",
    "close_unanswered_tool_calls",
    "compact_conversation",
    "compaction_activation",
    "compaction_beat",
    "compaction_candidate",
    "compaction_claim",
    "compaction_finish",
    "compaction_land_locked",
    "compaction_ready",
    "compaction_release_unawaited",
    "compaction_slot_for_update",
    "compaction_snapshot",
    "compaction_status",
    "compaction_summarize",
    "compaction_wait",
    "compaction_waiter",
    "conversation_cursor",
    "is_compaction_summary",
    "conversation_key",
    "conversation_pressure_record",
    "conversation_pressure_statements",
    "firing_lease",
    "firing_lease_holder",
    "forget_process_copies",
    "latest_turn_start",
    "list_conversations",
    "load_conversation",
    "load_conversation_snapshot",
    "lock_conversations",
    "message_hash",
    "register_conversation_listener",
    "release_firing_lease",
    "release_firing_lease_statements",
    "renew_firing_lease",
    "replace_conversation_locked",
    "save_conversation",
    "save_conversation_safely",
    "seed_request",
    "should_compact",
    "starts_with",
    "stored_cursor",
    "stored_starts_with",
    "unregister_conversation_listener",
]
