"""Avro object container files (the encoding Iceberg's manifests and manifest lists use): a writer and
a reader for the schemas lakelog writes, driven by the schema JSON, with the ``null`` and ``deflate``
codecs. Values are plain Python: records are dicts by field name, unions ``["null", T]`` take None,
arrays lists, maps dicts (Iceberg writes maps with non-string keys as arrays of key/value records)."""

from __future__ import annotations

import io
import os
import struct
import zlib
from typing import Any, Callable

import orjson

MAGIC = b"Obj\x01"
_F = struct.Struct("<f")
_D = struct.Struct("<d")


class AvroError(ValueError):
    """The bytes are not an Avro container file of a schema this module reads."""


# ---------------------------------------------------------------- encoding

def _long(out: bytearray, n: int) -> None:
    n = (n << 1) ^ (n >> 63)
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _bytes(out: bytearray, b: bytes) -> None:
    _long(out, len(b))
    out += b


Encoder = Callable[[bytearray, Any], None]


def encoder(schema: Any) -> Encoder:
    """A function appending the binary encoding of a value of ``schema`` to a bytearray."""
    if isinstance(schema, list):
        branches = [encoder(s) for s in schema]
        null = next((i for i, s in enumerate(schema) if s == "null"), None)
        other = next(i for i, s in enumerate(schema) if s != "null")

        def union(out: bytearray, v: Any) -> None:
            i = null if v is None else other
            _long(out, i)
            branches[i](out, v)
        return union
    if isinstance(schema, dict):
        t = schema["type"]
        if t == "record":
            fields = [(f["name"], encoder(f["type"])) for f in schema["fields"]]

            def record(out: bytearray, v: dict) -> None:
                for name, enc in fields:
                    enc(out, v.get(name))
            return record
        if t == "array":
            item = encoder(schema["items"])

            def array(out: bytearray, v: list) -> None:
                if v:
                    _long(out, len(v))
                    for x in v:
                        item(out, x)
                out.append(0)
            return array
        if t == "map":
            value = encoder(schema["values"])

            def amap(out: bytearray, v: dict) -> None:
                if v:
                    _long(out, len(v))
                    for k, x in v.items():
                        _bytes(out, k.encode())
                        value(out, x)
                out.append(0)
            return amap
        if t == "fixed":
            size = schema["size"]

            def fixed(out: bytearray, v: bytes) -> None:
                if len(v) != size:
                    raise AvroError(f"fixed value of {len(v)} bytes, not {size}")
                out += v
            return fixed
        return encoder(t)
    return _PRIMITIVE_ENCODERS[schema]


_PRIMITIVE_ENCODERS: dict[str, Encoder] = {
    "null": lambda out, v: None,
    "boolean": lambda out, v: out.append(1 if v else 0),
    "int": _long,
    "long": _long,
    "float": lambda out, v: out.extend(_F.pack(v)),
    "double": lambda out, v: out.extend(_D.pack(v)),
    "bytes": _bytes,
    "string": lambda out, v: _bytes(out, v.encode()),
}


def write_container(schema: dict, records: list, metadata: dict[str, str], codec: str = "deflate") -> bytes:
    """An Avro object container file of ``records`` (one block) with ``metadata`` in its header."""
    enc = encoder(schema)
    body = bytearray()
    for r in records:
        enc(body, r)
    if codec == "deflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        data = c.compress(bytes(body)) + c.flush()
    elif codec == "null":
        data = bytes(body)
    else:
        raise AvroError(f"unknown Avro codec {codec!r}")
    sync = os.urandom(16)
    out = bytearray(MAGIC)
    meta = {**metadata, "avro.schema": orjson.dumps(schema).decode(), "avro.codec": codec}
    _long(out, len(meta))
    for k, v in meta.items():
        _bytes(out, k.encode())
        _bytes(out, v.encode())
    out.append(0)
    out += sync
    if records:
        _long(out, len(records))
        _long(out, len(data))
        out += data
        out += sync
    return bytes(out)


# ---------------------------------------------------------------- decoding

def _read_long(buf: io.BytesIO) -> int:
    shift = n = 0
    while True:
        b = buf.read(1)
        if not b:
            raise AvroError("truncated Avro data")
        n |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return (n >> 1) ^ -(n & 1)
        shift += 7


def _read_bytes(buf: io.BytesIO) -> bytes:
    n = _read_long(buf)
    b = buf.read(n)
    if len(b) != n:
        raise AvroError("truncated Avro data")
    return b


Decoder = Callable[[io.BytesIO], Any]


def decoder(schema: Any, named: dict[str, Any] | None = None) -> Decoder:
    named = {} if named is None else named
    if isinstance(schema, list):
        branches = [decoder(s, named) for s in schema]
        return lambda buf: branches[_read_long(buf)](buf)
    if isinstance(schema, dict):
        t = schema["type"]
        if t == "record":
            named[schema["name"]] = schema
            fields = [(f["name"], decoder(f["type"], named)) for f in schema["fields"]]
            return lambda buf: {name: dec(buf) for name, dec in fields}
        if t in ("array", "map"):
            item = decoder(schema["items" if t == "array" else "values"], named)

            def blocks(buf: io.BytesIO) -> Any:
                out: list = [] if t == "array" else {}  # type: ignore[assignment]
                while True:
                    n = _read_long(buf)
                    if n == 0:
                        return out
                    if n < 0:
                        n = -n
                        _read_long(buf)  # the block's size in bytes
                    for _ in range(n):
                        if t == "array":
                            out.append(item(buf))
                        else:
                            out[_read_bytes(buf).decode()] = item(buf)
            return blocks
        if t == "fixed":
            named[schema["name"]] = schema
            size = schema["size"]
            return lambda buf: buf.read(size)
        if t == "enum":
            named[schema["name"]] = schema
            symbols = schema["symbols"]
            return lambda buf: symbols[_read_long(buf)]
        return decoder(t, named)
    if schema in named:
        return decoder(named[schema], named)
    return _PRIMITIVE_DECODERS[schema]


_PRIMITIVE_DECODERS: dict[str, Decoder] = {
    "null": lambda buf: None,
    "boolean": lambda buf: buf.read(1) == b"\x01",
    "int": _read_long,
    "long": _read_long,
    "float": lambda buf: _F.unpack(buf.read(4))[0],
    "double": lambda buf: _D.unpack(buf.read(8))[0],
    "bytes": _read_bytes,
    "string": lambda buf: _read_bytes(buf).decode(),
}


def read_container(data: bytes) -> tuple[dict[str, str], list]:
    """(header metadata, records as plain values) of an Avro object container file."""
    buf = io.BytesIO(data)
    if buf.read(4) != MAGIC:
        raise AvroError("not an Avro object container file")
    meta: dict[str, str] = {}
    while True:
        n = _read_long(buf)
        if n == 0:
            break
        if n < 0:
            n = -n
            _read_long(buf)
        for _ in range(n):
            k = _read_bytes(buf).decode()
            meta[k] = _read_bytes(buf).decode()
    sync = buf.read(16)
    schema = orjson.loads(meta["avro.schema"])
    codec = meta.get("avro.codec", "null")
    dec = decoder(schema)
    records = []
    while buf.tell() < len(data):
        count = _read_long(buf)
        block = _read_bytes(buf)
        if codec == "deflate":
            block = zlib.decompress(block, -15)
        elif codec != "null":
            raise AvroError(f"Avro codec {codec!r} is not supported")
        bb = io.BytesIO(block)
        records.extend(dec(bb) for _ in range(count))
        if buf.read(16) != sync:
            raise AvroError("Avro sync marker mismatch")
    return meta, records
