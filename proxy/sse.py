"""The one Server-Sent Events decoder of the proxy: incremental, byte-exact, spec-conformant.

The proxy forwards an upstream's ``text/event-stream`` bytes to the client unchanged while it
reads the same bytes here to find the usage events. Chunks arrive split anywhere (inside a line,
between ``\\r`` and ``\\n``, inside a multi-byte UTF-8 character), so the decoder buffers only the
unfinished event and keeps, for each event it returns, the exact bytes it came from (``raw``): a
caller that must drop one event (the OpenAI usage chunk the proxy asked for itself) re-emits the
others byte for byte.

Parsing follows the WHATWG HTML "event stream interpretation" (checked 2026-11-30):
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
Lines end in CRLF, LF or CR; a blank line dispatches the event; ``:`` starts a comment; one space
after the colon is dropped; ``data`` lines are joined with ``\\n``; an event with no data is not
dispatched; an unfinished event at end of stream is discarded; one leading BOM is ignored.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["SSEDecoder", "ServerSentEvent"]

_EOL = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class ServerSentEvent(NamedTuple):
    """One dispatched event (a named tuple: a stream of short events makes many).

    Attributes:
        event: the ``event:`` field, ``""`` when absent (the spec's default type "message").
        data: the ``data:`` lines joined with ``\\n``.
        id: the last event id seen so far in the stream, or ``None``.
        retry: the ``retry:`` field of this event in ms, or ``None``.
        raw: the exact bytes from the end of the previous event up to and including this event's
            terminating blank line (comment-only blocks before it are included).
    """

    event: str
    data: str
    id: str | None
    retry: int | None
    raw: bytes


class SSEDecoder:
    """Feed it the stream's byte chunks in order; it returns each event once it is complete.

    Example::

        decoder = SSEDecoder()
        for chunk in chunks:
            for event in decoder.feed(chunk):
                handle(event)
        last, leftover = decoder.close()  # leftover: an unfinished event, never dispatched
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scan = 0  # offset in _buf up to which lines have been parsed
        self._start_of_stream = True
        self._data: list[str] = []
        self._event = ""
        self._retry: int | None = None
        self._last_id: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for an event not yet complete (0 at an event boundary)."""
        return len(self._buf)

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Parse ``chunk`` (any length, split anywhere) and return the events it completed."""
        self._buf += chunk
        if self._start_of_stream:
            if len(self._buf) < len(_BOM) and _BOM.startswith(bytes(self._buf)):
                return []  # maybe a BOM, split
            self._start_of_stream = False
            if self._buf.startswith(_BOM):
                self._scan = len(_BOM)
        return self._parse(final=False)

    def close(self) -> tuple[list[ServerSentEvent], bytes]:
        """End of stream: the events a held-back final CR completes, and the bytes of an
        unfinished event (never dispatched, per the spec)."""
        self._start_of_stream = False
        events = self._parse(final=True)
        rest = bytes(self._buf)
        self._buf.clear()
        self._scan = 0
        self._data = []
        return events, rest

    def _parse(self, *, final: bool) -> list[ServerSentEvent]:
        buf = self._buf
        end = len(buf)
        pos = self._scan
        start = 0  # first byte of the event being built
        events: list[ServerSentEvent] = []
        if pos == 0 and not self._data and not self._event and self._retry is None:
            # At an event boundary: take whole ``data:<value>\n\n`` blocks (one data line,
            # LF endings: what OpenAI-compatible servers send) without the line loop below.
            pos = start = self._single_data_events(buf, events)
        while pos < end:
            match = _EOL.search(buf, pos)
            if match is None:
                break
            eol = match.start()
            if match.end() == end and match.end() - eol == 1 and buf[eol] == 0x0D and not final:
                break  # a CR at the end of the chunk may be the first half of CRLF
            line = buf[pos:eol]
            pos = match.end()
            if line:
                self._field(bytes(line))
            elif self._data:
                events.append(
                    ServerSentEvent(
                        event=self._event,
                        data="\n".join(self._data),
                        id=self._last_id,
                        retry=self._retry,
                        raw=bytes(buf[start:pos]),
                    )
                )
                start = pos
                self._data = []
                self._event = ""
                self._retry = None
            else:
                self._event = ""  # blank line with no data: reset, dispatch nothing
                self._retry = None
        if start:
            del buf[:start]
            pos -= start
        self._scan = pos
        return events

    def _single_data_events(self, buf: bytearray, events: list[ServerSentEvent]) -> int:
        """Dispatch the complete events at the start of ``buf`` that are one ``data`` line
        ending in LF followed by an empty line, in order, stopping at the first other one;
        returns the offset after the last one taken. Gives what the line loop gives for them
        (the line loop's state is empty before and after each)."""
        # Each such event is ``data:``, one optional space, the value (no CR or LF), LF LF:
        # rb"data: ?([^\r\n]*)\n\n", found with byte searches (memchr) instead of that regex,
        # whose ``[^\r\n]*`` costs about 30 instructions per byte of the value.
        pos = 0
        size = len(buf)
        last_id = self._last_id
        find = buf.find
        append = events.append
        new = tuple.__new__  # the named tuple's own __new__ is a Python function: one call an event
        while buf.startswith(b"data:", pos):
            value = pos + 5
            lf = find(b"\n", value)
            if lf < 0 or lf + 1 >= size or buf[lf + 1] != 0x0A or find(b"\r", value, lf) >= 0:
                break
            if value < lf and buf[value] == 0x20:
                value += 1
            data = buf[value:lf].decode("utf-8", "replace")
            append(new(ServerSentEvent, ("", data, last_id, None, bytes(buf[pos : lf + 2]))))
            pos = lf + 2
        return pos

    def _field(self, line: bytes) -> None:
        if line[0] == 0x3A:  # ":" comment
            return
        text = line.decode("utf-8", errors="replace")
        name, colon, value = text.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
