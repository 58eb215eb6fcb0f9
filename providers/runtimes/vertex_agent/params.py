"""What a vertex_agent is told to talk to: its Google Cloud project, location, agent and environment."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import InvalidRequestError

PROVIDER = "vertex_agent"


@dataclass(frozen=True)
class VertexParams:
    project: str
    location: str
    agent: str
    environment: str  # "remote" (a new sandbox, or the bound one) or a pinned environment id

    @classmethod
    def of(cls, params: dict | None) -> VertexParams:
        params = params or {}
        project = (params.get("project") or "").strip()
        location = (params.get("location") or "global").strip()
        agent = (params.get("agent") or "").strip()
        environment = (params.get("environment") or "remote").strip()
        if not project or not agent:
            raise InvalidRequestError(
                "a vertex_agent needs its Google Cloud project and the agent to talk to (params project, agent)",
                provider=PROVIDER,
            )
        return cls(project, location, agent, environment)
