"""``herald send --file``'s reading of the file: the bodies it sends, their dedupe keys, and the
lines it refuses before sending anything; and its sending, when the hub goes away."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from herald.operator.api import OperatorError
from herald.operator.output import Output
from herald.operator.send import Batch, in_batches, read_lines, send_file
from tests.operator.loopback_hub import PostHandler, api_of


def read_batches(path: Path, size: int = 1000) -> list[Batch]:
    return list(in_batches(read_lines(path), size))


def sent(path: Path, size: int = 1000) -> list[dict[str, Any]]:
    return [event for batch in read_batches(path, size) for event in json.loads(batch.body)]


def test_a_lines_key_is_its_number_and_the_start_of_its_sha256(tmp_path: Path) -> None:
    # Files sent by earlier versions are sent again with the same keys: this must not change.
    events = tmp_path / "events.jsonl"
    events.write_text('{"to": "op-x", "type": "bulk", "text": "event 0"}\n')
    (event,) = sent(events)
    assert event["dedupe_key"] == "line-000000001-777b3e40a01ea712"


def test_each_line_is_sent_as_the_event_it_holds_with_a_key_unless_it_has_one(
    tmp_path: Path,
) -> None:
    lines = [
        '  {"to": "a", "type": "t", "text": "spaced", "data": {"k": [1, {"z": null}]}}\t',
        '{"to": "a", "type": "t", "text": "é 😀 \\u00e9 \\"quoted\\" \\\\"}',
        '{"to": "a", "type": "t", "text": "mine", "dedupe_key": "my-key"}',
        '{"to": "a", "type": "t", "text": "none", "dedupe_key": null}',
        "{}",
        "{ }",
        '{"to": "a", "to": "b", "type": "t", "text": "the last of a name counts"}',
    ]
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = sent(events)
    keys = [event.pop("dedupe_key") for event in got]
    written = [json.loads(line) for line in lines]
    assert got == [{k: v for k, v in event.items() if k != "dedupe_key"} for event in written]
    assert keys[2:4] == ["my-key", None]
    assert [key[:15] for key in keys[:2] + keys[4:]] == [
        "line-000000001-",
        "line-000000002-",
        "line-000000005-",
        "line-000000006-",
        "line-000000007-",
    ]


def test_batches_name_their_first_and_last_lines_skipping_blank_ones(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    line = '{"to": "a", "type": "t", "text": "x"}'
    events.write_text("\n".join([line, "", line, "  ", line, line, line]) + "\n")
    batches = read_batches(events, size=2)
    assert [(b.first, b.last, b.events) for b in batches] == [(1, 3, 2), (5, 6, 2), (7, 7, 1)]
    assert [len(json.loads(b.body)) for b in batches] == [2, 2, 1]


def test_a_batch_holds_at_most_1000_events_counting_each_handle_of_a_list(
    tmp_path: Path,
) -> None:
    events = tmp_path / "events.jsonl"
    listed = json.dumps({"to": ["a", "b", "c"], "type": "t", "text": "x"})
    too_many = json.dumps({"to": [f"h{n}" for n in range(1001)], "type": "t", "text": "x"})
    one = json.dumps({"to": "a", "type": "t", "text": "x"})
    events.write_text("\n".join([listed] * 400 + [too_many] + [one] * 5 + [listed]) + "\n")
    batches = read_batches(events)

    def stored(batch: Batch) -> int:
        return sum(len(e["to"]) if isinstance(e["to"], list) else 1 for e in json.loads(batch.body))

    assert [(b.first, b.last, b.events, stored(b)) for b in batches] == [
        (1, 333, 333, 999),
        (334, 400, 67, 201),
        (401, 401, 1, 1001),  # alone: the hub refuses it, naming it
        (402, 407, 6, 8),
    ]


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("{not json", "not JSON (Expecting property name enclosed in double quotes)"),
        ('{"to": "a"} and more', "not JSON (Extra data)"),
        ('{"to": "a"}{"to": "b"}', "not JSON (Extra data)"),
        ('["to", "a"]', "an event is a JSON object"),
        ('"to a"', "an event is a JSON object"),
    ],
)
def test_a_bad_line_is_named_before_anything_is_sent(tmp_path: Path, bad: str, says: str) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text('{"to": "a", "type": "t", "text": "fine"}\n' * 1500 + bad + "\n")
    with pytest.raises(OperatorError) as refused:
        read_batches(events)
    assert refused.value.message.startswith(f"{events}:1501: {says}")
    assert refused.value.message.endswith("nothing was sent")


def test_a_hub_that_dies_mid_way_stops_the_sending_after_the_batches_it_answered(
    tmp_path: Path,
) -> None:
    """The sender holds each answer until the next request is out: when that request finds no
    hub, the error names the batch that failed, and nothing after it is sent."""
    events = tmp_path / "events.jsonl"
    events.write_text('{"to": "a", "type": "t", "text": "x"}\n' * 2500)
    posts: list[int] = []

    class DiesAfterOneBatch(PostHandler):
        def do_POST(self) -> None:
            body = json.loads(self.read_body())
            if self.path.endswith("?dry_run=true"):  # every line is checked first
                self.answer_json(json.dumps({"checked": len(body)}).encode())
                return
            posts.append(len(body))
            if len(posts) > 1:  # the hub goes away: no answer, the connection drops
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            receipts = [{"id": f"evt_{n}", "seq": n, "duplicate": False} for n in range(len(body))]
            self.answer_json(json.dumps({"events": receipts}).encode())

    with api_of(DiesAfterOneBatch) as api, pytest.raises(OperatorError) as failed:
        send_file(api, events, Output(as_json=True))
    assert failed.value.message.startswith("lines 1001-2000 were refused (cannot reach the hub")
    assert "the lines before 1001 were sent" in failed.value.message
    assert posts == [1000, 1000]  # nothing after the batch that failed


def test_each_batch_is_sent_as_the_very_bytes_its_dry_run_checked(tmp_path: Path) -> None:
    """The hub takes a batch whose bytes a dry run passed without checking its fields again:
    the command sends each batch as it was checked, in the file's order, once checked all."""
    events = tmp_path / "events.jsonl"
    events.write_text(
        "".join(json.dumps({"to": "a", "type": "t", "text": f"é {n}"}) + "\n" for n in range(2500))
    )
    posts: list[tuple[str, bytes]] = []

    class Records(PostHandler):
        def do_POST(self) -> None:
            body = self.read_body()
            posts.append((self.path, body))
            count = len(json.loads(body))
            if self.path.endswith("?dry_run=true"):
                self.answer_json(json.dumps({"checked": count}).encode())
                return
            receipts = [{"id": f"evt_{n}", "seq": n, "duplicate": False} for n in range(count)]
            self.answer_json(json.dumps({"events": receipts}).encode())

    with api_of(Records) as api:
        send_file(api, events, Output(as_json=True))
    paths = [path for path, _ in posts]
    assert paths == ["/v1/events?dry_run=true"] * 3 + ["/v1/events"] * 3
    # Dry runs go two at a time (they store nothing): the hub may take them in either order.
    assert sorted(body for _, body in posts[:3]) == sorted(body for _, body in posts[3:])
    assert [body for _, body in posts[3:]] == [batch.body for batch in read_batches(events)]
