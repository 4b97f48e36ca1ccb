"""Version and timestamp arguments: checked, and a timestamp resolved to a version from the log listing
and commit times alone (no replay, no pyarrow: the command line parses ``--timestamp`` with these)."""

from __future__ import annotations

import datetime as dt
import operator
from typing import Any

from .commit_times import CommitTimes, latest_protocol_and_metadata
from ..errors import InvalidTimestampError, InvalidVersionError
from .delta_log import DeltaLog, LogListing

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MS = dt.timedelta(milliseconds=1)
TIMESTAMP_FORMS = (
    "a datetime (naive means UTC), a date, or an ISO-8601 string such as '2026-11-22', "
    "'2026-11-22T10:00:00Z', '2026-11-22 10:00:00.5' or '2026-11-22T10:00:00+01:00' (no offset means UTC)"
)


def to_epoch_ms(ts: Any) -> int:
    """datetime / date / ISO-8601 string / pandas Timestamp / numpy datetime64 -> ms since epoch (naive
    means UTC); anything else is ``InvalidTimestampError`` listing the accepted forms."""
    value = ts
    if type(value).__name__ == "datetime64":  # numpy, without importing it
        value = value.astype("datetime64[us]").item()
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            value = None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return (value - _EPOCH) // _MS  # exact (floats round microseconds up near year 9999)
    raise InvalidTimestampError(f"cannot read {ts!r} ({type(ts).__name__}) as a timestamp; pass {TIMESTAMP_FORMS}")


def as_version(version: Any) -> int:
    """``version`` as a table version: an integer (numpy integers included); ``InvalidVersionError`` for
    anything else (``1.9`` would otherwise silently become 1, ``True`` 1)."""
    if isinstance(version, bool):
        raise InvalidVersionError(f"a table version must be an integer, not the boolean {version!r}")
    try:
        return operator.index(version)
    except TypeError:
        raise InvalidVersionError(f"a table version must be an integer, not {version!r} ({type(version).__name__})") from None


def version_at_timestamp(listing: LogListing, timestamp: Any, log: DeltaLog | None = None) -> int:
    """The latest version committed at or before ``timestamp``: by in-commit timestamps where the latest
    metadata enables them (``log`` given), by commit file times elsewhere (see ``lakelog.log.commit_times``)."""
    ts = to_epoch_ms(timestamp)
    protocol, metadata = latest_protocol_and_metadata(log, listing) if log is not None else (None, None)
    return CommitTimes(log, listing, protocol, metadata).latest_at_or_before(ts)
