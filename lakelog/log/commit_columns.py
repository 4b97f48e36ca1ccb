"""JSON commits parsed for replay: ``add`` actions as columns, every other action as an object.

A commit of a big table is mostly ``add`` lines. ``parse_commit`` keeps their fields in one list per
field (the values orjson produced, checked a column at a time) instead of an ``AddFile`` per line, so
replay reconciles a commit with set and dict operations on its path column, and a checkpoint writes
the columns as Arrow. ``AddFile`` objects are built only for the rows a caller asks for. Every check
``parse_actions`` makes still holds, with the same error: when a column check fails, the commit's adds
are parsed one by one with ``AddFile.from_json``, which names the first bad line.
"""

from __future__ import annotations

import gc
import re
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import is_not, not_
from itertools import accumulate, chain, compress, repeat

import orjson

from ..actions import _PARSERS, SLOW_PATH_RE, Action, AddFile, decode_path, parse_actions, paths_to_decode
from ..errors import CorruptLogError

_NONE = type(None)
_STRINGS = {str, _NONE}
_slow_path_search = re.compile(SLOW_PATH_RE).search
_ARROW_MIN_PATHS = 2048  # fewer paths are searched one by one: importing pyarrow costs more than the searches


def decode_path_list(logged: list[str]) -> list[str]:
    """``decode_path`` for a list: the paths become one Arrow column (built from their joined bytes, which
    converts no Python value one by one), and only those ``actions.paths_to_decode`` names go through Python.
    A short list, or one with a non-ASCII path, takes a regex search per path instead (a table of a few
    commits opens without importing pyarrow). When none needs decoding the result is ``logged`` itself."""
    n = len(logged)
    if not n:
        return logged
    text = "".join(logged)
    if n < _ARROW_MIN_PATHS or not text.isascii():
        search = _slow_path_search
        rows = [i for i, p in enumerate(logged) if search(p)]
    else:
        import pyarrow as pa

        offsets = array("q", accumulate(map(len, logged), initial=0))
        column = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text.encode("ascii")))
        rows = paths_to_decode(column)
    if not rows:
        return logged
    out = list(logged)
    for i in rows:
        out[i] = decode_path(out[i])
    return out


# The add fields most files lack: a column is None when no row of it has one.
OPTIONAL_FIELDS = ("deletion_vector", "clustering_provider", "base_row_id", "default_row_commit_version")
_OPTIONAL_KEYS = {"clustering_provider": ("clusteringProvider", _STRINGS), "base_row_id": ("baseRowId", {int, _NONE}),
                  "default_row_commit_version": ("defaultRowCommitVersion", {int, _NONE})}


class AddColumns:
    """``add`` actions as one Python list per field (values as ``AddFile`` holds them, ``path`` as
    logged). The rarely set fields (``OPTIONAL_FIELDS``: deletion vector, clustering provider, row tracking's
    base row id and default commit version) are None when no row has them."""

    __slots__ = ("path", "partition_values", "size", "modification_time", "data_change", "stats", "tags") + OPTIONAL_FIELDS

    def __init__(self, path=None, partition_values=None, size=None, modification_time=None, data_change=None, stats=None, tags=None,
                 deletion_vector=None, clustering_provider=None, base_row_id=None, default_row_commit_version=None):
        self.path: list[str] = path or []
        self.partition_values: list[dict] = partition_values or []
        self.size: list[int] = size or []
        self.modification_time: list[int] = modification_time or []
        self.data_change: list[bool] = data_change or []
        self.stats: list[str | None] = stats or []
        self.tags: list[dict | None] = tags or []
        self.deletion_vector: list | None = deletion_vector
        self.clustering_provider: list | None = clustering_provider
        self.base_row_id: list | None = base_row_id
        self.default_row_commit_version: list | None = default_row_commit_version

    def __len__(self) -> int:
        return len(self.path)

    @classmethod
    def of(cls, adds: list[AddFile]) -> "AddColumns":
        def optional(name: str) -> list | None:
            values = [getattr(a, name) for a in adds]
            return values if any(v is not None for v in values) else None

        return cls(
            [a.path for a in adds],
            [a.partition_values for a in adds],
            [a.size for a in adds],
            [a.modification_time for a in adds],
            [a.data_change for a in adds],
            [a.stats for a in adds],
            [a.tags for a in adds],
            *map(optional, OPTIONAL_FIELDS),
        )

    @classmethod
    def from_json(cls, raws: list[dict]) -> "AddColumns | None":
        """The columns of ``add`` JSON objects, or None when a column check fails (a value of another type
        than ``AddFile.from_json`` takes as is: the caller then parses them one by one)."""

        def column(key: str) -> list:
            return list(map(dict.get, raws, repeat(key)))

        paths, pvs, sizes, mtimes = column("path"), column("partitionValues"), column("size"), column("modificationTime")
        changes, stats, tags = column("dataChange"), column("stats"), column("tags")
        if (
            not set(map(type, paths)) <= {str}
            or not set(map(type, sizes)) <= {int}
            or not set(map(type, mtimes)) <= {int}
            or not set(map(type, changes)) <= {bool}
            or not set(map(type, stats)) <= _STRINGS
            or not set(map(type, pvs)) <= {dict}
            or not set(map(type, chain.from_iterable(map(dict.values, pvs)))) <= _STRINGS
            or not set(map(type, column("deletionVector"))) <= {_NONE}
        ):
            return None
        tag_types = set(map(type, tags))
        if not tag_types <= {dict, _NONE}:
            return None
        if dict in tag_types and not set(map(type, chain.from_iterable(t.values() for t in tags if t is not None))) <= _STRINGS:
            return None
        optional = []
        for name in OPTIONAL_FIELDS[1:]:
            key, types = _OPTIONAL_KEYS[name]
            values = column(key)
            found = set(map(type, values))
            if not found <= types:
                return None
            optional.append(values if found != {_NONE} else None)
        # Files of a commit share few partition values: one dict per distinct value (~240 MiB less per
        # million files). AddFile objects built from the columns share them too; they are read-only.
        distinct: dict[tuple, dict] = {}
        pvs = list(map(distinct.setdefault, map(tuple, map(dict.items, pvs)), pvs))
        return cls(paths, pvs, sizes, mtimes, changes, stats, tags, None, *optional)

    def extend(self, other: "AddColumns") -> None:
        n = len(self)
        for name in AddColumns.__slots__[: -len(OPTIONAL_FIELDS)]:
            getattr(self, name).extend(getattr(other, name))
        for name in OPTIONAL_FIELDS:
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs is not None or mine is not None:
                mine = mine if mine is not None else [None] * n
                mine.extend(theirs if theirs is not None else [None] * len(other))
                setattr(self, name, mine)

    def take(self, rows: list[int]) -> "AddColumns":
        """The rows ``rows``, in that order."""
        return AddColumns(
            *([col[i] for i in rows] for col in (self.path, self.partition_values, self.size, self.modification_time, self.data_change, self.stats, self.tags)),
            *(None if (col := getattr(self, name)) is None else [col[i] for i in rows] for name in OPTIONAL_FIELDS),
        )

    def add_file(self, i: int) -> AddFile:
        """The ``AddFile`` of row ``i``."""
        dvs, cps, rids, rcvs = self.deletion_vector, self.clustering_provider, self.base_row_id, self.default_row_commit_version
        return AddFile(
            self.path[i],
            self.partition_values[i],
            self.size[i],
            self.modification_time[i],
            self.data_change[i],
            self.stats[i],
            self.tags[i],
            None if dvs is None else dvs[i],
            None if cps is None else cps[i],
            None if rids is None else rids[i],
            None if rcvs is None else rcvs[i],
        )

    def dv_ids(self) -> list[str | None] | None:
        """``deletionVector.uniqueId`` per row; None when no row has a deletion vector."""
        dvs = self.deletion_vector
        return None if dvs is None else [None if d is None else d.unique_id for d in dvs]


