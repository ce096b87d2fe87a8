import json

import pytest

from herald.models import Event, EventStatus

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
