"""Table properties (lakelog.table_features.properties): typed, validated when set, parsed as Spark parses them when read."""

from __future__ import annotations

import os
import time
import warnings

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakelog
from lakelog.actions import RemoveFile
from lakelog.log.checkpoint import read_checkpoint_state
from lakelog.errors import InvalidTablePropertyError, UnsupportedFeatureError
from lakelog.table_features.properties import interval_ms, parse_calendar_interval

deltalake = pytest.importorskip("deltalake")

DAY_MS = 86_400_000


def _rows(i: int, n: int = 2) -> pa.Table:
    return pa.table({"id": pa.array(range(i * 10, i * 10 + n), pa.int64())})


def _log(path: str) -> str:
    return os.path.join(path, "_delta_log")


def _logged_configuration(path: str, version: int) -> dict:
    with open(os.path.join(_log(path), f"{version:020d}.json"), "rb") as f:
        for line in f:
            obj = orjson.loads(line)
            if "metaData" in obj:
                return obj["metaData"]["configuration"]
    raise AssertionError(f"no metaData in version {version}")


def _commit_raw(path: str, version: int, actions: list[dict]) -> None:
    os.makedirs(_log(path), exist_ok=True)
    with open(os.path.join(_log(path), f"{version:020d}.json"), "wb") as f:
        f.write(b"".join(orjson.dumps(a) + b"\n" for a in actions))


def _foreign_table(path: str, configuration: dict) -> None:
    """Version 0 of a table whose metaData.configuration holds exactly ``configuration`` (any JSON)."""
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    _commit_raw(
        path,
        0,
        [
            {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "CREATE TABLE"}},
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": orjson.dumps(schema).decode(),
                          "partitionColumns": [], "configuration": configuration, "createdTime": 0}},
        ],
    )


# ---------------------------------------------------------------- setting properties


def test_python_bools_and_ints_are_stored_in_the_protocol_string_form(table_path):
    lakelog.write_table(table_path, _rows(0), configuration={"delta.appendOnly": False, "delta.checkpointInterval": 2, "owner": 7})
    assert _logged_configuration(table_path, 0) == {"delta.appendOnly": "false", "delta.checkpointInterval": "2", "owner": "7"}
    for i in range(1, 5):  # appends used to crash (AttributeError) on a JSON bool here
        lakelog.write_table(table_path, _rows(i))
    names = set(os.listdir(_log(table_path)))
    assert {f"{v:020d}.checkpoint.parquet" for v in (2, 4)} <= names  # the int interval is honoured
    assert deltalake.DeltaTable(table_path).metadata().configuration == {
        "delta.appendOnly": "false", "delta.checkpointInterval": "2", "owner": "7"
    }
    assert lakelog.read_table(table_path).num_rows == 10


def test_append_only_set_as_a_bool_is_enforced(table_path):
    lakelog.write_table(table_path, _rows(0), configuration={"delta.appendOnly": True})
    lakelog.write_table(table_path, _rows(1))
    with pytest.raises(UnsupportedFeatureError, match="appendOnly"):
        lakelog.write_table(table_path, _rows(2), mode="overwrite")
    assert lakelog.read_table(table_path).num_rows == 4


