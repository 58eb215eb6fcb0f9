"""Compaction (docs/invariants.md#compaction), with a summarizer passed in (no provider)."""

import json

import pytest

from conversations.models import AgentConversation
from conversations.store import (
    COMPACTION_SUMMARY_HEADER,
    CompactionError,
    compact_conversation,
    load_conversation,
    load_conversation_snapshot,
    save_conversation,
    should_compact,
)
from providers.wire import validate_messages
from tests.conversations.factories import assistant, result, system, turn, user

pytestmark = pytest.mark.django_db

SYSTEM_PROMPT = "You are the lead.\n  Keep \u00e9 and trailing spaces   "


def count_tokens(messages):
    return len(json.dumps(messages)) // 4


def _stored(key):
    return load_conversation_snapshot(key).messages


def _strip_ts(messages):
    return [{k: v for k, v in m.items() if k != "ts"} for m in messages]


def test_compaction_summarizes_the_turns_before_the_latest_one(key):
    latest = [user("latest question"), assistant(calls=[("c9", "memory", {"operation": "list"})]), result("c9"),
              assistant("latest answer")]  # fmt: skip
    messages = [system(SYSTEM_PROMPT), *turn(1, result_size=3000), *turn(2, result_size=3000), *latest]
    save_conversation(key, messages)
    stored_system = _stored(key)[0]
    seen = []

    def summarize(source):
        seen.append(source)
        return "The owner asked two questions; both were answered."

    outcome = compact_conversation(key, summarize=summarize, count_tokens=count_tokens)

    assert outcome.status == "compacted" and outcome.tokens_after < outcome.tokens_before
    # the summarizer saw exactly the turns before the latest one, never the system prompt
    assert _strip_ts(seen[0]) == [*turn(1, result_size=3000), *turn(2, result_size=3000)]
    after = _stored(key)
    assert after[0] == stored_system  # byte-identical, ts included: the system row was not rewritten
    assert json.dumps(after[0]["blocks"]) == json.dumps(system(SYSTEM_PROMPT)["blocks"])
    assert [m["role"] for m in after].count("system") == 1
    assert after[1]["role"] == "user"
    assert (
        after[1]["blocks"][0]["text"]
        == COMPACTION_SUMMARY_HEADER + "The owner asked two questions; both were answered."
    )
    assert _strip_ts(after[2:]) == latest  # the latest turn verbatim, its call still next to its result
    validate_messages(after)


def test_nothing_older_than_the_latest_turn_is_skipped(key):
    save_conversation(key, [system(), *turn(1)])

    def summarize(source):
        raise AssertionError("must not be called")

    outcome = compact_conversation(key, summarize=summarize, count_tokens=count_tokens)
    assert outcome.status == "skipped"


def test_a_candidate_that_is_not_smaller_leaves_the_row_as_it_was(key):
    save_conversation(key, [system(), *turn(1, result_size=10), *turn(2, result_size=10)])
    before = _stored(key)
    version = AgentConversation.objects.get().version
    outcome = compact_conversation(key, summarize=lambda source: "s" * 50_000, count_tokens=count_tokens)
    assert outcome.status == "discarded"
    assert _stored(key) == before and AgentConversation.objects.get().version == version


def test_turns_appended_while_the_summary_runs_are_kept_verbatim_after_it(key):
    save_conversation(key, [system(), *turn(1, result_size=3000), *turn(2)])

    def summarize(source):
        assert _strip_ts(source) == turn(1, result_size=3000)  # the prefix: the turns before the latest at snapshot
        # two turns are appended while the summarizer runs (a conversation that never pauses)
        save_conversation(key, [*load_conversation(key), *turn(3)])
        save_conversation(key, [*load_conversation(key), *turn(4)])
        return "summary"

    outcome = compact_conversation(key, summarize=summarize, count_tokens=count_tokens)
    assert outcome.status == "compacted"
    stored = _stored(key)
    assert stored[1]["blocks"][0]["text"] == COMPACTION_SUMMARY_HEADER + "summary"
    # the latest turn at the snapshot and both turns appended after it, verbatim
    assert _strip_ts(stored[2:]) == [*turn(2), *turn(3), *turn(4)]
    validate_messages(stored)


