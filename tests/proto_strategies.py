"""Hypothesis strategies for protobuf requests, built from the messages' descriptors: every field
of every type gets valid, boundary and hostile values, and the caller can name fields whose
meaningful values (the ids and scopes that exist on the server) should be drawn more often.

What a Python message cannot hold, the wire can: `with_wire_garbage` appends a string field
whose bytes are not UTF-8 (a lone surrogate's CESU-8 bytes, a stray continuation byte), and
`raw_payloads` makes truncated, corrupted or random request bytes."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from google.protobuf import descriptor as d
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import strategies as st

# google.protobuf.Timestamp's valid range, and values just outside it.
TIMESTAMP_MIN_SECONDS = -62_135_596_800
TIMESTAMP_MAX_SECONDS = 253_402_300_799

HOSTILE_TEXT = [
    "",
    " ",
    "\t\n",
    "\x00",
    "a\x00b",
    "x\n",
    " leading",
    "trailing ",
    "\x7f",
    "\x1b[31mred\x1b[0m",
    "\u202eevil",
    "\ufeffbom",
    "\u200b",
    "e\u0301",
    "😀" * 70,
    "𝕏" * 257,
    "'; DROP TABLE messages; --",
    "%s%s%n",
    "{0}{1}",
    "../../etc/passwd",
    "\\u0000",
    "null",
    "NaN",
    "o:1",
    "|",
    "=",
]
# Sizes around the limits: ids (256 characters), content (max_message_bytes, 65536 by default).
_SIZES = [255, 256, 257, 2000, 2001, 16384, 16385, 65535, 65536, 65537, 300_000]

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_UINT32 = (0, 2**32 - 1)
_UINT64 = (0, 2**64 - 1)
_INT_BOUNDS = {
    d.FieldDescriptor.TYPE_INT32: _INT32,
    d.FieldDescriptor.TYPE_SINT32: _INT32,
    d.FieldDescriptor.TYPE_SFIXED32: _INT32,
    d.FieldDescriptor.TYPE_INT64: _INT64,
    d.FieldDescriptor.TYPE_SINT64: _INT64,
    d.FieldDescriptor.TYPE_SFIXED64: _INT64,
    d.FieldDescriptor.TYPE_UINT32: _UINT32,
    d.FieldDescriptor.TYPE_FIXED32: _UINT32,
    d.FieldDescriptor.TYPE_UINT64: _UINT64,
    d.FieldDescriptor.TYPE_FIXED64: _UINT64,
}
# Bytes that no UTF-8 decoder accepts: what a non-Python client can put in a string field.
INVALID_UTF8 = [
    b"\xff\xfe\xc3\x28",
    b"\xed\xa0\x80",  # a lone high surrogate, CESU-8
    b"\xed\xbf\xbf",  # a lone low surrogate
    b"\x80",
    b"\xc0\xaf",  # overlong "/"
    b"abc\xf0\x9f",  # truncated emoji
    b"\xf4\x90\x80\x80",  # above U+10FFFF
]


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, in proportion to its weight. (st.one_of would not do: it merges
    equal branches, so repeating one does not weight it.)"""
    branches = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(branches).flatmap(lambda strategy: strategy)


def hostile_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(HOSTILE_TEXT),
        st.sampled_from(_SIZES).map(lambda n: "x" * n),
        st.text(max_size=30),
        st.text(st.characters(codec="utf-8", categories=["Cc", "Cf", "Zs", "Zl", "Mn"])),
    )


def integers(bounds: tuple[int, int]) -> st.SearchStrategy[int]:
    low, high = bounds
    edges = [v for v in (0, 1, -1, 2, 99, 100, 101, 999, 1000, 1001, low, high) if low <= v <= high]
    return st.one_of(st.sampled_from(edges), st.integers(low, high))


def floats(width: int) -> st.SearchStrategy[float]:
    edges = [0.0, -0.0, 1.0, -1.0, 0.5, 1.0000001, 86400.0 * 365, 1e308, float("nan")]
    edges += [float("inf"), float("-inf")]
    return st.one_of(st.sampled_from(edges), st.floats(width=width))


def timestamps() -> st.SearchStrategy[Timestamp]:
    """In range (any instant from year 1 to 9999), at the edges, and outside: seconds past the
    range, negative or too many nanos."""
    valid = st.datetimes(
        min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)
    ).map(lambda t: _timestamp(t.replace(tzinfo=UTC)))
    seconds = st.sampled_from(
        [
            TIMESTAMP_MIN_SECONDS - 1,
            TIMESTAMP_MIN_SECONDS,
            TIMESTAMP_MAX_SECONDS,
            TIMESTAMP_MAX_SECONDS + 1,
            0,
            -1,
            2**62,
            -(2**62),
            2**63 - 1,
            -(2**63),
        ]
    )
    nanos = st.sampled_from([0, 1, 999_999_999, 1_000_000_000, -1, -5, 2**31 - 1, -(2**31)])
    edges = st.builds(lambda s, n: Timestamp(seconds=s, nanos=n), seconds, nanos)
    return st.one_of(valid, edges)


