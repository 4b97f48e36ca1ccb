"""UniForm: Iceberg metadata next to the Delta log, so Iceberg readers read the table.

With ``delta.universalFormat.enabledFormats`` holding ``iceberg`` (which needs ``delta.enableIcebergCompatV1``
or ``V2``), every commit is followed by an Iceberg step writing ``metadata/v<N>.metadata.json``, its
manifest list and manifests (Avro) and ``metadata/version-hint.text``: one Iceberg snapshot per Delta
version, with the Delta version in the snapshot summary and in the table property ``delta-version``.

The step never decides a commit's outcome: the Delta commit is made first, and a failed or interrupted
step is caught up by the next commit, ``Table.sync_iceberg()`` or ``lakelog uniform PATH`` from the last
version the Iceberg metadata records. The Avro files are written with fastavro (imported, like the
rest of this package's modules, only when a table has UniForm on).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidTablePropertyError

FORMATS_KEY = "delta.universalFormat.enabledFormats"
COMPAT_KEYS = ("delta.enableIcebergCompatV1", "delta.enableIcebergCompatV2")
_ATTEMPTS = 5


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

    for _ in range(_ATTEMPTS):
        try:
            return sync_table(storage, before, committed)
        except FileExistsError:
            before = committed = None  # another writer converted concurrently: start again from its metadata
    return sync_table(storage, None, None)


__all__ = ["check_enablement", "enabled", "sync"]
