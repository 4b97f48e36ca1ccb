"""lakelog against deltalake on Azure (Azurite) and GCS (fake-gcs-server), on the same emulator.

    python -m benchmarks.cloud_stores                 # both stores, 5 runs per contender
    python -m benchmarks.cloud_stores --store azure   # one store
    python -m benchmarks.cloud_stores --quick         # 100k rows, 3 runs

Workloads per store (medians, contenders interleaved after a warm-up, as in the rest of the suite):

* a small append's commit: a one-row ``write_table`` / ``write_deltalake`` append to a table of 20 commits;
* loading a table with 1,000 commits (one file each) and a checkpoint at 990: ``Table(...).files()`` /
  ``DeltaTable(...).file_uris()`` (the files are never opened);
* reading 1M rows of mixed types (4 files): ``read_table`` / ``DeltaTable(...).to_pyarrow_table()``;
* writing 1M rows to a new table: ``write_table`` / ``write_deltalake``.

deltalake cannot write to fake-gcs-server (its uploads fail there), so on GCS the writes have no peer:
lakelog's time is reported alone. Both emulators run as child processes on 127.0.0.1; their work is
part of every contender's time alike.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid

import orjson
import pyarrow as pa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

BUCKET = "lakelog-bench"


class Endpoint:
    """One emulator with the options lakelog and deltalake use to reach it."""

    def __init__(self, kind: str, workdir: str):
        from tests.emulators import start_azurite, start_fake_gcs

        self.kind = kind
        if kind == "azure":
            self.emulator = start_azurite(workdir)
            os.environ["AZURITE_BLOB_STORAGE_URL"] = self.emulator.url
            self.lakelog_options = {"azure_storage_use_emulator": "true"}
            self.deltalake_options = dict(self.lakelog_options)
            self.scheme = "az"
        else:
            self.emulator = start_fake_gcs(workdir)
            for name, value in {"NO_GCE_CHECK": "true", "GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9"}.items():
                os.environ[name] = value
            account = os.path.join(workdir, "service-account.json")
            with open(account, "w") as f:
                json.dump({"gcs_base_url": self.emulator.url, "disable_oauth": True, "client_email": "", "private_key": "", "private_key_id": ""}, f)
            self.lakelog_options = {"google_service_account": account}
            self.deltalake_options = dict(self.lakelog_options)
            self.scheme = "gs"
        from lakelog.storage import Storage

        fs = Storage(f"{self.scheme}://{BUCKET}", self.lakelog_options).fs
        try:
            fs.mkdir(BUCKET)
        except FileExistsError:
            pass

    def uri(self, name: str) -> str:
        return f"{self.scheme}://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"

    def stop(self) -> None:
        self.emulator.stop()


def synthetic_log(ep: Endpoint, commits: int, checkpoint_at: int) -> str:
    """A table of ``commits`` commits, one add each (files never opened), checkpointed at ``checkpoint_at``."""
    import lakelog
    from lakelog.actions import AddFile, CommitInfo, Metadata, Protocol, serialize_actions
    from lakelog.schema.types import schema_to_string
    from lakelog.storage import Storage

    uri = ep.uri("log")
    storage = Storage(uri, ep.lakelog_options)
    schema = pa.schema([("id", pa.int64())])
    meta = Metadata(id=str(uuid.uuid4()), schema_string=schema_to_string(schema), partition_columns=[],
                    configuration={"delta.checkpointInterval": "1000000"}, created_time=0)
    stats = orjson.dumps({"numRecords": 10, "minValues": {"id": 0}, "maxValues": {"id": 9}, "nullCount": {"id": 0}}).decode()
    for v in range(commits):
        actions = [CommitInfo({"timestamp": v, "operation": "WRITE"})] + ([Protocol(1, 2), meta] if v == 0 else [])
        actions.append(AddFile(f"part-{v:05d}-{uuid.uuid4()}.snappy.parquet", {}, 1000, v, True, stats))
        storage.put(storage.log_file(f"{v:020d}.json"), serialize_actions(actions))
    lakelog.Table(uri, version=checkpoint_at, storage_options=ep.lakelog_options).checkpoint()
    return uri


def _bench(ep: Endpoint, rows: int, runs: int) -> list[dict]:
    import deltalake

    import lakelog
    from benchmarks.data import mixed_table
    from benchmarks.timing import median_times

    lk_opts, dl_opts = ep.lakelog_options, ep.deltalake_options
    peer_writes = ep.kind != "gcs"
    out: list[dict] = []

    def add(name: str, lk: float, peer: str, dl: float | None) -> None:
        r = {"name": f"{ep.kind}: {name}", "lakelog_s": round(lk, 6), "peer": peer, "peer_s": None if dl is None else round(dl, 6),
             "ratio": None if dl is None else round(lk / dl, 3)}
        out.append(r)
        ratio = "no peer" if dl is None else f"{dl:8.3f}s   ratio {lk / dl:.2f}x"
        print(f"  {r['name']:<46} lakelog {lk:8.3f}s   {peer:<30} {ratio}", flush=True)

    # 1. a small append's commit
    one = pa.table({"id": [1]})
    lk_uri, dl_uri = ep.uri("append-lakelog"), ep.uri("append-deltalake")
    for _ in range(20):
        lakelog.write_table(lk_uri, one, storage_options=lk_opts)
        if peer_writes:
            deltalake.write_deltalake(dl_uri, one, mode="append", storage_options=dl_opts)
    fns = [lambda: lakelog.write_table(lk_uri, one, storage_options=lk_opts)]
    if peer_writes:
        fns.append(lambda: deltalake.write_deltalake(dl_uri, one, mode="append", storage_options=dl_opts))
    times = median_times(fns, runs * 2)
    add("one-row append (commit)", times[0], "deltalake write_deltalake", times[1] if peer_writes else None)

    # 2. loading 1,000 commits and a checkpoint
    uri = synthetic_log(ep, 1000, 990)
    lk, dl = median_times([lambda: len(lakelog.Table(uri, storage_options=lk_opts).files()),
                           lambda: len(deltalake.DeltaTable(uri, storage_options=dl_opts).file_uris())], runs)
    add("load 1,000 commits + checkpoint", lk, "deltalake DeltaTable.file_uris", dl)

    # 3. reading and 4. writing `rows` rows
    data = mixed_table(rows)
    uri = ep.uri("read")
    for i in range(4):
        lakelog.write_table(uri, data.slice(i * rows // 4, rows // 4), storage_options=lk_opts)
    lk, dl = median_times([lambda: lakelog.read_table(uri, storage_options=lk_opts).num_rows,
                           lambda: deltalake.DeltaTable(uri, storage_options=dl_opts).to_pyarrow_table().num_rows], runs)
    add(f"read {rows:,} rows", lk, "deltalake to_pyarrow_table", dl)

    fns = [lambda: lakelog.write_table(ep.uri("write"), data, storage_options=lk_opts)]
    if peer_writes:
        fns.append(lambda: deltalake.write_deltalake(ep.uri("write"), data, storage_options=dl_opts))
    times = median_times(fns, runs)
    add(f"write {rows:,} rows", times[0], "deltalake write_deltalake", times[1] if peer_writes else None)
    return out


def run(stores: tuple[str, ...] = ("azure", "gcs"), quick: bool = False, runs: int = 5) -> list[dict]:
    rows, runs = (100_000, 3) if quick else (1_000_000, runs)
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="lakelog-cloud-bench-") as tmp:
        for kind in stores:
            print(f"{kind}: lakelog vs deltalake on the {'Azurite' if kind == 'azure' else 'fake-gcs-server'} emulator")
            workdir = os.path.join(tmp, kind)
            os.makedirs(workdir)
            ep = Endpoint(kind, workdir)
            try:
                results += _bench(ep, rows, runs)
            finally:
                ep.stop()
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cloud_stores", description=__doc__.split("\n")[0])
    ap.add_argument("--store", choices=("azure", "gcs"), action="append", help="one store (repeatable); default both")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    run(tuple(args.store or ("azure", "gcs")), quick=args.quick, runs=args.runs)
    sys.stdout.flush()
    os._exit(0)  # deltalake's native runtime can abort the interpreter at shutdown