def _timestamp(value: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def page_tokens(issued: list[str]) -> st.SearchStrategy[str]:
    """No token (the first page), tokens the server issued, and tokens in the shape of its
    tokens with hostile parts."""
    parts = st.one_of(
        st.sampled_from(["0", "-1", "18446744073709551616", "9" * 40, "²", "1e9", "", "x"]),
        st.sampled_from(["0001-01-01T00:00:00+00:00", "9999-12-31T23:59:59", "2026-13-01"]),
        st.integers(-(2**70), 2**70).map(str),
    )
    forged = st.lists(parts, min_size=1, max_size=3).map(
        lambda p: base64.urlsafe_b64encode("|".join(p).encode()).decode().rstrip("=")
    )
    offsets = parts.map(lambda p: base64.urlsafe_b64encode(f"o:{p}".encode()).decode())
    choices = [(3, st.just("")), (1, forged), (1, offsets), (1, hostile_text())]
    if issued:
        choices.append((3, st.sampled_from(issued)))
    return weighted(*choices)


Meaningful = Mapping[str, st.SearchStrategy[Any]]


def messages(
    descriptor: d.Descriptor, meaningful: Meaningful, *, depth: int = 0
) -> st.SearchStrategy[Message]:
    """Messages of `descriptor`'s type: each field left unset or set to a value of its type; a
    field named in `meaningful` draws from that strategy six times in seven."""
    if descriptor.full_name == "google.protobuf.Timestamp":
        return timestamps()
    cls = _message_class(descriptor)
    fields = {f.name: _field(f, meaningful, depth) for f in descriptor.fields}

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        message = cls()
        for name, strategy in fields.items():
            value = draw(strategy)
            if value is _UNSET:
                continue
            field = descriptor.fields_by_name[name]
            if _is_repeated(field):
                getattr(message, name).extend(value)
            elif field.type == d.FieldDescriptor.TYPE_MESSAGE:
                getattr(message, name).CopyFrom(value)
            else:
                setattr(message, name, value)
        return message

    return build()


_UNSET = object()


def _is_repeated(field: d.FieldDescriptor) -> bool:
    return bool(field.is_repeated) if hasattr(field, "is_repeated") else field.label == 3


def _field(field: d.FieldDescriptor, meaningful: Meaningful, depth: int) -> st.SearchStrategy[Any]:
    value = _value(field, meaningful, depth)
    special = meaningful.get(field.name)
    if _is_repeated(field):
        many = st.lists(value, max_size=4)
        if field.type == d.FieldDescriptor.TYPE_MESSAGE:
            # One past a per-call limit (1000 messages per AppendMessages), cheaply.
            many = weighted((15, many), (1, value.map(lambda m: [m] * 1001)))
        if special is not None:
            # Meaningful lists, and meaningful lists with one random element among them.
            spoiled = st.tuples(special, value, st.integers(0, 4)).map(
                lambda t: [*t[0][: t[2]], t[1], *t[0][t[2] :]]
            )
            return weighted((1, st.just(_UNSET)), (5, special), (2, spoiled), (2, many))
        return weighted((1, st.just(_UNSET)), (3, many))
    if special is not None:
        # Mostly meaningful, so that requests get past validation often enough to matter.
        return weighted((1, st.just(_UNSET)), (12, special), (2, value))
    return weighted((1, st.just(_UNSET)), (3, value))


def _value(field: d.FieldDescriptor, meaningful: Meaningful, depth: int) -> st.SearchStrategy[Any]:
    """A value of the field's type, at random: valid, boundary or hostile."""
    t = field.type
    if t == d.FieldDescriptor.TYPE_MESSAGE:
        if depth >= 3:
            return st.just(_message_class(field.message_type)())
        return messages(field.message_type, meaningful, depth=depth + 1)
    if t == d.FieldDescriptor.TYPE_STRING:
        generic: st.SearchStrategy[Any] = hostile_text()
    elif t == d.FieldDescriptor.TYPE_BYTES:
        generic = st.binary(max_size=64)
    elif t == d.FieldDescriptor.TYPE_BOOL:
        generic = st.booleans()
    elif t == d.FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        # proto3 enums are open: any int32 decodes, so unknown numbers reach the server.
        generic = weighted((3, st.sampled_from(known)), (1, integers(_INT32)))
    elif t == d.FieldDescriptor.TYPE_DOUBLE:
        generic = floats(64)
    elif t == d.FieldDescriptor.TYPE_FLOAT:
        generic = floats(32)
    else:
        generic = integers(_INT_BOUNDS[t])
    return generic


def _message_class(descriptor: d.Descriptor) -> type[Message]:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def length_delimited(field_number: int, payload: bytes) -> bytes:
    return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


def with_wire_garbage(descriptor: d.Descriptor) -> st.SearchStrategy[bytes]:
    """The wire bytes of one string field of `descriptor` set to bytes that are not UTF-8.
    Appended to a valid message, the last occurrence wins, as the wire format says."""
    strings = [f.number for f in descriptor.fields if f.type == d.FieldDescriptor.TYPE_STRING]
    if not strings:
        return st.just(b"")
    payload = st.one_of(
        st.sampled_from(INVALID_UTF8),
        st.tuples(st.text(max_size=8), st.sampled_from(INVALID_UTF8)).map(
            lambda p: p[0].encode() + p[1]
        ),
    )
    return st.builds(length_delimited, st.sampled_from(strings), payload)


def raw_payloads(valid: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Request bytes that mostly do not decode: random bytes, a valid message cut short or
    with a byte flipped or garbage after it, and truncated varints and lengths."""

    @st.composite
    def corrupted(draw: st.DrawFn) -> bytes:
        data = draw(valid)
        if not data:
            return b"\x0a\x05ab"  # a length past the end
        how = draw(st.sampled_from(["cut", "flip", "append"]))
        if how == "cut":
            return data[: draw(st.integers(0, len(data) - 1))]
        if how == "flip":
            i = draw(st.integers(0, len(data) - 1))
            return data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1 :]
        return data + draw(st.binary(min_size=1, max_size=16))

    fixed = [b"\xff", b"\x08", b"\x08\xff", b"\x0a\xff\xff\xff\xff\x0f", b"\x0f", b"\x00" * 8]
    return st.one_of(st.binary(max_size=256), corrupted(), st.sampled_from(fixed))
