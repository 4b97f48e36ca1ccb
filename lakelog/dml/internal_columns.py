"""Column names lakelog adds to rows it works on during a row-level change (a row's file, its position),
unique to the process so that no user column can be named like them."""

from __future__ import annotations

import secrets

_TAG = secrets.token_hex(6)


def internal_name(what: str) -> str:
    """A column name for lakelog's own use in a row-level change, unique to this process so that no
    user column (and no source column) can be named like it."""
    return f"__lakelog_{what}_{_TAG}"


FILE = internal_name("file")  # index of a row's file in the operation's candidate list
ROW = internal_name("row")  # a row's position in its data file (the protocol's file row index)
POS = internal_name("pos")  # a row's position in a table being filtered
ROW_ID = internal_name("row_id")  # a row's stable row id (row tracking), kept through a rewrite
ROW_VERSION = internal_name("row_version")  # a row's stable row commit version, kept when it is copied unchanged
