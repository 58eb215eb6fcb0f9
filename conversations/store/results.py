"""What the store's reads and writes hand back, and the tables its SQL names."""

from __future__ import annotations

from dataclasses import dataclass

from conversations.models import AgentConversation, ConversationMessage

from .keys import ConversationKey

HEADER = AgentConversation._meta.db_table  # one header row per stored conversation
ROWS = ConversationMessage._meta.db_table  # its messages, one row each
INSERT_CHUNK = 1000  # message rows per INSERT statement; a longer append takes the locked path


@dataclass(frozen=True)
class SaveResult:
    key: ConversationKey
    changed: bool
    message_count: int
    kept: int  # messages of the common prefix, left untouched
    written: int  # rows inserted
    removed: int  # rows deleted past the common prefix
    version: int
    digest: str
    stored: bool = True  # False for generation 0 (manual test runs store nothing)
    size_bytes: int | None = None  # the stored list's serialized size after the save, when the save knows it


@dataclass(frozen=True)
class LoadedConversation:
    """The stored list as is (not repaired), with what compaction's compare-and-swap and chat cursors need."""

    key: ConversationKey
    messages: list[dict]
    version: int
    digest: str
    size_bytes: int
    exists: bool
    compaction_ready: bool = False  # a summary waits in the slot for the lease holder to land it

    @property
    def cursor(self) -> dict:
        return {"length": len(self.messages), "digest": self.digest}


@dataclass(frozen=True)
class LockedConversation:
    key: ConversationKey
    conversation_id: int
    version: int
    message_count: int
    digest: str

    @property
    def cursor(self) -> dict:
        return {"length": self.message_count, "digest": self.digest}


@dataclass(frozen=True)
class StoredPrefix:
    """What a caller knows of the stored list it is extending: `length` messages at `version` with `digest`
    (and, when known, their serialized `size_bytes`).

    The runtime keeps it from its load and from each `SaveResult`, in whatever process runs the next step."""

    length: int
    version: int
    digest: str
    size_bytes: int | None = None

    @classmethod
    def of(cls, result: SaveResult) -> StoredPrefix:
        return cls(result.message_count, result.version, result.digest, result.size_bytes)

    @classmethod
    def of_snapshot(cls, snapshot: LoadedConversation) -> StoredPrefix:
        return cls(len(snapshot.messages), snapshot.version, snapshot.digest, snapshot.size_bytes)

    def as_dict(self) -> dict:
        return {"length": self.length, "version": self.version, "digest": self.digest, "size_bytes": self.size_bytes}

    @classmethod
    def from_dict(cls, data: dict) -> StoredPrefix:
        return cls(int(data["length"]), int(data["version"]), str(data["digest"]), data.get("size_bytes"))