@pytest.mark.parametrize(
    "key, value",
    [
        ("delta.checkpointInterval", "0"),
        ("delta.checkpointInterval", "abc"),
        ("delta.checkpointInterval", 0),
        ("delta.checkpointInterval", -3),
        ("delta.checkpointInterval", 1.5),
        ("delta.checkpointInterval", True),
        ("delta.checkpointInterval", " 5"),
        ("delta.checkpointInterval", "1_000"),
        ("delta.checkpointInterval", str(2**31)),
        ("delta.appendOnly", "yes"),
        ("delta.appendOnly", 1),
        ("delta.appendOnly", None),
        ("delta.deletedFileRetentionDuration", "forever"),
        ("delta.deletedFileRetentionDuration", "interval 1 month"),
        ("delta.deletedFileRetentionDuration", "interval -1 hour"),
        ("delta.deletedFileRetentionDuration", 7),
        ("delta.logRetentionDuration", "30"),
        ("delta.dataSkippingNumIndexedCols", "-2"),
        ("delta.targetFileSize", "100mb"),
        ("delta.targetFileSize", 0),
        ("delta.columnMapping.mode", "sometimes"),
        ("delta.isolationLevel", "WriteSerializable"),
        ("delta.enableExpiredLogCleanup", "0"),
    ],
)
def test_invalid_values_are_refused_naming_key_value_and_form(table_path, key, value):
    with pytest.raises(InvalidTablePropertyError) as e:
        lakelog.write_table(table_path, _rows(0), configuration={key: value})
    assert e.value.key == key and e.value.value == value
    assert key in str(e.value) and repr(value) in str(e.value) and "takes" in str(e.value)
    assert isinstance(e.value, ValueError)
    assert not os.path.exists(table_path) or not os.listdir(_log(table_path))  # nothing committed


def test_invalid_value_on_an_existing_table_commits_nothing(table_path):
    lakelog.write_table(table_path, _rows(0))
    with pytest.raises(InvalidTablePropertyError, match="checkpointInterval"):
        lakelog.write_table(table_path, _rows(1), configuration={"delta.checkpointInterval": "0"})
    t = lakelog.Table(table_path)
    assert t.version == 0 and t.metadata.configuration == {}


def test_unknown_delta_keys_are_refused_and_user_keys_pass_through(table_path):
    with pytest.raises(InvalidTablePropertyError, match="unknown table property 'delta.appendonlyy'"):
        lakelog.write_table(table_path, _rows(0), configuration={"delta.appendonlyy": "true"})
    lakelog.write_table(
        table_path, _rows(0), configuration={"DELTA.APPENDONLY": "TRUE", "Delta.logRetentionDuration": "interval 60 days", "team": "x", "ratio": 0.5, "on": True}
    )
    # delta.* keys get their canonical spelling (as Spark normalizes them), values their canonical form
    assert _logged_configuration(table_path, 0) == {
        "delta.appendOnly": "true", "delta.logRetentionDuration": "interval 60 days", "team": "x", "ratio": "0.5", "on": "true"
    }
    with pytest.raises(InvalidTablePropertyError, match="strings"):
        lakelog.write_table(table_path, _rows(1), configuration={"team": ["a"]})
    with pytest.raises(InvalidTablePropertyError):
        lakelog.write_table(table_path, _rows(1), configuration={5: "x"})


@pytest.mark.parametrize(
    "configuration",
    [
        {"delta.constraints.positive": "id > 0"},
        {"delta.feature.deletionVectors": "supported"},
        {"delta.dataSkippingStatsColumns": "id"},
        {"delta.randomizeFilePrefixes": "true"},
    ],
)
def test_properties_lakelog_cannot_honour_are_refused(table_path, configuration):
    with pytest.raises(UnsupportedFeatureError):
        lakelog.write_table(table_path, _rows(0), configuration=configuration)
    assert not os.path.exists(_log(table_path)) or not os.listdir(_log(table_path))


def test_engine_maintained_properties_cannot_be_set(table_path):
    with pytest.raises(InvalidTablePropertyError, match="maintained by the engine"):
        lakelog.write_table(table_path, _rows(0), configuration={"delta.columnMapping.maxColumnId": 3})
    with pytest.raises(InvalidTablePropertyError, match="maintained by the engine"):
        lakelog.write_table(table_path, _rows(0), configuration={"delta.minWriterVersion": 7})


def test_disabling_values_of_unimplemented_features_are_accepted(table_path):
    lakelog.write_table(
        table_path, _rows(0), configuration={"delta.enableChangeDataFeed": False, "delta.enableDeletionVectors": "false", "delta.checkpointPolicy": "Classic"}
    )
    assert _logged_configuration(table_path, 0) == {
        "delta.enableChangeDataFeed": "false", "delta.enableDeletionVectors": "false", "delta.checkpointPolicy": "classic"
    }
    lakelog.write_table(table_path, _rows(1))


