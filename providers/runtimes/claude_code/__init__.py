"""Claude Code as an agent provider (provider "claude_code"): one firing step = one Claude Code query.

Fidelity: exact observable stream plus explicit session binding. The session id is ours, chosen before the first
event (`session_id=`), and the next firing resumes it (`resume=`) while its transcript file exists under this
conversation's CLAUDE_CONFIG_DIR; when it is gone, a new session starts from a portable transcript of the stored
conversation and the answer carries a note saying so (`meta.runtime.note`). Every message the run streamed
(assistant blocks with thinking signatures, tool calls, tool results) comes back as MessageWire in
`ChatResult.observed`; the firing stores them all and runs none of their tool calls (Claude Code ran them).

Safety defaults: no built-in tool (`tools=[]`, or the owner's allowlist, each named tool auto-approved and nothing
else), no settings files (`setting_sources=[]`), an emptied working directory per run, an environment holding only
the API key, base URL and config dir, a wall-clock limit, and Stop / the limit SIGKILL the CLI's process group.
The project's own tools (memory, todos) are offered as an in-process MCP server named `project`.

One concept per module: `session.py` (which session a run continues, where its transcript lives), `launch.py`
(what the CLI is started with and how it is killed), `run.py` (one query: the stream loop, Stop, the deadline, its
errors), `collector.py` (the SDK's messages as MessageWire and the step's result).
"""

from .run import chat

__all__ = ["chat"]
