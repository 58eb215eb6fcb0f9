"""A Vertex managed agent as an agent provider (provider "vertex_agent"): one firing = one interaction.

The Interactions API (google-genai in Vertex mode, `client.interactions.create(agent=..., stream=True)`) runs the
agent's own tool loop on Google's side. Fidelity: exact observable events plus interaction/environment binding.
Every streamed step (thoughts with their signatures, model output, server-side tool calls and their results,
function calls) comes back as MessageWire in `ChatResult.observed`, in order, and `step.delta` text streams to the
chat. Google keeps the interaction state server-side (`store` defaults to true on their side); we keep the events,
the last interaction id and the environment id, per stored cursor (agents/services/runtime_runs.py): the next
firing continues with `previous_interaction_id` only while the stored conversation is exactly what that
interaction saw, else it starts a new interaction from a portable transcript of the stored record.

The project's tools (memory, todos) are offered as function declarations: a `function_call` step ends the
interaction with status `requires_action`, the adapter answers it through the tool's contract and continues with a
new interaction whose input is the `function_result` steps (still one firing step, one provider call per
interaction, never a retry).

One concept per module: `params.py` (the agent's params), `client.py` (signing in, the SDK client and its errors),
`interaction.py` (one firing: the interactions it creates, the function rounds, Stop and the deadline),
`collector.py` (the stream's events as MessageWire and the step's result).
"""

from .client import check_credentials
from .interaction import chat

__all__ = ["chat", "check_credentials"]
