"""The workflows REST API: thin views over services and selectors; errors via core.errors. Import from here,
not from submodules."""

from .catalogue import NodeTypesApi
from .generations import WorkflowGenerationsApi, WorkflowResetApi, WorkflowStartApi, WorkflowStopApi
from .serializers import ConflictOutput, ErrorOutput, GenerationOutput, InvalidGraphOutput, IssueOutput, WorkflowOutput
from .subagents import WorkflowSubagentApi
from .workflows import (
    WorkflowDetailApi,
    WorkflowDuplicateApi,
    WorkflowExportApi,
    WorkflowImportApi,
    WorkflowListCreateApi,
    WorkflowValidateApi,
)

__all__ = [
    "ConflictOutput",
    "ErrorOutput",
    "GenerationOutput",
    "InvalidGraphOutput",
    "IssueOutput",
    "NodeTypesApi",
    "WorkflowDetailApi",
    "WorkflowDuplicateApi",
    "WorkflowExportApi",
    "WorkflowGenerationsApi",
    "WorkflowImportApi",
    "WorkflowListCreateApi",
    "WorkflowOutput",
    "WorkflowResetApi",
    "WorkflowStartApi",
    "WorkflowStopApi",
    "WorkflowSubagentApi",
    "WorkflowValidateApi",
]
