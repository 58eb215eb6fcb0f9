from __future__ import annotations

from dataclasses import asdict, dataclass

ERROR = "error"
WARNING = "warning"

# Codes that make a save answer `invalid_context_topology` rather than the general `invalid_graph`.
CONTEXT_TOPOLOGY_CODES = frozenset({"INVALID_CONTEXT_EDGE", "MULTIPLE_CONTEXTS", "SHARED_CONTEXT"})


@dataclass(frozen=True)
class GraphIssue:
    code: str
    severity: str
    message: str
    node_id: str | None = None
    edge_id: str | None = None
    field: str | None = None

    def as_dict(self) -> dict:
        return {key: value for key, value in asdict(self).items() if value is not None}


def has_errors(issues) -> bool:
    return any(issue.severity == ERROR for issue in issues)


def errors_of(issues) -> list[GraphIssue]:
    return [issue for issue in issues if issue.severity == ERROR]


def warnings_of(issues) -> list[GraphIssue]:
    return [issue for issue in issues if issue.severity == WARNING]
