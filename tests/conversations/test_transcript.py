"""Pure transcript rules (docs/invariants.md): the store observes, seeding, repair on load, result caps and
clearing past a byte budget."""

import copy

import pytest

from conversations.store import (
    CLEARED_PLACEHOLDER,
    NOT_COMPLETED,
    cap_tool_result,
    clear_old_tool_results,
    close_unanswered_tool_calls,
    load_conversation,
    save_conversation,
    seed_request,
)
from conversations.store.transcript import message_size
from providers.wire import validate_messages
from tests.conversations.factories import assistant, result, system, turn, user

# --- docs/invariants.md#store-observes: the store observes; it never steers -------------------------------------------


@pytest.mark.django_db
def test_attaching_a_context_never_changes_what_a_first_firing_sends(key):
    # Without a Context the runtime seeds from []; with one, from the (empty) stored row: the same request.
    without_context = seed_request("Be brief.", [], "hello")
    with_context = seed_request("Be brief.", load_conversation(key), "hello")
    assert with_context == without_context


@pytest.mark.django_db
def test_saving_never_alters_the_list_the_firing_keeps_sending(key):
    sent = seed_request("Be brief.", [], "hello")
    request_before = copy.deepcopy(sent)
    save_conversation(key, [*sent, assistant("hi")])
    assert sent == request_before  # no ts or anything else was added to the firing's messages


# --- docs/invariants.md#seeding ---------------------------------------------------------------------------------------


def test_seeding_drops_stored_system_messages_and_puts_this_prompt_last():
    stored = [system("old prompt"), *turn(1), system("another stale one"), *turn(2, tool=False)]
    seeded = seed_request("new prompt", stored, "the question")
    assert seeded[0] == system("new prompt")
    assert [m for m in seeded if m["role"] == "system"] == [system("new prompt")]
    assert seeded[1:-1] == [m for m in stored if m["role"] != "system"]
    assert seeded[-1] == user("the question")


def test_seeding_accepts_prebuilt_messages():
    prompt = {
        "role": "user",
        "blocks": [{"type": "text", "text": "[feedback]x[/feedback]"}, {"type": "text", "text": "q"}],
    }
    seeded = seed_request(system("s"), [], prompt)
    assert seeded == [system("s"), prompt]


# --- docs/invariants.md#closed-on-load: unanswered tool calls are answered on load ------------------------------------


def test_open_calls_are_closed_in_call_order_after_existing_results():
    calls = assistant("working", calls=[("a", "memory", {}), ("b", "todos", {}), ("c", "memory", {})])
    messages = [user("hi"), calls, result("b", "done b", name="todos")]
    closed = close_unanswered_tool_calls(messages)
    assert closed[:3] == messages
    tail = closed[3:]
    assert [m["blocks"][0]["tool_call_id"] for m in tail] == ["a", "c"]
    assert all(m["blocks"][0]["is_error"] and m["blocks"][0]["content"] == NOT_COMPLETED for m in tail)
    assert [m["blocks"][0]["name"] for m in tail] == ["memory", "memory"]
    validate_messages(closed)


def test_a_closed_conversation_is_returned_unchanged():
    messages = [user("hi"), *turn(1)]
    assert close_unanswered_tool_calls(messages) is messages
    assert close_unanswered_tool_calls([]) == []


def test_only_the_latest_assistant_turn_is_repaired():
    # An older open call (impossible in a valid list) is not this function's business; the latest one is.
    messages = [user("q"), assistant(calls=[("x", "memory", {})])]
    assert len(close_unanswered_tool_calls(messages)) == 3


@pytest.mark.django_db
def test_a_row_with_an_open_call_loads_closed(key):
    open_turn = [user("q"), assistant(calls=[("k1", "memory", {}), ("k2", "memory", {})]), result("k1")]
    save_conversation(key, open_turn)
    loaded = load_conversation(key)
    assert [m["blocks"][0].get("tool_call_id") for m in loaded[2:]] == ["k1", "k2"]
    validate_messages(loaded)


