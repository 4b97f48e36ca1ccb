"""The table-feature registry (lakelog.table_features.registry): every feature the Delta protocol and Spark name is
known, with what lakelog does for reading and writing; tables listing a feature lakelog does not
implement for a role are refused for that role with an UnsupportedFeatureError naming it; features
lakelog does implement (domainMetadata, vacuumProtocolCheck, v2Checkpoint, inCommitTimestamp, appendOnly)
work on real tables; specs/PROTOCOL.md lists every one of them."""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.actions import CommitInfo, DomainMetadata, Protocol
from lakelog.errors import UnsupportedFeatureError
from lakelog.table_features.registry import READABLE, REGISTRY, WRITABLE, check_read, check_write
from lakelog.log.delta_log import DeltaLog
from lakelog.storage import Storage

ROOT = os.path.dirname(os.path.dirname(__file__))
DATA = os.path.join(ROOT, "tests", "data")
TABLES = sorted(n for n in os.listdir(DATA) if os.path.isdir(os.path.join(DATA, n)) and n != "expected")

# Every feature name in the protocol's "Valid Feature Names" and its feature sections, plus Spark's.
PROTOCOL_FEATURES = {
    "appendOnly", "invariants", "checkConstraints", "generatedColumns", "allowColumnDefaults", "changeDataFeed",
    "columnMapping", "identityColumns", "deletionVectors", "rowTracking", "timestampNtz", "domainMetadata",
    "v2Checkpoint", "icebergCompatV1", "icebergCompatV2", "clustering", "vacuumProtocolCheck", "inCommitTimestamp",
    "typeWidening", "variantType", "variantShredding", "catalogManaged", "checkpointProtection",
    "materializePartitionColumns", "collations",
}


def _protocol(path: str) -> dict | None:
    """The newest protocol action in a table's JSON commits, else in its classic checkpoint."""
    log = os.path.join(path, "_delta_log")
    found = None
    for n in sorted(os.listdir(log)):
        if re.fullmatch(r"\d{20}\.json", n):
            for line in open(os.path.join(log, n)):
                if '"protocol"' in line:
                    found = json.loads(line).get("protocol") or found
        elif found is None and re.fullmatch(r"\d{20}\.checkpoint\.parquet", n):
            found = next(p for p in pq.read_table(os.path.join(log, n), columns=["protocol"]).column("protocol").to_pylist() if p)
    return found


def test_registry_knows_every_feature_of_the_protocol_and_the_test_tables():
    assert PROTOCOL_FEATURES <= set(REGISTRY)
    for name in TABLES:
        p = _protocol(os.path.join(DATA, name))
        if p is None:
            continue
        listed = set(p.get("readerFeatures") or []) | set(p.get("writerFeatures") or [])
        assert listed - set(REGISTRY) <= {"blahabl", "liquid"}, name  # deliberately unknown / a Databricks alias
    for f in REGISTRY.values():
        assert f.read and f.write, f.name
        # a writer-only feature never stops readers
        assert f.reader or f.readable, f.name


@pytest.mark.parametrize("name", sorted(n for n, f in REGISTRY.items() if f.reader and not f.readable))
def test_every_unreadable_reader_feature_is_refused_by_name(name):
    with pytest.raises(UnsupportedFeatureError, match=re.escape(repr(name))):
        check_read(Protocol(3, 7, [name], [name]))


@pytest.mark.parametrize("name", sorted(n for n, f in REGISTRY.items() if not f.writable))
def test_every_unwritable_feature_is_refused_for_writing_by_name(name):
    f = REGISTRY[name]
    p = Protocol(3, 7, [name], [name]) if f.reader else Protocol(1, 7, None, [name])
    if f.readable:
        check_read(p)
    with pytest.raises(UnsupportedFeatureError, match=re.escape(repr(name))):
        (check_write if f.readable else check_read)(p)


