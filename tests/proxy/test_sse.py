"""The SSE decoder: spec framing, any chunking, and exact raw bytes per event."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from upstreams import DATA

from promptcache.proxy.sse import ServerSentEvent, SSEDecoder


def decode(stream: bytes, cuts: list[int] | None = None) -> tuple[list[ServerSentEvent], bytes]:
    """Feed ``stream`` split at ``cuts`` (byte offsets); returns the events and the leftover."""
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    start = 0
    for cut in [*sorted(cuts or []), len(stream)]:
        events += decoder.feed(stream[start:cut])
        start = cut
    last, rest = decoder.close()
    return events + last, rest


def test_fields_comments_and_multiline_data() -> None:
    stream = (
        b": keep-alive comment\n"
        b"event: message_start\n"
        b"id: 7\n"
        b"retry: 1500\n"
        b"data: first line\n"
        b"data:second line, no space\n"
        b"data:  two spaces keep one\n"
        b"\n"
    )
    events, rest = decode(stream)
    assert rest == b""
    assert events == [
        ServerSentEvent(
            event="message_start",
            data="first line\nsecond line, no space\n two spaces keep one",
            id="7",
            retry=1500,
            raw=stream,
        )
    ]


def test_blocks_without_data_are_not_dispatched_and_roll_into_the_next_raw() -> None:
    stream = b": ping\n\nevent: only-a-type\n\ndata: x\n\n"
    events, _ = decode(stream)
    assert [(e.event, e.data) for e in events] == [("", "x")]
    assert events[0].raw == stream


def test_empty_data_line_dispatches_an_empty_event() -> None:
    events, _ = decode(b"data:\n\n")
    assert [e.data for e in events] == [""]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(eol: bytes) -> None:
    stream = eol.join([b"event: a", b"data: 1", b"", b"data: 2", b"", b""])
    events, rest = decode(stream)
    assert [(e.event, e.data) for e in events] == [("a", "1"), ("", "2")]
    assert b"".join(e.raw for e in events) + rest == stream


def test_crlf_split_between_cr_and_lf_is_one_line_end() -> None:
    stream = b"data: a\r\n\r\ndata: b\r\n\r\n"
    for cut in range(len(stream) + 1):
        events, rest = decode(stream, [cut])
        assert [e.data for e in events] == ["a", "b"], cut
        assert [e.raw for e in events] == [b"data: a\r\n\r\n", b"data: b\r\n\r\n"]
        assert rest == b""


def test_split_inside_a_multibyte_character() -> None:
    stream = "data: caf\u00e9 \u2615\n\n".encode()
    for cut in range(len(stream) + 1):
        events, _ = decode(stream, [cut])
        assert [e.data for e in events] == ["caf\u00e9 \u2615"]


def test_leading_bom_is_ignored_even_when_split() -> None:
    stream = b"\xef\xbb\xbfdata: x\n\n"
    for cut in range(4):
        events, _ = decode(stream, [cut])
        assert [e.data for e in events] == ["x"]
        assert events[0].raw == stream


def test_unfinished_event_at_end_of_stream_is_returned_not_dispatched() -> None:
    events, rest = decode(b"data: done\n\ndata: partial\n")
    assert [e.data for e in events] == ["done"]
    assert rest == b"data: partial\n"


def test_buffered_is_zero_only_at_event_boundaries() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a\n")
    assert decoder.buffered > 0
    decoder.feed(b"\n")
    assert decoder.buffered == 0


RECORDED = sorted(DATA.glob("*/*.sse"))


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_recorded_vendor_streams_decode_to_json_events(path: object) -> None:
    stream = path.read_bytes()  # type: ignore[attr-defined]
    events, rest = decode(stream)
    assert rest == b""
    assert b"".join(e.raw for e in events) == stream
    assert all(e.data.startswith("{") or e.data == "[DONE]" for e in events)


@settings(max_examples=60, deadline=None)
@given(
    path=st.sampled_from(RECORDED),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40),
)
def test_any_chunking_gives_the_same_events_and_bytes(path: object, cuts: list[int]) -> None:
    stream = path.read_bytes()  # type: ignore[attr-defined]
    whole, _ = decode(stream)
    events, rest = decode(stream, [c % (len(stream) + 1) for c in cuts])
    assert events == whole
    assert b"".join(e.raw for e in events) + rest == stream


#: Pieces of event streams: single-data-line events (the decoder's whole-block path) mixed with
#: every other shape (several lines, other fields, comments, CR and CRLF endings, stray blank
#: lines, a field with no colon, a value with no space after the colon).
_PIECES = [
    b'data: {"a":1}\n\n',
    b"data:x\n\n",
    b"data:\n\n",
    b"data: \xc3\xa9t\xc3\xa9\n\n",
    b"data: a\ndata: b\n\n",
    b"event: ping\ndata: p\n\n",
    b"id: 7\ndata: with id\n\n",
    b"retry: 50\ndata: r\n\n",
    b": comment\n",
    b"data: cr\r\r",
    b"data: crlf\r\n\r\n",
    b"\n",
    b"data\n\n",
    b"data:  two spaces\n\n",
    b"data: a\r\n\n",
    b"datum: x\n\n",
    b"data: half",
]


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(_PIECES), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_whole_blocks_decode_as_byte_by_byte(pieces: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(pieces)
    one_byte_at_a_time = decode(stream, list(range(1, len(stream))))  # never a whole block
    assert decode(stream) == one_byte_at_a_time
    assert decode(stream, [c % (len(stream) + 1) for c in cuts]) == one_byte_at_a_time