@pytest.mark.parametrize("change", ["edit", "rewind", "clear"])
def test_a_change_inside_the_summarised_prefix_discards_the_summary(key, change):
    from conversations.store import clear_conversation

    save_conversation(key, [system(), *turn(1, result_size=3000), *turn(2, result_size=3000), *turn(3)])

    def summarize(source):
        stored = load_conversation(key)
        if change == "edit":  # the owner edits the first message (a chat edit rewrites from there)
            save_conversation(key, [stored[0], user("edited question"), *stored[2:]])
        elif change == "rewind":  # try again / a branch switch back to before turn 2, then a new turn
            save_conversation(key, [*stored[:5], *turn(9)])
        else:
            clear_conversation(key.workflow_id)
            save_conversation(key, [*stored])  # the same messages again: a new conversation all the same
        return "summary"

    before_landing = []

    def counting(messages):
        before_landing.append(len(messages))
        return count_tokens(messages)

    outcome = compact_conversation(key, summarize=summarize, count_tokens=counting)
    assert outcome.status == "discarded"
    assert before_landing == []  # decided on the prefix's identity alone
    stored = _stored(key)
    assert not any((m.get("meta") or {}).get("compaction_summary") for m in stored)


def test_an_unrelated_rewrite_after_the_prefix_keeps_the_summary(key):
    # A branch move that rewrites only after the summarised prefix (the latest turn replaced) leaves it unchanged.
    save_conversation(key, [system(), *turn(1, result_size=3000), *turn(2)])

    def summarize(source):
        stored = load_conversation(key)
        save_conversation(key, [*stored[:5], *turn(7)])  # turn 2 replaced by turn 7
        return "summary"

    outcome = compact_conversation(key, summarize=summarize, count_tokens=count_tokens)
    assert outcome.status == "compacted"
    assert _strip_ts(_stored(key)[2:]) == turn(7)


def test_a_summarizer_failure_is_a_compaction_error_and_keeps_the_row(key):
    save_conversation(key, [system(), *turn(1, result_size=3000), *turn(2)])
    before = _stored(key)

    def summarize(source):
        raise TimeoutError("provider timed out")

    with pytest.raises(CompactionError) as raised:
        compact_conversation(key, summarize=summarize, count_tokens=count_tokens)
    assert raised.value.code == "compaction_failed"
    assert _stored(key) == before
    with pytest.raises(CompactionError):
        compact_conversation(key, summarize=lambda s: "   ", count_tokens=count_tokens)


def test_the_boundary_never_splits_a_call_from_its_results(key):
    # The latest turn's assistant made calls whose results follow: all of them stay together after compaction.
    latest = [user("go"), assistant(calls=[("a", "memory", {}), ("b", "memory", {})]), result("a"), result("b")]
    save_conversation(key, [system(), *turn(1, result_size=4000), *latest])
    compact_conversation(key, summarize=lambda s: "short", count_tokens=count_tokens)
    after = _stored(key)
    assert _strip_ts(after[2:]) == latest
    validate_messages(after)


def test_a_second_compaction_summarizes_the_summary_with_the_next_turns(key):
    save_conversation(key, [system(), *turn(1, result_size=4000), *turn(2)])
    compact_conversation(key, summarize=lambda s: "first summary", count_tokens=count_tokens)
    save_conversation(key, [*load_conversation(key), *turn(3, result_size=4000), *turn(4)])
    sources = []
    compact_conversation(key, summarize=lambda s: sources.append(s) or "second summary", count_tokens=count_tokens)
    assert sources[0][0]["blocks"][0]["text"].endswith("first summary")
    after = _stored(key)
    assert [m["role"] for m in after].count("system") == 1
    assert after[1]["blocks"][0]["text"].endswith("second summary")
    assert _strip_ts(after[2:]) == turn(4)


def test_a_list_that_is_an_earlier_summary_and_the_latest_turn_pays_for_no_summary(key):
    # Still over the threshold after a compaction means the latest turn alone is large: summarising the summary
    # again could not help, so no call is made.
    save_conversation(key, [system(), *turn(1, result_size=4000), *turn(2, result_size=4000)])
    compact_conversation(key, summarize=lambda s: "first summary", count_tokens=count_tokens)

    def summarize(source):
        raise AssertionError("must not be called")

    assert compact_conversation(key, summarize=summarize, count_tokens=count_tokens).status == "skipped"


def test_should_compact_uses_the_projected_next_request():
    assert should_compact(last_input_tokens=7000, added_tokens=1000, context_window_tokens=10_000, threshold=0.8)
    assert not should_compact(last_input_tokens=7000, added_tokens=999, context_window_tokens=10_000, threshold=0.8)
    assert not should_compact(last_input_tokens=1, added_tokens=1, context_window_tokens=0, threshold=0.8)
