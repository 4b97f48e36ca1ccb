"""Symlink format manifests (``delta.compatibility.symlinkFormatManifest.enabled``): Hive-style file lists
for engines that read a table's Parquet files without its log (Presto, Athena, Redshift Spectrum).

As Delta's ``GenerateSymlinkManifest`` hook does, ``_symlink_format_manifest/manifest`` (unpartitioned) or
``_symlink_format_manifest/<col>=<value>/.../manifest`` (one per partition, Hive-escaped, null and empty
values as ``__HIVE_DEFAULT_PARTITION__``) lists the absolute paths of the partition's current data files,
one per line, each line ending in a newline; paths are written as Hadoop prints them (``file:/abs/path``
for a local table, the table's URL, its path decoded, followed by the decoded relative path on an
object store: ``storage.location.table_url``).

* After every commit of a table with the property on that adds or removes files, the manifests of the
  partitions it touched are rewritten and those of partitions it emptied deleted (incremental). The
  commit that turns the property on, and any commit finding no manifest directory, regenerates fully.
* ``generate_full`` (``Table.generate_symlink_manifest``) rewrites every manifest and deletes stale ones.
* A listed file's deletion vector would be invisible to such readers, and with column mapping the
  files' column names are not the table's: both are refused (before committing where lakelog can tell).
* A failure after the commit does not undo it: ``SymlinkManifestError`` names the committed version
  and says how to regenerate.
"""

from __future__ import annotations

from typing import Iterable

from .actions import Action, AddCDCFile, AddFile, Metadata, RemoveFile, decode_path
from .errors import SymlinkManifestError, UnsupportedFeatureError
from .properties import TableProperties
from .schema import HIVE_NULL, hive_escape
from .storage import Storage
from .storage.location import table_url

MANIFEST_DIR = "_symlink_format_manifest"
MANIFEST_FILE = "manifest"
PROPERTY = "delta.compatibility.symlinkFormatManifest.enabled"
REGENERATE = "Table(path).generate_symlink_manifest() (CLI: lakelog generate-manifest PATH)"


def enabled(configuration: dict[str, str] | None) -> bool:
    return bool(TableProperties(configuration or {}).get(PROPERTY))


def check_commit(snapshot, actions: list[Action]) -> None:
    """Refuse, before committing, a commit that leaves the property on where manifests cannot be right:
    with column mapping, beside ``delta.enableDeletionVectors``, or turning it on while files carry
    deletion vectors (Delta's table property constraints)."""
    new_meta = next((a for a in actions if isinstance(a, Metadata)), None)
    meta = new_meta or (snapshot.metadata if snapshot is not None else None)
    if meta is None or not enabled(meta.configuration):
        return
    props = TableProperties(meta.configuration)
    if props.column_mapping_mode != "none":
        raise UnsupportedFeatureError(
            f"symlink format manifests ({PROPERTY}=true) cannot be generated for a table with column mapping "
            f"(delta.columnMapping.mode={props.column_mapping_mode}): the data files' column names are not the table's. "
            "Turn one of them off; nothing was committed."
        )
    if props.get("delta.enableDeletionVectors"):
        raise UnsupportedFeatureError(
            f"{PROPERTY}=true and delta.enableDeletionVectors=true are mutually exclusive (a manifest cannot hide "
            "deleted rows); turn one of them off. Nothing was committed."
        )
    turned_on = snapshot is None or not enabled(snapshot.configuration)
    if turned_on and snapshot is not None and _with_dvs(snapshot.files.values()):
        raise UnsupportedFeatureError(
            f"cannot turn on {PROPERTY}: files of the table have deletion vectors, which manifest readers would "
            "not apply. Rewrite them first (e.g. Table.optimize or a purge), then turn it on. Nothing was committed."
        )


def after_commit(storage: Storage, read_snapshot, actions: list[Action], version: int, load_snapshot) -> None:
    """Update the manifests after commit ``version`` (``actions`` as committed) when the table has the
    property on. ``load_snapshot()`` gives the table at ``version``; it is called only when needed.
    Raises SymlinkManifestError (the commit stands) when they could not be written."""
    new_meta = next((a for a in actions if isinstance(a, Metadata)), None)
    configuration = new_meta.configuration if new_meta is not None else (read_snapshot.configuration if read_snapshot is not None else {})
    if not enabled(configuration):
        return
    turned_on = new_meta is not None and (read_snapshot is None or not enabled(read_snapshot.configuration))
    if not turned_on and not any(isinstance(a, (AddFile, RemoveFile, AddCDCFile)) for a in actions):
        return  # as Delta: only commits with file actions (or the one turning it on) touch manifests
    try:
        snapshot = load_snapshot()
        if turned_on or not storage.list_files(storage.join(MANIFEST_DIR)):
            generate_full(storage, snapshot)
        else:
            _generate_incremental(storage, snapshot, read_snapshot, actions)
    except Exception as e:  # noqa: BLE001 - whatever failed, the commit stands and the reader must know
        raise SymlinkManifestError(
            f"version {version} was committed, but the symlink format manifests under {MANIFEST_DIR}/ could not be "
            f"updated ({type(e).__name__}: {e}); they are stale until regenerated with {REGENERATE}",
            version=version,
        ) from e


