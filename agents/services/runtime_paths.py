"""Where an agent runtime (a coding-agent CLI) keeps its files: one directory per conversation key, or per firing
when the agent has no Context. Below both the runs that use them and the clean-up that removes them."""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.conf import settings


def conversation_runtime_home(provider: str, workflow_id: int, generation: int, agent_node_id: str) -> Path:
    # One directory per conversation key (a lease lets one firing at a time use it); the agent id is hashed
    # because it is free text.
    digest = hashlib.blake2b(agent_node_id.encode(), digest_size=8).hexdigest()
    return Path(settings.AGENT_RUNTIME_DIR) / provider / f"{workflow_id}-{generation}-{digest}"


def firing_runtime_home(provider: str, firing_id) -> Path:
    return Path(settings.AGENT_RUNTIME_DIR) / provider / f"firing-{firing_id}"
