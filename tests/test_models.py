import dataclasses
import fnmatch
import json

import pytest

from herald.models import (
    REMEMBERED_TYPES,
    Digest,
    Event,
    EventMatch,
    EventStatus,
    Hold,
    HoldReason,
    NewEvent,
    Preferences,
    Priority,
)

# Stored data that pydantic_core's parser refuses but ``json`` reads: an older herald kept such.
LONE_SURROGATE = '{"text":"\\ud800"}'
NESTED_PAST_ITS_DEPTH = "[" * 300 + "]" * 300


@pytest.mark.parametrize("data_json", [LONE_SURROGATE, NESTED_PAST_ITS_DEPTH, '{"n":1,"x":0.1}'])
def test_an_event_reads_back_any_data_it_stored(data_json: str) -> None:
    event = Event(
        id="evt_1",
        agent_id="agt_1",
        seq=1,
        type="t",
        text="x",
        data_json=data_json,
        created_at=1_765_100_000_123,
        status=EventStatus.PENDING,
        reply_schema_json=data_json,
    )
    assert event.data == json.loads(data_json)
    assert event.reply_schema == json.loads(data_json)
    assert event.to_json()["data"] == json.loads(data_json)
    assert event.to_json()["created_at"] == "2025-12-07T09:33:20.123Z"


def test_a_stored_event_is_the_event_its_init_makes_with_every_field() -> None:
    new = NewEvent(
        "alice", "build.failed", "red", None, "k", 60.0, '{"n":1}', '{"type":"object"}',
        sender="bob", reply_to="evt_0", deliver_at=5_000, priority=Priority.LOW, thread="thr_1",
    )  # fmt: skip
    made = new.stored("evt_1", "agt_1", 7, 1_000)
    assert made == Event(
        "evt_1", "agt_1", 7, "build.failed", "red", '{"n":1}', 1_000, EventStatus.SCHEDULED,
        "k", 65_000, 1_000, "bob", "evt_0", '{"type":"object"}', 5_000, Priority.LOW, "thr_1",
    )  # fmt: skip
    assert set(vars(made)) == {f.name for f in dataclasses.fields(Event)}


def test_an_event_for_another_handle_differs_only_in_its_addressee() -> None:
    new = NewEvent("alice", "t.x", "text", {"n": 1}, "k", 1.5, '{"n":1}', None, "bob", None,
                   None, 30.0, Priority.HIGH, "thr_1")  # fmt: skip
    assert new.for_handle("carol") == dataclasses.replace(new, to="carol")


def test_an_event_with_a_hold_differs_only_in_its_hold_and_window() -> None:
    new = NewEvent("alice", "t.x", "text", {"n": 1}, "k", 1.5, '{"n":1}', None, "bob", None,
                   None, 30.0, Priority.HIGH, "thr_1")  # fmt: skip
    hold = Hold(HoldReason.DIGEST, 'digest ["t.*"]', 60_000)
    assert new.with_hold(hold, "win_1") == dataclasses.replace(new, hold=hold, held_by="win_1")


GLOBS = ("ci.*", "a?c", "[xy].z", "exact", "*.heartbeat")
TYPES = ["ci.build", "ci", "abc", "abbc", "x.z", "y.z", "z.z", "exact", "exactly", "a.heartbeat",
         "heartbeat", "CI.build", "ci.\nx"]  # fmt: skip


@pytest.mark.parametrize("type_", TYPES)
def test_mutes_and_digests_match_types_as_fnmatchcase_matches_each_glob(type_: str) -> None:
    expected = any(fnmatch.fnmatchcase(type_, glob) for glob in GLOBS)
    muting = Preferences(muted=EventMatch(types=GLOBS))
    assert muting.mutes(NewEvent("a", type_, "x")) is expected
    assert Digest(GLOBS, 60).matches(type_) is expected
    assert not Preferences().mutes(NewEvent("a", type_, "x"))


def test_type_rules_answer_as_the_globs_for_every_type_past_the_ones_remembered() -> None:
    first, second = Digest(("ci.*",), 60), Digest(("ci.build", "x.*"), 120)
    preferences = Preferences(muted=EventMatch(types=("*.heartbeat",)), digests=(first, second))
    types = [f"t{n}.heartbeat" for n in range(REMEMBERED_TYPES)] + ["ci.build", "x.z", "y.z"]
    for _ in range(2):  # answered, then remembered (the first types forgotten past the bound)
        for type_ in types:
            digest = first if type_.startswith("ci.") else second if type_ == "x.z" else None
            muted = preferences.mutes(NewEvent("a", type_, "x"))
            assert preferences.type_rules(type_) == (muted, digest)
            assert muted is type_.endswith(".heartbeat")
