"""Every API operation in the live /api/schema/, fuzzed with schemathesis against the Django app (WSGI, in process,
on the test database): no 5xx, and every response matches what the schema documents for it.

The caller is an owner with a token; path ids point at that owner's populated world, so the fuzzed bodies and
query strings reach the handlers' validation and services rather than stopping at a 404.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, assume, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

EXAMPLES_PER_OPERATION = 5

# "METHOD /path" -> the bug; each is a strict xfail (conftest.py), so a fix makes the suite say to drop it.
# Operations whose documented responses are known to be wrong (strict xfails: fixing one turns its test red
# until it is taken out of here). None today.
KNOWN_BUGS: dict[str, str] = {}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def live_schema():
    """The schema /api/schema/ serves (made by the same generator and renderer as that view: collection runs
    before any database is allowed, and the view answers signed-in callers only), bound to the WSGI app so cases
    are sent to the real handlers."""
    import json

    from django.core.wsgi import get_wsgi_application
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = SchemaGenerator().get_schema(request=None, public=True)
    loaded = schemathesis.openapi.from_dict(json.loads(OpenApiJsonRenderer().render(document)))
    loaded.app = get_wsgi_application()
    return loaded


schema = live_schema()


def spare_token_id(world) -> int:
    from accounts.models import ApiToken
    from accounts.tokens import api_token_create

    spare = ApiToken.objects.filter(user=world.owner, name="spare", revoked_at__isnull=True).first()
    return (spare or api_token_create(user=world.owner, name="spare").token).pk


def point_at_world(case, world) -> None:
    ids = {
        "workflow_id": world.workflow.pk,
        "node_id": world.memory_node_id,
        "agent_node_id": world.agent_node_id,
        "item_id": world.items["read"],
        "message_id": world.user_message_id,
        "run_id": world.run_id,
    }
    if "token_id" in (case.path_parameters or {}):
        ids["token_id"] = spare_token_id(world)  # never the token the test itself authenticates with
    for name in list(case.path_parameters or {}):
        if name in ids:
            case.path_parameters[name] = ids[name]


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@pytest.mark.django_db(transaction=True)
def test_the_api_never_fails_and_answers_as_documented(case, world):
    point_at_world(case, world)
    case.call_and_validate(headers={"Authorization": f"Token {world.owner_token}"}, checks=CHECKS)


@schemathesis.check
def schema_valid_request_understood(ctx, response, case):
    """A schema-valid body must not be refused as malformed. A 400 with a domain code (a dangling edge, an unknown
    lead node) is the workflow refusing a well-formed request, which a schema cannot express."""
    if response.status_code == 400 and response.json().get("code") != "invalid_request":
        return None
    return positive_data_acceptance(ctx, response, case)


# The graph write paths (create, update, import, validate, add a teammate), the Context panel's paging, and chat
# sends and edits: what the schema publishes is exactly what they accept (issue 20: `nodes: "x"`, `limit=0`,
# `params: null`, no `edges`, `text: ""`). Memory's `limit` and `expected_version` bounds are pinned both ways in
# test_schema_contract.py: fuzzed here, its GETs trip on unknown query parameters, which every GET ignores.
CONTRACT_PATHS = (
    r"^/api/workflows/(import/|\{workflow_id\}/(validate/|subagents/|conversations/)?)?$"
    r"|^/api/workflows/\{workflow_id\}/chat/messages/(\{message_id\}/edit/)?$"
)


@schema.include(path_regex=CONTRACT_PATHS).parametrize()
@settings(
    max_examples=20,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@pytest.mark.django_db(transaction=True)
def test_the_graph_api_accepts_exactly_what_the_schema_says(case, world):
    # A case whose invalid part is its path (a workflow id that is no integer) cannot be tried here: pointing its
    # ids at the world makes it valid, and the check would blame the server for accepting it.
    path = case.meta.components.get(ParameterLocation.PATH) if case.meta else None
    assume(path is None or path.mode != GenerationMode.NEGATIVE)
    point_at_world(case, world)
    case.call_and_validate(
        headers={"Authorization": f"Token {world.owner_token}"},
        checks=[*CHECKS, negative_data_rejection, schema_valid_request_understood],
    )
