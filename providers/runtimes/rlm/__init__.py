"""RLM (Recursive Language Models, package `rlms`) as an agent provider (provider "rlm"): one firing step = one
sandboxed RLM run.

Fidelity: observable-only, non-resumable. The RLM keeps its REPL state (variables, sub-RLMs) in the child process,
which ends with the run; we keep its iteration trajectory only (model text, code, output, sub-calls) as MessageWire,
and the next firing sends the stored conversation as a portable transcript (its `context`).

The RLM's "local" REPL `exec`s the model's code in the process that runs it, so that process is never a worker:
`sandbox/` runs in a child of its own (own process group, killed with its parent, in its own network namespace
where the OS allows, resource limits, Landlock, an audit hook, a throwaway working directory, an environment without
any key). The child makes no HTTP call: each backend call (every iteration, `llm_query`, sub-RLMs) is a JSON line to
this process, which calls the backend (OpenAI's Responses API or an OpenAI-compatible Chat Completions server)
through the usual adapter with the owner's key, counts the usage and answers on the child's stdin. The project's
tools (memory, todos) reach the agent as REPL functions that call back the same way, answered through the tools'
normal contract (never the database from the sandbox). Each root-REPL cell streams to the chat as a step while it
runs; Stop and the wall-clock limit SIGKILL the child's group and keep what arrived.

One concept per module: `launch.py` (the agent's options, the sandbox's limits, the job the child is given and
how it is started), `session.py` (the parent's side of one run: the channel, the backend and tool calls it relays,
Stop and the wall clock), `collector.py` (the child's reports as MessageWire and chat steps), `run.py` (one firing
step from start to clean-up) and `sandbox/` (the child itself, run by path in isolated mode).
"""

from .run import chat

__all__ = ["chat"]
