"""``_delta_log/_last_checkpoint``: the hint naming a recent checkpoint, and its JSON checksum.

The hint is never trusted: readers list the log and use the newest usable checkpoint whatever the hint
says. A hint whose ``checksum`` (the protocol's "JSON checksum": MD5 of the canonicalized JSON) does not
match its content is treated as absent. Writers rewrite it after each checkpoint with ``version``,
``size`` (actions), ``sizeInBytes``, ``numOfAddFiles``, ``parts`` (never written: lakelog writes no
multi-part checkpoints), ``v2Checkpoint`` for V2 checkpoints (the checkpoint file, its sidecars and its
non-file actions, as Spark writes it) and ``checksum``.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import quote

import orjson

from .delta_log import LAST_CHECKPOINT

# RFC 3986 unreserved characters are kept; every other UTF-8 byte is %XX (uppercase), as the protocol says.
_SAFE = "-._~"


def _encode(text: str) -> str:
    return '"' + quote(text, safe=_SAFE) + '"'


def _leaves(value: Any, path: str, out: list[tuple[bytes, str]]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _leaves(v, f"{path}+{_encode(k)}" if path else _encode(k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _leaves(v, f"{path}+{i}" if path else str(i), out)
    else:
        if value is None:
            text = "null"
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str):
            text = _encode(value)
        else:
            text = orjson.dumps(value).decode()
        out.append((path.encode(), f"{path}={text}"))


def canonical_json(obj: dict) -> str:
    """The protocol's canonical form of a ``_last_checkpoint`` object (its top-level ``checksum`` left out)."""
    pairs: list[tuple[bytes, str]] = []
    _leaves({k: v for k, v in obj.items() if k != "checksum"}, "", pairs)
    pairs.sort(key=lambda p: p[0])
    return ",".join(text for _, text in pairs)


def json_checksum(obj: dict) -> str:
    """MD5 hex digest of ``canonical_json(obj)``."""
    return hashlib.md5(canonical_json(obj).encode()).hexdigest()


def parse_hint(data: bytes) -> dict | None:
    """The hint as a dict, or None when it is unparseable, not an object, has no integer ``version``, or
    carries a ``checksum`` that does not match its content."""
    try:
        hint = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(hint, dict):
        return None
    v = hint.get("version")
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return None
    checksum = hint.get("checksum")
    if checksum is not None and checksum != json_checksum(hint):
        return None
    return hint


def read_hint(storage) -> dict | None:
    """``_last_checkpoint`` as ``parse_hint`` reads it; None when absent or unusable."""
    try:
        return parse_hint(storage.read(storage.log_file(LAST_CHECKPOINT)))
    except FileNotFoundError:
        return None


def write_hint(storage, hint: dict) -> None:
    """Replace ``_last_checkpoint`` with ``hint`` plus its checksum (readers see the old or the new one)."""
    body = {k: v for k, v in hint.items() if k != "checksum"}
    body["checksum"] = json_checksum(body)
    storage.put(storage.log_file(LAST_CHECKPOINT), orjson.dumps(body))


def hint_needs_update(current: dict | None, version: int, exists) -> bool:
    """Whether ``_last_checkpoint`` should now name ``version``: it is missing or unusable, older, or names
    a newer checkpoint whose files do not exist (``exists(hint) -> bool``); a valid newer one is kept."""
    if current is None:
        return True
    named = current["version"]
    if named < version:
        return True
    return named > version and not exists(current)