# --- docs/invariants.md#tool-result-cap: tool results are capped ------------------------------------------------------


def test_a_long_result_is_cut_with_a_note(settings):
    settings.TOOL_RESULT_MAX_CHARS = 100_000
    content = "z" * 150_000
    capped = cap_tool_result(content)
    assert capped.startswith("z" * 100_000) and not capped.startswith("z" * 100_001)
    assert "narrower parameters" in capped and "150000" in capped
    assert cap_tool_result("short") == "short"


def test_a_per_owner_limit_may_lower_but_not_raise_the_cap(settings):
    settings.TOOL_RESULT_MAX_CHARS = 1000
    assert cap_tool_result("a" * 600, limit=500).startswith("a" * 500)
    assert "narrower" in cap_tool_result("a" * 600, limit=500)
    assert "narrower" in cap_tool_result("a" * 1500, limit=5000)  # cannot raise above the setting


def test_teammate_answers_are_never_cut(settings):
    settings.TOOL_RESULT_MAX_CHARS = 100
    answer = "w" * 10_000
    assert cap_tool_result(answer, teammate=True) == answer


# --- docs/invariants.md#old-results-cleared: old results are cleared past a byte budget -------------------------------


def _conversation(turns: int, size: int) -> list[dict]:
    messages = [system()]
    for n in range(turns):
        messages += turn(n, result_size=size)
    return messages


def test_under_budget_nothing_changes():
    messages = _conversation(3, 100)
    assert clear_old_tool_results(messages, 10**6) is messages


def test_past_budget_old_results_become_placeholders_down_to_half_the_budget():
    messages = _conversation(6, 2000)
    budget = sum(message_size(m) for m in messages) - 1000
    cleared = clear_old_tool_results(messages, budget)
    assert sum(message_size(m) for m in cleared) <= budget // 2 or all(
        m["blocks"][0]["content"] == CLEARED_PLACEHOLDER for m in cleared[:-4] if m["role"] == "tool"
    )
    changed = [i for i, (a, b) in enumerate(zip(messages, cleared, strict=True)) if a != b]
    assert changed == sorted(changed) and changed[0] == 3  # oldest first
    for i in changed:
        before, after = messages[i]["blocks"][0], cleared[i]["blocks"][0]
        assert after["content"] == CLEARED_PLACEHOLDER
        assert (after["tool_call_id"], after["name"]) == (before["tool_call_id"], before["name"])
    assert cleared[-4:] == messages[-4:]  # the latest turn is never cleared
    validate_messages(cleared)
    assert messages == _conversation(6, 2000)  # the input was not mutated


def test_external_results_are_cleared_before_teammate_answers():
    # Given an older teammate answer (oldest) and a newer, bigger external result, then the latest turn
    messages = [
        system(),
        user("q1"),
        assistant(calls=[("t", "researcher", {})]),
        result("t", "T" * 1000, name="researcher"),
    ]
    messages += [assistant("a1"), user("q2"), assistant(calls=[("m", "memory", {})]), result("m", "M" * 5000)]
    messages += [assistant("a2"), user("latest"), assistant("answer")]
    total = sum(message_size(m) for m in messages)
    without_external = total - message_size(messages[7]) + 300  # a placeholder is well under 300 bytes

    # When the budget is exceeded but clearing the external result alone reaches half of it
    budget = 2 * without_external
    assert budget < total
    loose = clear_old_tool_results(messages, budget, teammate_tools={"researcher"})
    # Then only the external result is cleared, although the teammate answer is older
    assert loose[7]["blocks"][0]["content"] == CLEARED_PLACEHOLDER
    assert loose[3] == messages[3]

    # When the budget is tight, the teammate answer goes too (after the external one)
    tight = clear_old_tool_results(messages, 1000, teammate_tools={"researcher"})
    assert tight[3]["blocks"][0]["content"] == CLEARED_PLACEHOLDER
    assert tight[-2:] == messages[-2:]