def test_unknown_features_are_refused_for_both_roles():
    with pytest.raises(UnsupportedFeatureError, match="'futureThing'.*unknown to lakelog"):
        check_read(Protocol(3, 7, ["futureThing"], ["futureThing"]))
    check_read(Protocol(1, 7, None, ["futureWriterThing"]))  # a writer-only feature does not stop readers
    with pytest.raises(UnsupportedFeatureError, match="'futureWriterThing'.*unknown to lakelog"):
        check_write(Protocol(1, 7, None, ["futureWriterThing"]))


@pytest.mark.parametrize("name", TABLES)
def test_every_test_table_is_read_or_refused_by_name(name):
    """A table is read (then its rows are right, see the other tests) or refused naming a feature it
    lists that lakelog cannot read; a table that must be refused is refused."""
    path = os.path.join(DATA, name)
    exp = json.load(open(os.path.join(DATA, "expected", f"{name}.json")))
    p = _protocol(path)
    listed = set((p or {}).get("readerFeatures") or []) | set((p or {}).get("writerFeatures") or [])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = lakelog.Table(path)
            if exp.get("expect") != "metadata_only":
                table.to_pyarrow()
    except UnsupportedFeatureError as e:
        message = str(e)
        m = re.search(r"feature\(s\) (\[[^]]*\])", message)
        if m is None:  # refused while reading the log: a file with a deletion vector, column mapping by mode
            assert "deletion vector" in message or "column mapping" in message or "reader version" in message, message
            return
        named = json.loads(m.group(1).replace("'", '"'))
        assert named and set(named) <= listed, message
        assert not [f for f in named if REGISTRY.get(f) and REGISTRY[f].readable], message
        return
    assert exp.get("expect") != "refuse", name
    assert not [f for f in (p or {}).get("readerFeatures") or [] if f not in READABLE], name


def test_refused_tables_name_their_feature():
    for name in ["catalog-owned-preview", "simple_table_features"]:
        exp = json.load(open(os.path.join(DATA, "expected", f"{name}.json")))
        with pytest.raises(UnsupportedFeatureError, match=exp["refuse_feature"]):
            lakelog.Table(os.path.join(DATA, name))


def test_writers_refuse_tables_with_features_they_cannot_honour(tmp_path):
    path = str(tmp_path / "redirect")
    shutil.copytree(os.path.join(DATA, "collations-table"), path)
    log = os.path.join(path, "_delta_log")
    for n in os.listdir(log):  # a writer feature lakelog cannot honour in place of collations
        text = open(os.path.join(log, n)).read().replace('"collations"', '"redirectWriterOnly-preview"')
        open(os.path.join(log, n), "w").write(text)
    assert lakelog.Table(path).to_pyarrow().num_rows == 0  # reading is fine
    schema = lakelog.Table(path).schema
    before = sorted(os.listdir(os.path.join(path, "_delta_log")))
    with pytest.raises(UnsupportedFeatureError, match="'redirectWriterOnly-preview'"):
        lakelog.write_table(path, pa.table({f.name: pa.nulls(1, f.type) for f in schema}))
    with pytest.raises(UnsupportedFeatureError, match="'redirectWriterOnly-preview'"):
        lakelog.Table(path).checkpoint()
    assert sorted(os.listdir(os.path.join(path, "_delta_log"))) == before


def test_vacuum_protocol_check_tables_are_read_written_and_vacuumed(tmp_path):
    path = str(tmp_path / "vpc")
    shutil.copytree(os.path.join(DATA, "basic-with-vacuum-protocol-check-feature"), path)
    t = lakelog.Table(path)
    assert "vacuumProtocolCheck" in t.protocol.reader_features
    n = t.to_pyarrow().num_rows
    lakelog.write_table(path, pa.table({"id": pa.array([1000], t.schema.field("id").type), "str": ["new"]}))
    assert lakelog.Table(path).to_pyarrow().num_rows == n + 1
    lakelog.Table(path).delete("id = 1000")
    removed = lakelog.Table(path).vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    assert len(removed) == 1 and lakelog.Table(path).to_pyarrow().num_rows == n


