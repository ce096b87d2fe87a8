"""The SSE decoder against the WHATWG standard's rules, fed whole and in every small chunking."""

from __future__ import annotations

import pytest

from herald.sse import ServerSentEvent, SSEDecoder

CHUNK_SIZES = [None, 1, 2, 3, 7]


def decode(
    stream: bytes, chunk_size: int | None, *, max_event_chars: int | None = None
) -> list[ServerSentEvent]:
    decoder = SSEDecoder(max_event_chars=max_event_chars)
    size = chunk_size or len(stream) or 1
    events: list[ServerSentEvent] = []
    for start in range(0, len(stream), size):
        events += decoder.feed(stream[start : start + size])
    return events


def datas(stream: bytes, chunk_size: int | None) -> list[str]:
    return [event.data for event in decode(stream, chunk_size)]


@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_unicode_line_and_paragraph_separators_are_text_not_line_ends(
    chunk_size: int | None,
) -> None:
    text = "a\u2028b\u2029c\u0085d\x0be\x0cf\x1cg"
    stream = f'id: 7\ndata: {{"text":"{text}"}}\n\n'.encode()
    (event,) = decode(stream, chunk_size)
    assert event.data == f'{{"text":"{text}"}}' and event.last_event_id == "7"


@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
@pytest.mark.parametrize("end", ["\n", "\r", "\r\n"])
def test_lf_cr_and_crlf_each_end_a_line(chunk_size: int | None, end: str) -> None:
    stream = f"data: one{end}data: two{end}{end}data: three{end}{end}".encode()
    assert datas(stream, chunk_size) == ["one\ntwo", "three"]


def test_a_crlf_split_across_chunks_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r") == []  # a second line end here would dispatch "a" alone
    assert decoder.feed(b"\n") == []
    (event,) = decoder.feed(b"\r\n")
    assert event.data == "a\nb"


def test_a_cr_then_a_chunk_that_decodes_to_nothing_keeps_the_crlf_whole() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a\r")
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n") == []
    (event,) = decoder.feed(b"\n")
    assert event.data == "a"


@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_multibyte_characters_split_across_chunks_arrive_whole(chunk_size: int | None) -> None:
    text = "héllo ✓ 😀 \u2028"
    assert datas(f"data: {text}\n\n".encode(), chunk_size) == [text]


def test_invalid_utf8_becomes_the_replacement_character() -> None:
    assert datas(b"data: a\xffb\n\n", None) == ["a\ufffdb"]


def test_a_leading_bom_is_dropped() -> None:
    assert datas(b"\xef\xbb\xbfdata: x\n\n", 1) == ["x"]


def test_only_one_space_after_the_colon_is_dropped() -> None:
    stream = b"data:no space\n\ndata:  two spaces\n\ndata\n\n"
    assert datas(stream, None) == ["no space", " two spaces", ""]


def test_event_type_id_comments_and_unknown_fields() -> None:
    stream = (
        b": a comment\n"
        b"event: truncated\n"
        b"id: 3\n"
        b"colour: blue\n"
        b"data: {}\n\n"
        b"data: next\n\n"  # no id field: the last id carries on, the type does not
        b"id: 4\x005\n"  # an id holding NUL is ignored
        b"data: after\n\n"
    )
    events = decode(stream, None)
    assert [(e.type, e.last_event_id, e.data) for e in events] == [
        ("truncated", "3", "{}"),
        ("message", "3", "next"),
        ("message", "3", "after"),
    ]


def test_an_event_without_data_is_not_dispatched_but_its_id_is_kept() -> None:
    assert decode(b"id: 9\nevent: nothing\n\n", None) == []
    decoder = SSEDecoder()
    decoder.feed(b"id: 9\n\ndata: x\n\n")
    assert decoder.last_event_id == "9"


def test_an_unfinished_event_is_not_dispatched() -> None:
    assert decode(b"data: complete\n\ndata: cut off\n", None) == [
        ServerSentEvent("message", "complete", "")
    ]


def test_retry_is_taken_only_when_it_is_ascii_digits() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"retry: 2000\n\nretry: \xc2\xb2\n\nretry: 1s\n\n")
    assert decoder.retry_ms == 2000


@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_an_oversized_event_is_reported_by_its_id_and_the_next_one_is_whole(
    chunk_size: int | None,
) -> None:
    stream = (
        b"id: 1\ndata: small\n\n"
        b"id: 2\ndata: " + b"x" * 100 + b"\n\n"
        b"id: 3\ndata: " + b"y" * 30 + b"\ndata: " + b"y" * 30 + b"\n\n"
        b"id: 4\ndata: last\n\n"
    )
    events = decode(stream, chunk_size, max_event_chars=50)
    assert [(e.last_event_id, e.data, e.oversized) for e in events] == [
        ("1", "small", False),
        ("2", "", True),
        ("3", "", True),
        ("4", "last", False),
    ]


@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_the_data_lines_of_one_event_are_joined_with_lf_empty_ones_included(
    chunk_size: int | None,
) -> None:
    stream = b'id: 5\ndata: {"a":\ndata:\ndata:  1}\n\ndata: next\n\n'
    events = decode(stream, chunk_size)
    assert [(e.data, e.last_event_id) for e in events] == [('{"a":\n\n 1}', "5"), ("next", "5")]
