import datetime as dt
import os

import pyarrow as pa
import pytest

import lakelog
from lakelog.check import check_table
from lakelog.errors import InvalidArgumentError, InvalidTimestampError, InvalidVersionError, LakelogError, VersionNotFoundError

BASE = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def _set_commit_time(path, version, when):
    f = os.path.join(path, "_delta_log", f"{version:020d}.json")
    os.utime(f, (when.timestamp(), when.timestamp()))


@pytest.fixture
def five_versions(table_path):
    for v in range(5):
        lakelog.write_table(table_path, pa.table({"id": [v]}))
        _set_commit_time(table_path, v, BASE + dt.timedelta(minutes=10 * v))
    return table_path


@pytest.mark.parametrize("minutes,expected", [(0, 0), (5, 0), (10, 1), (19.99, 1), (25, 2), (40, 4), (600, 4)])
def test_timestamp_between_commits_picks_latest_at_or_before(five_versions, minutes, expected):
    when = BASE + dt.timedelta(minutes=minutes)
    t = lakelog.Table(five_versions, timestamp=when)
    assert t.version == expected
    assert sorted(t.to_pyarrow().column("id").to_pylist()) == list(range(expected + 1))


def test_timestamp_forms(five_versions):
    assert lakelog.Table(five_versions, timestamp="2026-01-01T12:25:00Z").version == 2
    assert lakelog.Table(five_versions, timestamp="2026-01-01T13:25:00+01:00").version == 2
    assert lakelog.Table(five_versions, timestamp=dt.datetime(2026, 1, 1, 12, 25)).version == 2  # naive = UTC
    assert lakelog.read_table(five_versions, timestamp=BASE + dt.timedelta(minutes=31)).num_rows == 4


def test_timestamp_before_first_commit_is_an_error(five_versions):
    with pytest.raises(VersionNotFoundError, match="before the earliest"):
        lakelog.Table(five_versions, timestamp=BASE - dt.timedelta(seconds=1))


def test_non_monotonic_file_times_are_made_monotonic(five_versions):
    # version 3's file claims to be older than version 2's: it counts as 1 ms after version 2.
    _set_commit_time(five_versions, 3, BASE + dt.timedelta(minutes=1))
    assert lakelog.Table(five_versions, timestamp=BASE + dt.timedelta(minutes=20, milliseconds=1)).version == 3
    assert lakelog.Table(five_versions, timestamp=BASE + dt.timedelta(minutes=20)).version == 2
    assert lakelog.Table(five_versions, timestamp=BASE + dt.timedelta(minutes=15)).version == 1
    hist = lakelog.Table(five_versions).history()
    times = [h["timestamp"] for h in reversed(hist)]
    assert times == sorted(times) and len(set(times)) == 5


def test_history_newest_first(five_versions):
    lakelog.write_table(five_versions, pa.table({"id": [9]}), mode="overwrite")
    hist = lakelog.Table(five_versions).history()
    assert [h["version"] for h in hist] == [5, 4, 3, 2, 1, 0]
    assert hist[0]["operation"] == "WRITE" and hist[0]["operationParameters"]["mode"] == "Overwrite"
    assert hist[-1]["operation"] == "CREATE TABLE"
    assert all(h["engineInfo"].startswith("lakelog/") for h in hist)
    assert [h["version"] for h in lakelog.Table(five_versions).history(limit=2)] == [5, 4]
    assert [h["version"] for h in lakelog.Table(five_versions, version=2).history()] == [2, 1, 0]


def test_version_and_timestamp_together_rejected(five_versions):
    with pytest.raises(ValueError):
        lakelog.Table(five_versions, version=1, timestamp=BASE)


