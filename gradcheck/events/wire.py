"""The protobuf wire format of an Event's top-level fields, walked without parsing the message.

The one hand-written wire decoder in Python (``event.proto``: ``wall_time`` 1, ``step`` 2, the
``what`` oneof 3-9, ``source_metadata`` 10); everything else goes through tensorboard's
generated protobufs, and the C scanner (``native/_scan.c``, ``parse_event``) is its twin. It
answers the two questions asked before a payload is worth parsing: is this a graph or metadata
blob (skipped unread), and what is the step of this summary (to cut a file at a step boundary).
"""

from __future__ import annotations

EVENT_STEP = 2
EVENT_SUMMARY = 5
EVENT_WHAT = range(3, 10)  # the fields of Event's "what" oneof, all length-delimited


def event_head(payload: bytes, first: bool = False) -> tuple[int, int] | None:
    """``(step, what)`` of an Event payload: ``what`` is the number of the oneof's field that
    protobuf would keep (the last one on the wire; 0 when there is none). None when the payload
    is not a sequence of well-formed fields (then only a real parse can say what it is).
    ``first``: stop at the first field of the oneof (a blob is skipped without reading past
    it, whatever follows; the step is then the one seen before it)."""
    step, what, pos, size = 0, 0, 0, len(payload)
    while pos < size:
        key = payload[pos]  # field numbers below 16 (all of Event's) have a one-byte key
        key, pos = (key, pos + 1) if key < 0x80 else _varint(payload, pos)
        number, wire = key >> 3, key & 7
        if pos < 0 or number == 0:
            return None
        if wire == 0:
            value, pos = _varint(payload, pos)
            if number == EVENT_STEP:
                step = value - (1 << 64) if value >> 63 else value
        elif wire == 1:
            pos += 8
        elif wire == 2:
            length, pos = _varint(payload, pos)
            pos = pos + length if pos >= 0 else pos
            if number in EVENT_WHAT:
                what = number
                if first and 0 <= pos <= size:
                    return step, what
        elif wire == 5:
            pos += 4
        else:
            return None  # groups and invalid wire types
        if pos < 0 or pos > size:
            return None
    return step, what


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it; ``(0, -1)`` when it is
    truncated or longer than ten bytes."""
    if pos < len(data) and data[pos] < 0x80:  # one byte: keys, small lengths and steps
        return data[pos], pos + 1
    value = shift = 0
    while pos < len(data) and shift < 70:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & ((1 << 64) - 1), pos
        shift += 7
    return 0, -1


WireValue = int | bytes


def message_fields(payload: bytes) -> list[tuple[int, WireValue]]:
    """Every field of a protobuf message, in wire order: ``(number, value)``, the value a
    varint as an unsigned int (wire type 0), a fixed64/fixed32 as its little-endian unsigned
    int (1, 5), or the bytes of a length-delimited field (2: strings, bytes, messages).
    ``ValueError`` when the payload is not a well-formed message (a truncated field, a group,
    an invalid wire type): the caller decides what such a record costs. Used for formats whose
    messages tensorboard's protobufs do not hold (W&B's ``Record``: ``gradcheck.sources``)."""
    found: list[tuple[int, WireValue]] = []
    pos, size = 0, len(payload)
    while pos < size:
        key, pos = _varint(payload, pos)
        number, wire = key >> 3, key & 7
        if pos < 0 or number == 0:
            raise ValueError(f"bad field key at byte {pos}")
        value: WireValue
        if wire == 0:
            value, pos = _varint(payload, pos)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value = int.from_bytes(payload[pos : pos + width], "little")
            pos = pos + width if pos + width <= size else -1
        elif wire == 2:
            length, pos = _varint(payload, pos)
            end = pos + length
            value = payload[pos:end]
            pos = end if pos >= 0 and end <= size else -1
        else:
            raise ValueError(f"wire type {wire} (groups are not read) in field {number}")
        if pos < 0:
            raise ValueError(f"field {number} runs past the end of the message")
        found.append((number, value))
    return found


def signed(value: int) -> int:
    """A varint read as protobuf's ``int64`` (two's complement of the 64-bit value)."""
    return value - (1 << 64) if value >> 63 else value