def generate_full(storage: Storage, snapshot) -> dict[str, int]:
    """Write the manifest of every partition of ``snapshot`` and delete every other file under the
    manifest directory. Returns ``{"manifests_written": n, "files_deleted": m}``."""
    _check_snapshot(snapshot)
    files = list(snapshot.files.values())
    groups = _by_partition(snapshot.partition_columns, files)
    if not snapshot.partition_columns and not groups:
        groups = {"": []}  # an empty unpartitioned table still has its (empty) manifest
    root = storage.join(MANIFEST_DIR)
    existing = storage.list_files(root)
    for rel_dir, adds in groups.items():
        _write(storage, rel_dir, adds)
    deleted = 0
    for f in existing:
        rel_dir, _, name = f.name.rpartition("/")
        if rel_dir in groups and name == MANIFEST_FILE:
            continue
        storage.delete(f.path)
        deleted += 1
    _remove_empty_dirs(storage, {f.name.rpartition("/")[0] for f in existing} - set(groups))
    return {"manifests_written": len(groups), "files_deleted": deleted}


def _generate_incremental(storage: Storage, snapshot, read_snapshot, actions: list[Action]) -> None:
    """Rewrite the manifests of the partitions ``actions`` touched; delete those of partitions they emptied."""
    _check_snapshot(snapshot)
    cols = snapshot.partition_columns
    files = list(snapshot.files.values())
    if not cols:
        _write(storage, "", files)
        return
    touched: set[str] = set()
    for a in actions:
        if isinstance(a, AddFile):
            touched.add(partition_dir(cols, a.partition_values))
        elif isinstance(a, RemoveFile):
            values = a.partition_values
            if values is None:  # not logged: the file as the commit read it
                read = read_snapshot.files.get(decode_path(a.path)) if read_snapshot is not None else None
                if read is None:
                    generate_full(storage, snapshot)  # cannot tell which partition it left: redo all
                    return
                values = read.partition_values
            touched.add(partition_dir(cols, values))
    current = _by_partition(cols, files)
    for rel_dir in sorted(touched):
        if rel_dir in current:
            _write(storage, rel_dir, current[rel_dir])
        else:
            path = storage.join(MANIFEST_DIR, rel_dir, MANIFEST_FILE)
            try:
                storage.delete(path)
            except FileNotFoundError:
                pass
    _remove_empty_dirs(storage, touched - set(current))


def partition_dir(partition_columns: list[str], values: dict[str, str | None]) -> str:
    """``col=value/...`` as Spark's ``getPartitionPathString`` builds it (empty and null: the Hive default)."""
    return "/".join(f"{hive_escape(c)}={hive_escape(v) if (v := values.get(c)) else HIVE_NULL}" for c in partition_columns)


def manifest_path(storage: Storage, relative: str) -> str:
    """The absolute path of table file ``relative`` (decoded) as Hadoop prints it in a manifest."""
    return f"{table_url(storage.uri, storage.root if storage.is_local else None)}/{relative}"


def _by_partition(cols: list[str], files: Iterable[AddFile]) -> dict[str, list[AddFile]]:
    groups: dict[str, list[AddFile]] = {}
    for a in files:
        groups.setdefault(partition_dir(cols, a.partition_values), []).append(a)
    return groups


def _write(storage: Storage, rel_dir: str, adds: list[AddFile]) -> None:
    directory = storage.join(MANIFEST_DIR, rel_dir)
    lines = sorted(manifest_path(storage, a.relative_path) for a in adds)
    if storage.is_local:
        storage.makedirs(directory)
        try:  # a Hadoop checksum left by Spark would no longer match the manifest
            storage.delete(f"{directory}/.{MANIFEST_FILE}.crc")
        except FileNotFoundError:
            pass
    storage.put(f"{directory}/{MANIFEST_FILE}", "".join(f"{line}\n" for line in lines).encode())


def _remove_empty_dirs(storage: Storage, rel_dirs: set[str]) -> None:
    """Remove the now-empty directories of deleted manifests (local tables; object stores have none)."""
    if not storage.is_local:
        return
    candidates = set()
    for d in rel_dirs:
        parts = d.split("/") if d else []
        candidates.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    for d in sorted(candidates, key=lambda s: -s.count("/")):
        try:
            storage.fs.rmdir(storage.join(MANIFEST_DIR, d))
        except OSError:
            pass  # not empty (another partition lives below it) or already gone


def _with_dvs(files: Iterable[AddFile]) -> list[str]:
    return [a.path for a in files if a.deletion_vector is not None]


def _check_snapshot(snapshot) -> None:
    mode = snapshot.column_mapping.mode
    if mode != "none":
        raise UnsupportedFeatureError(
            f"symlink format manifests cannot be generated for a table with column mapping (mode {mode!r}): the data "
            "files' column names are not the table's"
        )
    dvs = _with_dvs(snapshot.files.values())
    if dvs:
        raise UnsupportedFeatureError(
            f"symlink format manifests cannot be generated at version {snapshot.version}: {len(dvs)} file(s) have "
            f"deletion vectors (e.g. {dvs[0]!r}), whose deleted rows manifest readers would return. Rewrite them "
            "(Table.optimize, or a purge) and regenerate"
        )