def _with_domains(path: str) -> None:
    """A lakelog table whose version 1 (written as another engine would) turns on domainMetadata and sets
    two domains and a tombstone."""
    lakelog.write_table(path, pa.table({"id": pa.array([0, 1], pa.int64())}))
    p = lakelog.Table(path).protocol
    upgraded = Protocol(1, 7, None, sorted({"appendOnly", "invariants", "domainMetadata"}))
    assert p.min_writer_version == 2
    DeltaLog(Storage(path)).write_commit(
        1,
        [
            CommitInfo({"operation": "SET DOMAINS", "timestamp": 1}),
            upgraded,
            DomainMetadata("com.example.app", '{"owner":"team-a"}'),
            DomainMetadata("delta.clustering", '{"clusteringColumns":[]}'),
            DomainMetadata("com.example.old", "{}", removed=True),
        ],
    )


def test_domain_metadata_is_kept_by_writers_and_checkpoints(table_path):
    _with_domains(table_path)
    for i in range(2, 12):
        lakelog.write_table(table_path, pa.table({"id": pa.array([i * 10], pa.int64())}))
    t = lakelog.Table(table_path)
    assert t.snapshot.file_set.base is not None  # read from the checkpoint at version 10
    live = {d.domain: d.configuration for d in t.snapshot.domains.values() if not d.removed}
    assert live == {"com.example.app": '{"owner":"team-a"}', "delta.clustering": '{"clusteringColumns":[]}'}
    cp = pq.read_table(os.path.join(table_path, "_delta_log", "00000000000000000010.checkpoint.parquet"))
    rows = [d for d in cp.column("domainMetadata").to_pylist() if d]
    assert sorted(d["domain"] for d in rows) == ["com.example.app", "delta.clustering"]  # tombstones dropped
    assert all(d["removed"] is False for d in rows)
    # no lakelog commit touched a domain
    for v in range(2, 12):
        assert '"domainMetadata"' not in open(os.path.join(table_path, "_delta_log", f"{v:020d}.json")).read()
    # the peer reads the table written on top of the domains
    assert sorted(deltalake.DeltaTable(table_path).to_pyarrow_table().column("id").to_pylist()) == sorted(t.to_pyarrow().column("id").to_pylist())


def test_domain_metadata_survives_v2_checkpoints(table_path):
    _with_domains(table_path)
    lakelog.write_table(table_path, pa.table({"id": pa.array([5], pa.int64())}), configuration={"delta.checkpointPolicy": "v2"})
    lakelog.Table(table_path).checkpoint()
    t = lakelog.Table(table_path)
    assert t.snapshot.file_set.base is not None and t.snapshot.file_set.base.v2
    assert sorted(d.domain for d in t.snapshot.domains.values()) == ["com.example.app", "delta.clustering"]


def test_append_only_is_honoured(table_path):
    lakelog.write_table(table_path, pa.table({"id": pa.array([1], pa.int64())}), configuration={"delta.appendOnly": "true"})
    with pytest.raises(UnsupportedFeatureError, match="appendOnly"):
        lakelog.Table(table_path).delete("id = 1")
    lakelog.write_table(table_path, pa.table({"id": pa.array([2], pa.int64())}))
    assert lakelog.Table(table_path).to_pyarrow().num_rows == 2


def test_protocol_md_lists_every_feature_with_both_roles():
    text = open(os.path.join(ROOT, "specs", "PROTOCOL.md")).read()
    section = text.split("### Table features", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*`([^`]+)`", line)
        if m:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[m.group(1)] = cells
    assert set(rows) == set(REGISTRY)
    for name, cells in rows.items():
        f = REGISTRY[name]
        assert len(cells) >= 4 and all(cells[1:4]), name
        assert cells[2].lower().startswith("refused") == (not f.readable), name
        assert cells[3].lower().startswith("refused") == (not f.writable), name