def test_num_indexed_cols_set_as_an_int_limits_stats(table_path):
    data = pa.table({"a": [1, 2], "b": [3, 4]})
    lakelog.write_table(table_path, data, configuration={"delta.dataSkippingNumIndexedCols": 1})
    (add,) = lakelog.Table(table_path).snapshot.files.values()
    stats = orjson.loads(add.stats)
    assert stats["minValues"] == {"a": 1} and stats["nullCount"] == {"a": 0}


def test_append_only_on_a_writer_v7_table_lists_the_feature(table_path):
    import datetime as dt

    data = pa.table({"id": [1], "ts": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us"))})
    lakelog.write_table(table_path, data)  # timestamp_ntz: protocol (3, 7)
    assert "appendOnly" not in (lakelog.Table(table_path).protocol.writer_features or [])
    lakelog.write_table(table_path, data, configuration={"delta.appendOnly": True})
    protocol = lakelog.Table(table_path).protocol
    assert protocol.min_writer_version == 7 and "appendOnly" in protocol.writer_features
    # On writer version 7 only a listed feature is enforced: deltalake now refuses to delete.
    with pytest.raises(Exception, match="(?i)append"):
        deltalake.DeltaTable(table_path).delete("id = 1")
    assert lakelog.read_table(table_path).num_rows == 2


def test_new_ntz_table_with_append_only_lists_the_feature(table_path):
    import datetime as dt

    data = pa.table({"ts": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us"))})
    lakelog.write_table(table_path, data, configuration={"delta.appendOnly": "true"})
    p = lakelog.Table(table_path).protocol
    assert (p.min_reader_version, p.min_writer_version) == (3, 7)
    assert p.reader_features == ["timestampNtz"] and p.writer_features == ["appendOnly", "timestampNtz"]


# ---------------------------------------------------------------- reading properties another writer set


def test_json_bools_and_numbers_in_a_foreign_log_read_as_their_text(table_path):
    # What lakelog itself wrote before properties were validated: JSON values instead of strings.
    _foreign_table(table_path, {"delta.appendOnly": False, "delta.checkpointInterval": 2, "null": None})
    t = lakelog.Table(table_path)
    assert t.metadata.configuration == {"delta.appendOnly": "false", "delta.checkpointInterval": "2"}
    for i in range(1, 5):
        lakelog.write_table(table_path, _rows(i))
    assert {f"{v:020d}.checkpoint.parquet" for v in (2, 4)} <= set(os.listdir(_log(table_path)))
    assert lakelog.read_table(table_path).num_rows == 8
    assert deltalake.DeltaTable(table_path).to_pyarrow_table().num_rows == 8


def test_a_json_object_as_a_property_value_is_a_corrupt_log(table_path):
    _foreign_table(table_path, {"delta.appendOnly": {"x": 1}})
    with pytest.raises(lakelog.CorruptLogError, match="configuration"):
        lakelog.Table(table_path)


@pytest.mark.parametrize(
    "key, value, fix",
    [
        ("delta.checkpointInterval", "abc", 10),
        ("delta.checkpointInterval", "0", "5"),
        ("delta.appendOnly", "yes", False),
        ("delta.enableChangeDataFeed", "maybe", "false"),
        ("delta.dataSkippingNumIndexedCols", "many", -1),
        ("delta.deletedFileRetentionDuration", "forever", "interval 30 days"),
        ("delta.logRetentionDuration", "1 month", "30 days"),
        ("delta.enableExpiredLogCleanup", "on", True),
        ("delta.targetFileSize", "big", 1 << 20),
    ],
)
def test_unparseable_foreign_property_reads_fine_but_stops_writes_with_a_typed_error(table_path, key, value, fix):
    _foreign_table(table_path, {key: value})
    assert lakelog.read_table(table_path).num_rows == 0  # readers do not need it
    with pytest.raises(InvalidTablePropertyError) as e:
        lakelog.write_table(table_path, _rows(1))
    assert e.value.key == key and e.value.value == value and key in str(e.value)
    with pytest.raises(InvalidTablePropertyError):
        lakelog.Table(table_path).checkpoint()
    with pytest.raises(InvalidTablePropertyError):
        lakelog.Table(table_path).vacuum()
    with pytest.raises(InvalidTablePropertyError):
        lakelog.Table(table_path).cleanup_log(dry_run=True)
    assert lakelog.Table(table_path).version == 0  # nothing was committed
    # Setting a valid value in the same write repairs the table.
    lakelog.write_table(table_path, _rows(1), configuration={key: fix})
    assert lakelog.read_table(table_path).num_rows == 2


def test_unparseable_column_mapping_mode_refuses_reads(table_path):
    _foreign_table(table_path, {"delta.columnMapping.mode": "sometimes"})
    with pytest.raises(InvalidTablePropertyError, match="columnMapping"):
        lakelog.read_table(table_path)


def test_legacy_change_data_capture_key_turns_the_feed_on(table_path):
    _foreign_table(table_path, {"delta.enableChangeDataCapture": "true"})
    lakelog.write_table(table_path, _rows(1))
    t = lakelog.Table(table_path)
    t.delete(f"id = {_rows(1).column('id')[0].as_py()}")
    assert [r["_change_type"] for r in t.changes(t.version).to_pylist()] == ["delete"]


def test_unknown_foreign_delta_keys_are_kept_and_ignored(table_path):
    _foreign_table(table_path, {"delta.someFutureThing": "x"})
    lakelog.write_table(table_path, _rows(1), configuration={"team": "a"})
    assert lakelog.Table(table_path).metadata.configuration == {"delta.someFutureThing": "x", "team": "a"}


# ---------------------------------------------------------------- intervals


def test_zero_retention_interval_means_zero_not_the_default(table_path):
    lakelog.write_table(table_path, _rows(0), configuration={"delta.deletedFileRetentionDuration": "interval 0 hours"})
    lakelog.write_table(table_path, _rows(1), mode="overwrite")
    t = lakelog.Table(table_path)
    assert t.snapshot.properties.deleted_file_retention_ms == 0
    # A zero table retention: a zero vacuum retention is not "shorter" than it, and the tombstone of the
    # overwritten file has expired by the time a checkpoint is written.
    time.sleep(0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        deleted = t.vacuum(retention_hours=0, dry_run=False)
    assert len(deleted) == 1
    t.checkpoint()
    assert not [a for a in read_checkpoint_state(t.storage, t.version).actions if isinstance(a, RemoveFile)]


@pytest.mark.parametrize(
    "text, ms",
    [
        ("interval 7 days", 7 * DAY_MS),
        ("interval 1 week", 7 * DAY_MS),
        ("168 hours", 7 * DAY_MS),
        ("1 week", 7 * DAY_MS),
        ("interval 0 hours", 0),
        ("INTERVAL 2 Weeks", 14 * DAY_MS),
        ("interval 1 day 12 hours", int(1.5 * DAY_MS)),
        ("interval 1 day -1 hour", 23 * 3_600_000),
        ("interval 1.5 seconds", 1500),
        ("interval 90 minutes 30 seconds 5 milliseconds 7 microseconds", 5_430_005),
        ("  interval   3   days  ", 3 * DAY_MS),
        ("+2 days", 2 * DAY_MS),
        ("interval 0 months 1 day", DAY_MS),
    ],
)
def test_interval_forms(text, ms):
    assert interval_ms(text) == ms


@pytest.mark.parametrize(
    "text",
    ["", "   ", "forever", "interval", "7", "7 dayz", "interval 1 month", "interval 1 year", "interval -1 day",
     "interval 1.5 hours", "interval 1 nanosecond", "7days", "interval 7 days and 2 hours", "1e3 seconds",
     "interval 1.0000000001 seconds", "interval 99999999999 days", "interval\t7 days"],
)
def test_interval_forms_refused(text):
    with pytest.raises(ValueError):
        interval_ms(text)


_WORDS = ["interval", "day", "days", "week", "weeks", "hour", "hours", "minute", "minutes", "second", "seconds",
          "millisecond", "milliseconds", "microsecond", "microseconds", "month", "months", "year", "years",
          "nanosecond", "dayss", "hourx", "INTERVAL", "Days"]
_TOKENS = st.one_of(
    st.sampled_from(_WORDS),
    st.from_regex(r"[+-]?[0-9]{1,12}(\.[0-9]{0,10})?", fullmatch=True),
    st.from_regex(r"[+-]?\.[0-9]{0,3}", fullmatch=True),
    st.sampled_from(["-", "+", ".", "x", "1e3", "0"]),
)
_TERMS = st.tuples(
    st.sampled_from(["", "", "", "-", "+", "- "]),
    st.one_of(st.integers(0, 10**6).map(str), st.integers(0, 99).map(str), st.from_regex(r"[0-9]{1,3}\.[0-9]{0,10}", fullmatch=True)),
    st.sampled_from(["day", "days", "week", "weeks", "hour", "hours", "minute", "minutes", "second", "seconds", "millisecond",
                     "milliseconds", "microsecond", "microseconds", "seconds", "seconds", "month", "year"]),
).map(lambda t: f"{t[0]}{t[1]} {t[2]}")
_WELL_FORMED = st.tuples(st.sampled_from(["", "interval ", "INTERVAL ", " interval  "]), st.lists(_TERMS, min_size=1, max_size=4)).map(
    lambda t: t[0] + " ".join(t[1])
)
_INTERVAL_TEXTS = st.one_of(
    _WELL_FORMED,
    _WELL_FORMED,
    st.lists(_TOKENS, min_size=0, max_size=7).map(" ".join),
    st.tuples(st.sampled_from(["", " ", "\t", "  "]), st.lists(_TOKENS, max_size=6), st.sampled_from(["", " ", "\n"])).map(
        lambda t: t[0] + " ".join(t[1]) + t[2]
    ),
)


def _spark_interval_ms(spark, text: str) -> int | None:
    """Delta's own parsing, run in Spark's JVM: parseCalendarInterval (trim, lower-case, prefix
    'interval '), Spark's stringToInterval, and the retention validity check (no months, not negative)."""
    from py4j.java_gateway import get_field

    if not text.strip("".join(chr(c) for c in range(33))):
        return None
    s = text.strip("".join(chr(c) for c in range(33))).lower()
    if not s.startswith("interval "):
        s = "interval " + s
    jvm = spark._jvm
    iv = jvm.org.apache.spark.sql.catalyst.util.IntervalUtils.safeStringToInterval(jvm.org.apache.spark.unsafe.types.UTF8String.fromString(s))
    if iv is None:
        return None
    months, days, micros = get_field(iv, "months"), get_field(iv, "days"), get_field(iv, "microseconds")
    total = days * 86_400_000_000 + micros
    if months != 0 or total < 0 or total > 2**63 - 1:
        return None
    return total // 1000


@settings(max_examples=int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "300")), deadline=None, derandomize=True)
@given(text=_INTERVAL_TEXTS)
def test_interval_parsing_matches_spark(spark, text):
    try:
        ours = interval_ms(text)
    except ValueError:
        ours = None
    assert ours == _spark_interval_ms(spark, text), text


@pytest.mark.parametrize("text", ["interval 7 days", "168 hours", "interval 1 day -1 hour", "interval 1.5 seconds", "interval 2 months", "interval 1 hours 30 minutes"])
def test_interval_examples_match_spark(spark, text):
    try:
        ours = interval_ms(text)
    except ValueError:
        ours = None
    assert ours == _spark_interval_ms(spark, text)
    iv = parse_calendar_interval(text)
    assert iv.months >= 0