@pytest.mark.parametrize("version", [1.9, 1.0, "1", True, False, None.__class__, [1], 2**0.5], ids=repr)
def test_version_must_be_an_integer(five_versions, version):
    """version=1.9 used to read version 1; a bool, a string or a float is refused, by name."""
    with pytest.raises(InvalidVersionError, match="integer") as e:
        lakelog.Table(five_versions, version=version)
    assert isinstance(e.value, TypeError) and isinstance(e.value, LakelogError)
    # The exported InvalidArgumentError catches it (a second class of that name once shadowed the base).
    assert isinstance(e.value, lakelog.errors.InvalidArgumentError) and InvalidArgumentError is lakelog.errors.InvalidArgumentError
    with pytest.raises(InvalidVersionError):
        lakelog.read_table(five_versions, version=version)
    with pytest.raises(InvalidVersionError):
        check_table(five_versions, version=version)


def test_numpy_integers_are_versions(five_versions):
    import numpy as np

    for v in (np.int64(2), np.int32(2), np.uint8(2)):
        assert lakelog.Table(five_versions, version=v).version == 2
    assert lakelog.read_table(five_versions, version=np.int16(3)).num_rows == 4


@pytest.mark.parametrize("timestamp", ["yesterday", "", "2026-13-01", "12:25", 1_700_000_000_000, 1.5e9, ["2026-01-01"], b"2026-01-01"], ids=repr)
def test_unreadable_timestamp_is_a_typed_error_listing_the_accepted_forms(five_versions, timestamp):
    with pytest.raises(InvalidTimestampError) as e:
        lakelog.Table(five_versions, timestamp=timestamp)
    assert isinstance(e.value, ValueError) and isinstance(e.value, LakelogError)
    message = str(e.value)
    assert repr(timestamp) in message and "ISO-8601" in message and "datetime" in message and "UTC" in message


def test_more_timestamp_forms(five_versions):
    import numpy as np
    import pandas as pd

    assert lakelog.Table(five_versions, timestamp=pd.Timestamp("2026-01-01 12:25:00", tz="UTC")).version == 2
    assert lakelog.Table(five_versions, timestamp=np.datetime64("2026-01-01T12:25:00")).version == 2
    assert lakelog.Table(five_versions, timestamp="2026-01-01 12:25:00.5").version == 2
    assert lakelog.Table(five_versions, timestamp=dt.date(2026, 1, 2)).version == 4


def test_history_has_one_timestamp_and_one_parameters_field_with_deltas_names(five_versions):
    """history() returned timestamp and commit_timestamp, parameters and operationParameters: one of
    each now, named as Spark's DESCRIBE HISTORY names them."""
    hist = lakelog.Table(five_versions).history()
    for h in hist:
        assert "parameters" not in h and "commit_timestamp" not in h
        assert list(h)[:4] == ["version", "timestamp", "operation", "operationParameters"]
        # timestamp is the time time travel uses: reading at it gives this version.
        assert h["timestamp"] == BASE + dt.timedelta(minutes=10 * h["version"])
        assert lakelog.Table(five_versions, timestamp=h["timestamp"]).version == h["version"]
        assert h["operationParameters"] == {"mode": "Append"}
        assert h["isBlindAppend"] is True and "txnId" in h and h["engineInfo"].startswith("lakelog/")
    # A commit without commitInfo (another writer) still has every key.
    with open(os.path.join(five_versions, "_delta_log", f"{5:020d}.json"), "w") as f:
        f.write('{"txn": {"appId": "x", "version": 1}}\n')
    h = lakelog.Table(five_versions).history(limit=1)[0]
    assert h["version"] == 5 and h["operation"] is None and h["operationParameters"] == {} and isinstance(h["timestamp"], dt.datetime)


@pytest.mark.parametrize("limit", [-1, 1.5, "2", True])
def test_history_limit_must_be_a_count(five_versions, limit):
    """history(limit=-1) silently dropped the oldest commit; 1.5 raised a bare TypeError."""
    from lakelog.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="limit"):
        lakelog.Table(five_versions).history(limit=limit)
    assert len(lakelog.Table(five_versions).history(limit=0)) == 0