@dataclass
class ParsedCommit:
    """One JSON commit: its ``add`` actions as columns, its other actions as objects (in file order)."""

    actions: list[Action] = field(default_factory=list)
    adds: AddColumns = field(default_factory=AddColumns)

    @classmethod
    def of(cls, actions: list[Action]) -> "ParsedCommit":
        """A commit from action objects (a commit being written, or read by ``parse_actions``)."""
        return cls([a for a in actions if type(a) is not AddFile], AddColumns.of([a for a in actions if type(a) is AddFile]))


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: replaying a big log allocates millions of acyclic
    containers (the parsed JSON), each allocation burst triggering a collection that walks all of them
    (it took a third of a 1M-file replay)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _parse_adds(raws: list[tuple[dict, int]], name: str) -> list[AddFile]:
    """``AddFile.from_json`` per (add, line); the first malformed one is a ``CorruptLogError`` naming its line."""
    out = []
    for d, lineno in raws:
        try:
            out.append(AddFile.from_json(d))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CorruptLogError(f"log file {name}: line {lineno} has a malformed 'add' action ({e!r})") from None
    return out


def parse_commit(data: bytes, name: str) -> ParsedCommit:
    """Parse a JSON commit file as ``parse_actions`` does (same checks, same errors), adds as columns.

    The common case (every line a JSON object, well-formed adds each alone on its line) takes a path
    without Python work per line; anything else is parsed line by line, which names the first bad line."""
    if not data.strip():
        raise CorruptLogError(f"incomplete log file {name}: it is empty. Restore it from a backup or remove it if it is the newest commit and was never acknowledged.")
    try:
        objs = list(map(orjson.loads, data.splitlines()))
    except orjson.JSONDecodeError:  # a bad line, or a blank one
        return _parse_by_line(data, name)
    if not set(map(type, objs)) <= {dict}:
        return _parse_by_line(data, name)
    found = list(map(dict.get, objs, repeat("add")))
    has_add = list(map(is_not, found, repeat(None)))
    raws = list(compress(found, has_add))
    if sum(map(len, compress(objs, has_add))) != len(raws):  # an add next to another action on its line
        return _parse_by_line(data, name)
    out: list[Action] = []
    if len(raws) < len(objs):
        parsers = _PARSERS
        try:
            for o in compress(objs, map(not_, has_add)):
                if "add" in o:
                    raise ValueError("a null add")
                for key, value in o.items():
                    parser = parsers.get(key)
                    if parser is None or value is None:
                        continue  # unknown actions are ignored, as the protocol requires
                    if type(value) is not dict:
                        raise TypeError(key)
                    out.append(parser(value))
        except Exception:  # noqa: BLE001 - parsed again line by line, which raises the right error
            return _parse_by_line(data, name)
    adds = AddColumns.from_json(raws) if set(map(type, raws)) <= {dict} else None
    if adds is None:
        return _parse_by_line(data, name)
    return ParsedCommit(out, adds)


def _parse_by_line(data: bytes, name: str) -> ParsedCommit:
    raws: list[tuple[dict, int]] = []
    try:
        out = parse_actions(data, name, raw_adds=raws)
    except Exception:
        # parse_actions stops at the first bad line: a malformed add before it (or first on it) is that one.
        _parse_adds(raws, name)
        raise
    adds = AddColumns.from_json([d for d, _ in raws])
    if adds is None:
        adds = AddColumns.of(_parse_adds(raws, name))
    return ParsedCommit(out, adds)
