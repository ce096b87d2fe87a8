"""Every model's refusal names the value at fault by its path and says what to send, and takes
no value for another type."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from herald.errors import InvalidInput, TooLarge
from herald.inputs.agents import DeliveryOverrides, NewAgentInput, RotationInput
from herald.inputs.channel import ChannelAckInput, HeartbeatInput, PermissionInput
from herald.inputs.events import EventInput, parse_batch, parse_new_event
from herald.inputs.refusals import Input, _model_in, parse, says

EVENT = {"to": "alice", "type": "t", "text": "x"}


def refusal(model: type[Input], raw: Any) -> str:
    with pytest.raises(InvalidInput) as refused:
        parse(model, raw)
    return refused.value.message


def test_a_fault_in_a_batch_is_named_by_the_index_of_its_event() -> None:
    batch = [EVENT, EVENT, EVENT, {**EVENT, "type": "not a type"}, {**EVENT, "to": 5}]
    with pytest.raises(InvalidInput) as refused:
        parse_batch(batch)
    assert refused.value.message.startswith("events[3].type must be 1-128 characters")


def test_an_unknown_field_is_named_before_the_other_faults_of_its_object() -> None:
    batch = [EVENT, {"type": 1, "colour": "red", "size": 2}]
    with pytest.raises(InvalidInput) as refused:
        parse_batch(batch)
    assert refused.value.message == (
        "events[1] has unknown field(s) colour, size;"
        " allowed: data, dedupe_key, delay_s, deliver_at, from, priority, reply, text, to,"
        " ttl_s, type"
    )


def test_a_missing_field_is_named_with_what_to_send() -> None:
    assert refusal(EventInput, {"type": "t", "text": "x"}) == (
        "event.to is required and must be an agent handle matching [a-z0-9_-]{1,64}, or a"
        " list of 1-1000 of them (each once)"
    )


class NeedsDelivery(Input):
    where: ClassVar[str] = "agent"

    delivery: DeliveryOverrides


def test_a_missing_object_is_named_with_the_shape_to_send() -> None:
    assert refusal(NeedsDelivery, {}) == (
        'agent.delivery is required and must be an object such as {"channel": true,'
        ' "ack_timeout_s": 120}'
    )


def test_a_fault_in_a_nested_object_is_named_by_its_whole_path() -> None:
    unknown = refusal(NewAgentInput, {"handle": "alice", "delivery": {"chanel": True}})
    assert unknown.startswith("agent.delivery has unknown key(s) chanel; allowed: ack_timeout_s")
    form = {"type": "object", "properties": {"x": {"type": "string", "pattern": "a"}}}
    assert refusal(EventInput, {**EVENT, "reply": form}) == (
        "event.reply.properties.x has unsupported keyword(s) ['pattern']"
    )


def test_an_event_over_its_size_is_too_large_and_named() -> None:
    with pytest.raises(TooLarge, match=r"^events\[1\] is \d+ bytes"):
        parse_batch([EVENT, {**EVENT, "text": "x" * (256 * 1024)}])


@pytest.mark.parametrize(
    ("model", "raw", "named"),
    [
        (EventInput, {**EVENT, "ttl_s": True}, "event.ttl_s must be a number"),
        (EventInput, {**EVENT, "ttl_s": "60"}, "event.ttl_s must be a number"),
        (EventInput, {**EVENT, "text": 5}, "event.text must be a non-empty string"),
        (HeartbeatInput, {"limit": "5"}, "heartbeat.limit must be an integer"),
        (HeartbeatInput, {"cursor": 1.0}, "heartbeat.cursor must be an integer"),
        (ChannelAckInput, {"cursor": True}, "ack.cursor must be the cursor herald gave"),
        (ChannelAckInput, {"ids": ["evt_1", 2]}, "ack.ids must be a list"),
        (DeliveryOverrides, {"channel": 1}, "delivery.channel must be true or false"),
        (DeliveryOverrides, {"ack_timeout_s": False}, "delivery.ack_timeout_s must be a number"),
        (RotationInput, {"grace_s": True}, "rotation.grace_s must be a number"),
        (
            PermissionInput,
            {"to": "bob", "request_id": 12345, "tool_name": "Bash"},
            "permission.request_id",
        ),
    ],
)
def test_no_value_is_taken_for_another_type(model: type[Input], raw: Any, named: str) -> None:
    assert refusal(model, raw).startswith(named)


def test_a_value_that_fits_keeps_its_own_type() -> None:
    assert parse_new_event({**EVENT, "ttl_s": 60}).ttl_s == 60
    assert parse(DeliveryOverrides, {"ack_timeout_s": 120}).to_json() == '{"ack_timeout_s":120}'


def test_null_is_a_left_out_field_where_the_field_has_a_default() -> None:
    assert parse(HeartbeatInput, {"limit": None}).limit == 20
    assert "leave cursor out" in refusal(HeartbeatInput, {"cursor": None})
    assert refusal(DeliveryOverrides, {"log": None}) == "delivery.log must be true or false"


def _inputs(model: type[Input] = Input) -> list[type[Input]]:
    return [found for sub in model.__subclasses__() for found in (sub, *_inputs(sub))]


def test_every_field_says_what_to_send() -> None:
    import herald.inputs.agents
    import herald.inputs.channel
    import herald.inputs.event_types
    import herald.inputs.events
    import herald.inputs.keys
    import herald.inputs.listing
    import herald.inputs.subscriptions  # noqa: F401 (every model, so that each is found)

    silent = [
        f"{model.__name__}.{name}"
        for model in _inputs()
        for name in model.model_fields
        if says(model, name) is None and _model_in(model.model_fields[name].annotation) is None
    ]
    assert silent == []
