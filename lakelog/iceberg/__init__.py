"""UniForm: Iceberg metadata next to the Delta log, so Iceberg readers read the table.

With ``delta.universalFormat.enabledFormats`` holding ``iceberg`` (which needs ``delta.enableIcebergCompatV1``
or ``V2``), every commit is followed by an Iceberg step writing ``metadata/v<N>.metadata.json``, its
manifest list and manifests (Avro) and ``metadata/version-hint.text``: one Iceberg snapshot per Delta
version, with the Delta version in the snapshot summary and in the table property ``delta-version``.

As Delta's converter, the step runs after the commit has returned, on a worker thread (``background``):
commits made meanwhile to the same table are converted by one step. ``flush()`` waits for it (and
``Table.sync_iceberg()``, ``lakelog uniform PATH``, the CLI's commands and the interpreter's exit do); the
commit that turns UniForm on, and every commit with ``LAKELOG_UNIFORM_ICEBERG_SYNC_CONVERT=true`` (Delta's
``spark.databricks.delta.uniform.iceberg.sync.convert.enabled``), runs it inside the commit instead.

The step never decides a commit's outcome: the Delta commit is made first, and a failed or interrupted
step is caught up by the next commit, ``Table.sync_iceberg()`` or ``lakelog uniform PATH`` from the last
version the Iceberg metadata records. The Avro files are written with fastavro (imported, like the
rest of this package's modules, only when a table has UniForm on).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import Any, Callable

from ..errors import IcebergSyncError, IcebergSyncTimeoutError, IcebergSyncWarning, InvalidArgumentError, InvalidTablePropertyError

FORMATS_KEY = "delta.universalFormat.enabledFormats"
COMPAT_KEYS = ("delta.enableIcebergCompatV1", "delta.enableIcebergCompatV2")
SYNC_CONVERT_ENV = "LAKELOG_UNIFORM_ICEBERG_SYNC_CONVERT"
_ATTEMPTS = 5
# One Iceberg step at a time in a process: the worker's, a synchronous commit's and sync_iceberg's share
# the module caches of what this process wrote last (convert._LAST_LIST, metadata._WRITTEN).
_STEP_LOCK = threading.RLock()


def enabled(configuration: dict[str, str]) -> bool:
    """Whether ``configuration`` (``metaData.configuration``) turns UniForm's Iceberg metadata on."""
    formats = configuration.get(FORMATS_KEY) or ""
    return "iceberg" in (f.strip() for f in formats.split(","))


def check_enablement(configuration: dict[str, str]) -> None:
    """Refuse a configuration that turns UniForm on without what it needs (checked before a commit)."""
    if not enabled(configuration):
        return
    if not any(configuration.get(k, "").lower() == "true" for k in COMPAT_KEYS):
        raise InvalidTablePropertyError(
            f"table property {FORMATS_KEY}=iceberg needs Iceberg compatibility, as Delta requires: set "
            f"{COMPAT_KEYS[1]} = true (or {COMPAT_KEYS[0]}) in the same change",
            key=FORMATS_KEY, value=configuration.get(FORMATS_KEY),
        )
    # column mapping (field ids) is icebergCompat's own requirement, enforced with it (lakelog.table_features.iceberg_compat)


def sync(storage: Any, *, before: Any = None, committed: dict[int, list] | None = None) -> int | None:
    """Write Iceberg snapshots for every Delta version after the last converted one, up to the latest
    (or the newest of ``committed``: {version: actions} just committed on top of the snapshot ``before``,
    which spares reading them back). Returns the Delta version the Iceberg metadata now describes."""
    from .catch_up import sync_table

    with _STEP_LOCK:
        for _ in range(_ATTEMPTS):
            try:
                return sync_table(storage, before, committed)
            except FileExistsError:
                before = committed = None  # another writer converted concurrently: start again from its metadata
        return sync_table(storage, None, None)


def converts_in_commit(configuration_before: dict[str, str] | None) -> bool:
    """Whether a commit on a UniForm table runs the Iceberg step itself rather than after it returns: when
    ``LAKELOG_UNIFORM_ICEBERG_SYNC_CONVERT`` is true, or when the commit turns UniForm on (the table before
    it, ``configuration_before``, had it off or did not exist), as Delta does. Checked before the commit:
    a value other than true/false is an ``InvalidArgumentError``."""
    value = os.environ.get(SYNC_CONVERT_ENV, "").strip().lower()
    if value not in ("", "true", "false", "1", "0"):
        raise InvalidArgumentError(f"{SYNC_CONVERT_ENV}={os.environ[SYNC_CONVERT_ENV]!r} is not true or false (whether UniForm's Iceberg step "
                                   "runs inside each commit); unset it or set it to true or false. Nothing was committed")
    return value in ("true", "1") or configuration_before is None or not enabled(configuration_before)


def after_commit(storage: Any, version: int, *, before: Any, committed: dict[int, list] | None, now: bool,
                 then: Callable[[], BaseException | None]) -> None:
    """The Iceberg step after commit ``version`` (``before`` and ``committed`` as ``sync`` takes them), then
    ``then`` (publishing to the Iceberg catalog: its failure returned, never raised): in this thread when
    ``now``, else queued for the worker thread."""
    if not now:
        from . import background
        from .files import table_location

        if background.submit(table_location(storage), storage, version, before, committed, then):
            return
    run_step(storage, version, before, committed, then, stacklevel=4)


def run_step(storage: Any, version: int, before: Any, committed: dict[int, list] | None, then: Callable[[], BaseException | None],
             stacklevel: int = 1) -> BaseException | None:
    """One Iceberg step, then ``then``; a failure is a warning (``IcebergSyncWarning``; ``then`` warns of
    its own) and returned."""
    try:
        sync(storage, before=before, committed=committed)
    except Exception as e:  # noqa: BLE001 - the Delta commit stands; the next step catches up
        warnings.warn(IcebergSyncWarning(f"lakelog: version {version} is committed, but writing its Iceberg metadata (UniForm) failed: {e!r}; "
                                         "the next commit or Table.sync_iceberg() writes it", version, e), stacklevel=stacklevel + 1)
        return e
    return then()


def flush(timeout: float | None = None, *, raise_errors: bool = True) -> None:
    """Wait until the Iceberg steps (UniForm) of every commit this process made so far are done, for at most
    ``timeout`` seconds (None: until they are). Raises ``IcebergSyncError`` naming each table whose latest
    step failed since the last flush (the Delta commits stand; ``Table.sync_iceberg()`` catches up; each
    failure was also a warning when it happened: ``raise_errors=False`` leaves it at that), and
    ``IcebergSyncTimeoutError`` when the time ran out first."""
    if timeout is not None and not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout >= 0):
        raise InvalidArgumentError(f"timeout must be a number of seconds >= 0 or None, not {timeout!r}")
    background = sys.modules.get(f"{__name__}.background")
    if background is None:  # no step was ever queued in this process
        return
    try:
        background.wait(None, timeout)
    except IcebergSyncError as e:
        if raise_errors or isinstance(e, IcebergSyncTimeoutError):
            raise


def settle(storage: Any) -> None:
    """Wait for the queued Iceberg step of the table of ``storage``; a failure of it is forgotten (the caller
    converts now, and reports its own)."""
    background = sys.modules.get(f"{__name__}.background")
    if background is None:
        return
    from .files import table_location

    key = table_location(storage)
    try:
        background.wait([key], None)
    except IcebergSyncError:
        pass


__all__ = ["SYNC_CONVERT_ENV", "after_commit", "check_enablement", "converts_in_commit", "enabled", "flush", "run_step", "settle", "sync"]
