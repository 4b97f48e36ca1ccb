"""The storage backends every storage-level suite runs on, as one object per test: ``Backend``.

A ``Backend`` is a fresh table location on local disk, ``memory://``, S3 (moto over HTTP), Azure
(Azurite) or GCS (fake-gcs-server). Its ``uri`` works bare, in this process and in subprocesses: the
session fixtures point the environment at the emulators. ``short`` marks the stores where heavy tests
(many processes, many commits, long kill loops) run their short form; they run in full on local disk.
Object stores also have ``faults``: the answers a real endpoint gives under faults, injected on the wire.
"""

from __future__ import annotations

import uuid
from typing import Any

OBJECT_STORES = ("s3", "azure", "gcs")
# stores other processes (and deltalake) reach: all but memory://
SHARED_STORES = ("local", *OBJECT_STORES)
ALL_STORES = ("local", "memory", *OBJECT_STORES)


class Backend:
    """A fresh table location on one store (see the module docstring).

    ``storage_options``: explicit lakelog options reaching the store (None: none needed);
    ``deltalake_options``: the same for delta-rs; ``peer``: whether deltalake can read the table
    (not on ``memory://``, which lives in this process).
    """

    def __init__(self, kind: str, root: str, endpoint: Any = None):
        self.kind, self._root, self.endpoint = kind, root, endpoint
        self.short = kind in OBJECT_STORES
        self.peer = kind != "memory"
        self.storage_options = None if endpoint is None else dict(endpoint.storage_options)
        self.deltalake_options = None if endpoint is None else dict(endpoint.deltalake_options)
        self.faults = StoreFaults(kind, endpoint) if kind in OBJECT_STORES else None
        self.uri = f"{root}/table" if kind == "local" else self.new_uri()

    def new_uri(self) -> str:
        """Another fresh table location on the same store."""
        if self.endpoint is not None:
            return self.endpoint.new_table_uri()
        if self.kind == "memory":
            return f"memory://lakelog-tests/{uuid.uuid4().hex}/table"
        return f"{self._root}/table-{uuid.uuid4().hex[:8]}"

    def storage(self, uri: str | None = None, storage_options: dict | None = None):
        """``lakelog.storage.Storage`` for ``uri`` (default: this table) on this store."""
        from lakelog.storage import Storage

        return Storage(uri or self.uri, storage_options if storage_options is not None else self.storage_options)

    def deltalake_table(self, uri: str | None = None, **kw):
        import deltalake

        assert self.peer, "deltalake cannot read memory:// tables of this process"
        return deltalake.DeltaTable(uri or self.uri, storage_options=self.deltalake_options, **kw)

    def peer_sql(self, sql: str, uri: str | None = None, version: int | None = None):
        """deltalake's SQL engine (it applies deletion vectors; ``to_pyarrow_table`` refuses them) over the
        table registered as ``t``: an Arrow table."""
        import deltalake
        import pyarrow as pa

        dt = self.deltalake_table(uri) if version is None else self.deltalake_table(uri, version=version)
        return pa.table(deltalake.QueryBuilder().register("t", dt).execute(sql).read_all())

    def peer_changes(self, starting_version: int = 0, uri: str | None = None):
        """deltalake's change data feed (``load_cdf``) from ``starting_version``: an Arrow table."""
        import pyarrow as pa

        return pa.table(self.deltalake_table(uri).load_cdf(starting_version=starting_version).read_all())

    def __repr__(self) -> str:
        return f"Backend({self.kind!r}, {self.uri!r})"


class StoreFaults:
    """Faults of an object store's endpoint, the same calls for S3 (the moto server's middleware) and for
    Azure and GCS (a ``FaultProxy`` in front of the emulator).

    Only requests sent with ``options`` meet them: on S3 every request does (the middleware sits in the
    server), on Azure and GCS those sent through the proxy.
    """

    def __init__(self, kind: str, endpoint: Any):
        self.kind, self.endpoint = kind, endpoint
        if kind == "s3":
            self._injector = endpoint.middleware
            self.options = dict(endpoint.storage_options)
        else:
            self._injector = endpoint.proxy
            self.options = dict(endpoint.proxy_options)
        # the request that creates an object: S3 and Azure PUT it; GCS POSTs an upload naming it in its body
        self._create = "POST" if kind == "gcs" else "PUT"

    def _where(self, name: str) -> str:
        return ("/_delta_log/" if self.kind == "s3" else "_delta_log/") + name

    def lose_reply(self, log_name: str, times: int = 1) -> None:
        """The next create of ``_delta_log/<log_name>`` is applied, but its reply is lost (a 500)."""
        self._injector.inject(self._create, self._where(log_name), "lose_reply", times)

    def stall_reply(self, log_name: str, times: int = 1) -> None:
        """The next create of ``_delta_log/<log_name>`` is applied, but never answered: the client times out."""
        self._injector.inject(self._create, self._where(log_name), "stall_reply", times)

    def stall_reads(self, suffix: str, times: int = 100) -> None:
        """Reads (GET) of objects whose names end with ``suffix`` are never answered."""
        self._injector.inject("GET", suffix, "stall", times)

    def refuse_create(self, log_name: str, times: int = 1) -> None:
        """The next creates of ``_delta_log/<log_name>`` are refused, unapplied, as the store refuses a
        create that lost a race: S3 409 ConditionalRequestConflict; Azure 409 BlobAlreadyExists, then
        412 ConditionNotMet; GCS 412 conditionNotMet."""
        if self.kind == "s3":
            self._injector.inject(self._create, self._where(log_name), "conflict409", times)
            return
        for i in range(times):
            kind = "busy" if self.kind == "azure" and i % 2 else "exists"
            self._injector.inject(self._create, self._where(log_name), kind)

    @property
    def refused_as(self) -> type[OSError]:
        """What ``Storage.put_if_absent`` raises for a refused create: both mean "look again"."""
        from lakelog.storage import ConditionalWriteConflict

        return ConditionalWriteConflict if self.kind == "s3" else FileExistsError

    def ignore_condition(self, bucket: str) -> None:
        """``bucket`` behaves as a store without conditional creates: a second create of a name succeeds."""
        if self.kind == "s3":
            self._injector.ignore_conditional.add(bucket)
        else:
            self._injector.ignore_condition.add(bucket)

    @property
    def served(self) -> list[str]:
        """The kinds of the faults served so far, in order."""
        served = self._injector.faults_served if self.kind == "s3" else self._injector.served
        return [f[2] for f in served]

    def clear(self) -> None:
        self._injector.clear()
