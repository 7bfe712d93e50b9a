"""The daemon socket's one framing, both ways: the Python client, the server and the native
client (nativeclient.c) all read and write this.

A message is MAGIC, a big-endian u32 length, then that many bytes holding one value:

    N  None           T  True           F  False
    i  int            (8 bytes, big-endian, signed)
    f  float          (8 bytes, IEEE 754 big-endian)
    s  str            (u32 length + UTF-8; bytes that are not UTF-8 come back as
                       surrogate escapes, as os.fsdecode reads argv and environ)
    b  bytes          (u32 length + the bytes: stdin and outputs travel unencoded)
    l  list           (u32 count + values)
    d  dict           (u32 count + pairs of a str key and a value; a repeated key: the
                       last one wins, as in JSON)

A request is {"op": str, "args": dict}; an answer is a dict, {"exit": int, "stdout":
str, "stderr": str, ...} or {"fallback": True, "reason": str} (the client does the work
itself). Before the answer to a request it ran, the daemon's worker sends TAKEN (one
byte, see client.request). Binary rather than JSON so that the native client, which
holds argv, environ and stdin as bytes, writes it in a few lines of C, and stdin needs
no base64. `decode` trusts nothing: lengths and counts are checked against the bytes
there are and nesting is bounded, so hostile input is a ValueError, never a crash.

Standard library only, and only `_struct`'s module: the per-call hook path imports this.
"""

from __future__ import annotations

import struct

MAGIC = b"GGW1"
HEADER = 8                  # MAGIC and the u32 length
MAX_DEPTH = 128             # lists and dicts, one within the other
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

TYPE_CHECKING = False       # not typing.TYPE_CHECKING: `typing` costs milliseconds to import
if TYPE_CHECKING:
    from typing import Any


def encode(value: object) -> bytes:
    """One message holding `value`; TypeError for what the format has no tag for."""
    out = bytearray()
    _put(out, value, 0)
    return MAGIC + _U32.pack(len(out)) + out


def body_length(data: bytes | bytearray) -> int | None:
    """The length a message's header declares (the bytes after HEADER), None while fewer
    than HEADER bytes have arrived; ValueError when they are not this framing's."""
    if len(data) < HEADER:
        if not MAGIC.startswith(bytes(data[:len(MAGIC)])):
            raise ValueError("not a gitguard message")
        return None
    if bytes(data[:len(MAGIC)]) != MAGIC:
        raise ValueError("not a gitguard message")
    length: int = _U32.unpack_from(data, len(MAGIC))[0]
    return length


def decode(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """The value of one whole message; ValueError when it is anything else (truncated,
    trailing bytes, an unknown tag, nested deeper than `max_depth`)."""
    length = body_length(data)
    if length is None or len(data) != HEADER + length:
        raise ValueError("a truncated message" if length is None or len(data) < HEADER + length
                         else "bytes after the message")
    reader = _Reader(memoryview(data), HEADER, min(max_depth, MAX_DEPTH))
    value = reader.value(0)
    if reader.at != len(data):
        raise ValueError("bytes after the value")
    return value


def _put(out: bytearray, value: object, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise TypeError(f"it nests deeper than {MAX_DEPTH} levels")
    if value is None:
        out += b"N"
    elif value is True:
        out += b"T"
    elif value is False:
        out += b"F"
    elif isinstance(value, int):
        try:
            out += b"i" + _I64.pack(value)
        except struct.error:
            raise TypeError(f"an integer beyond 64 bits: {value}") from None
    elif isinstance(value, float):
        out += b"f" + _F64.pack(value)
    elif isinstance(value, str):
        raw = value.encode("utf-8", "surrogateescape")
        out += b"s" + _U32.pack(len(raw)) + raw
    elif isinstance(value, bytes | bytearray | memoryview):
        out += b"b" + _U32.pack(len(value)) + value
    elif isinstance(value, dict):
        out += b"d" + _U32.pack(len(value))
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"a dict key that is not a str: {key!r}")
            _put(out, key, depth + 1)
            _put(out, item, depth + 1)
    elif isinstance(value, list | tuple):
        out += b"l" + _U32.pack(len(value))
        for item in value:
            _put(out, item, depth + 1)
    else:
        raise TypeError(f"{type(value).__name__} has no place in a gitguard message")


class _Reader:
    __slots__ = ("data", "at", "max_depth")

    def __init__(self, data: memoryview, at: int, max_depth: int) -> None:
        self.data, self.at, self.max_depth = data, at, max_depth

    def take(self, size: int) -> memoryview:
        end = self.at + size
        if end > len(self.data):
            raise ValueError("a truncated message")
        piece = self.data[self.at:end]
        self.at = end
        return piece

    def u32(self) -> int:
        value: int = _U32.unpack(self.take(4))[0]
        return value

    def value(self, depth: int) -> Any:
        tag = bytes(self.take(1))
        if tag in b"dl" and depth >= self.max_depth:
            raise ValueError(f"it nests deeper than {self.max_depth} levels")
        if tag == b"s":
            return str(self.take(self.u32()), "utf-8", "surrogateescape")
        if tag == b"b":
            return bytes(self.take(self.u32()))
        if tag == b"d":
            count = self.u32()
            if count * 2 > len(self.data) - self.at:    # each value is a byte at least
                raise ValueError("a truncated message")
            found = {}
            for _ in range(count):
                key = self.value(depth + 1)
                if not isinstance(key, str):
                    raise ValueError("a dict key that is not a str")
                found[key] = self.value(depth + 1)
            return found
        if tag == b"l":
            count = self.u32()
            if count > len(self.data) - self.at:
                raise ValueError("a truncated message")
            return [self.value(depth + 1) for _ in range(count)]
        if tag == b"i":
            return _I64.unpack(self.take(8))[0]
        if tag == b"f":
            return _F64.unpack(self.take(8))[0]
        simple = _SIMPLE.get(tag, _SIMPLE)
        if simple is _SIMPLE:
            raise ValueError(f"an unknown tag {tag!r}")
        return simple


_SIMPLE: dict[bytes, Any] = {b"N": None, b"T": True, b"F": False}
