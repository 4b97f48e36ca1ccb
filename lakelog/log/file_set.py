"""The live files of a snapshot (``FileSet``): the add rows of the checkpoint it started from, kept as
Arrow columns, and the changes of the JSON commits replayed after it (``Changes``), kept as the commits'
add columns. ``AddFile`` objects are built only when a caller asks for them."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from itertools import compress, repeat
from operator import countOf, is_not
from typing import TYPE_CHECKING, Any

from ..actions import AddFile
from .commit_columns import AddColumns

if TYPE_CHECKING:  # a file set of JSON commits alone (no checkpoint) needs no Arrow: opening such a table imports none
    import pyarrow as pa

    from .checkpoint import CheckpointState


class Changes(Mapping):
    """The changes of the JSON commits a file set replayed: decoded path -> its live ``add``, or None when
    removed. Backed by the commits' add columns (``blocks``; ``rows`` maps a path to a row counted over
    all blocks): the ``AddFile`` of a path is built only when asked for."""

    __slots__ = ("rows", "blocks", "starts", "dead", "_objects")

    def __init__(self, rows: dict[str, int | None] | None = None, blocks: list[AddColumns] | None = None, starts: list[int] | None = None, dead: int = 0) -> None:
        self.rows: dict[str, int | None] = {} if rows is None else rows
        self.blocks: list[AddColumns] = [] if blocks is None else blocks
        self.starts: list[int] = [] if starts is None else starts  # the row of each block's first add
        self.dead = dead  # rows of the blocks no path names any more (replaced or removed)
        self._objects: dict[str, AddFile | None] | None = None  # every entry as an object, once asked for

    def copy(self) -> "Changes":
        # Blocks are never modified once appended: copies share them.
        return Changes(dict(self.rows), list(self.blocks), list(self.starts), self.dead)

    def __getitem__(self, path: str) -> AddFile | None:
        if self._objects is not None:
            return self._objects[path]
        row = self.rows[path]
        return None if row is None else self.add_file(row)

    def objects(self) -> dict[str, AddFile | None]:
        """Every entry with its ``AddFile`` (built on first use, kept until the changes change)."""
        if self._objects is None:
            self._objects = {p: None if r is None else self.add_file(r) for p, r in self.rows.items()}
        return self._objects

    def items(self):
        return self.objects().items()

    def values(self):
        return self.objects().values()

    def set_removed(self, path: str) -> None:
        if self.rows.get(path) is not None:
            self.dead += 1
        self.rows[path] = None
        self._objects = None

    def discard(self, path: str) -> None:
        if self.rows.pop(path, None) is not None:
            self.dead += 1
        self._objects = None

    def __contains__(self, path: object) -> bool:
        return path in self.rows

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def _locate(self, row: int) -> tuple[AddColumns, int]:
        j = bisect_right(self.starts, row) - 1
        return self.blocks[j], row - self.starts[j]

    def add_file(self, row: int) -> AddFile:
        block, i = self._locate(row)
        return block.add_file(i)

    def dv_id(self, path: str) -> Any:
        """The deletion vector id of the live add of ``path``; ``NOT_LIVE`` when removed (``path`` is a key)."""
        row = self.rows[path]
        if row is None:
            return NOT_LIVE
        block, i = self._locate(row)
        dvs = block.deletion_vector
        return None if dvs is None or dvs[i] is None else dvs[i].unique_id

    def append(self, adds: AddColumns, paths: list[str]) -> None:
        """Make ``adds`` (decoded paths ``paths``, each once) the live adds of their paths."""
        rows = self.rows
        previous = list(map(rows.get, paths))
        self.dead += len(previous) - previous.count(None)
        start = self._end()
        self.blocks.append(adds)
        self.starts.append(start)
        rows.update(zip(paths, range(start, start + len(paths))))
        self._objects = None
        if self.dead >= _COMPACT_MIN_DEAD and self.dead > start + len(paths) - self.dead:
            self._compact()

    def _end(self) -> int:
        return self.starts[-1] + len(self.blocks[-1]) if self.blocks else 0

    def _compact(self) -> None:
        """One block of the live rows only, once most rows are dead (a log that rewrites its files keeps
        the memory of its live files, not of every add it ever had)."""
        live = AddColumns()
        for block, rows in self.live_blocks():
            live.extend(block if len(rows) == len(block) else block.take(rows))
        order = sorted(compress(self.rows, map(is_not, self.rows.values(), repeat(None))), key=self.rows.__getitem__)
        self.blocks, self.starts, self.dead = [live], [0], 0
        self.rows.update(zip(order, range(len(order))))  # same keys: the listing order stays

    def live_paths(self) -> list[str]:
        return [p for p, r in self.rows.items() if r is not None]

    def live_blocks(self):
        """(block, its live rows) for every block with live rows, in commit order."""
        rows = self.rows.values()
        live = sorted(compress(rows, map(is_not, rows, repeat(None))))
        k = 0
        for block, start in zip(self.blocks, self.starts):
            end = start + len(block)
            j = bisect_left(live, end, k)
            if j > k:
                yield block, [r - start for r in live[k:j]]
            k = j


class FileSet:
    """The live files of a snapshot: the add rows of the checkpoint it started from, kept as Arrow
    columns, plus the changes of the JSON commits after it (``Changes``: path -> add, or None when removed).

    Listing paths never builds per-file objects (the checkpoint's paths stay an Arrow column until a
    list is asked for); ``as_dict`` builds them once, when a caller needs them.
    """

    __slots__ = ("base", "changes", "_dict", "_dropped")

    def __init__(self, base: CheckpointState | None = None, changes: Changes | None = None) -> None:
        self.base = base
        self.changes: Changes = Changes() if changes is None else changes
        self._dict: dict[str, AddFile] | None = None
        self._dropped: list[int] | None = None  # _base_rows_changed, until the changes change

    def copy(self) -> "FileSet":
        return FileSet(self.base, self.changes.copy())

    def add(self, path: str, add: AddFile) -> None:
        self.add_columns(AddColumns.of([add]), [path])

    def add_columns(self, adds: AddColumns, paths: list[str]) -> None:
        """Make ``adds`` (decoded paths ``paths``, each once) live."""
        self.changes.append(adds, paths)
        self._dict = self._dropped = None

    def live_dv_id(self, path: str) -> Any:
        """The deletion vector id of the live add of ``path``; ``NOT_LIVE`` when the path is not live."""
        if path in self.changes:
            return self.changes.dv_id(path)
        base = self.base
        if base is None or base.dv_ids is None:
            return None  # live or not, no deletion vector: removing it is right either way
        i = base.rows_by_path().get(path)
        return NOT_LIVE if i is None else base.dv_ids[i]

    def remove(self, path: str) -> None:
        if self.base is None:
            self.changes.discard(path)
        else:
            self.changes.set_removed(path)  # the path may be a checkpoint row
        self._dict = self._dropped = None

    def _base_rows_changed(self) -> list[int]:
        """The checkpoint rows (ascending) whose path a later commit removed or added again (one
        lookup of the changed paths in the checkpoint's path column, kept until the changes change)."""
        if self._dropped is None:
            self._dropped = self.base.rows_named(list(self.changes)).to_pylist() if self.changes else []
        return self._dropped

    def paths(self) -> list[str]:
        changes = self.changes
        out: list[str] = []
        if self.base is not None:
            base = self.base.paths  # a new list
            dropped = self._base_rows_changed()
            if not dropped:
                out = base
            else:  # the runs of rows between those dropped, copied at C speed
                start = 0
                for i in dropped:
                    out.extend(base[start:i])
                    start = i + 1
                out.extend(base[start:])
        out.extend(changes.live_paths())
        return out

    def __len__(self) -> int:
        n = 0
        if self.base is not None:
            n = self.base.num_rows - len(self._base_rows_changed())
        rows = self.changes.rows
        return n + len(rows) - countOf(rows.values(), None)

    def as_dict(self) -> dict[str, AddFile]:
        if self._dict is None:
            out: dict[str, AddFile] = {}
            if self.base is not None:
                changes = self.changes.rows
                out = {p: a for p, a in zip(self.base.paths, self.base.add_actions()) if p not in changes}
            out.update((p, a) for p, a in self.changes.items() if a is not None)
            self._dict = out
        return self._dict

    def base_rows_kept(self) -> pa.ChunkedArray | None:
        """The checkpoint add rows still live, chunked as read (for writing the next checkpoint without
        Python objects or a copy of the rows that stay)."""
        if self.base is None:
            return None
        base = self.base
        dropped = self._base_rows_changed()
        if not dropped:
            return base.add_rows
        import numpy as np
        import pyarrow as pa

        from ..schema import arrow_values

        keep = np.ones(base.num_rows, bool)
        keep[dropped] = False
        # Only the chunks (row groups as read) holding a dropped row are filtered.
        pieces, start = [], 0
        for chunk in base.add_rows.chunks:
            end = start + len(chunk)
            mask = keep[start:end]
            pieces.append(chunk if mask.all() else chunk.filter(arrow_values.from_numpy(mask)))
            start = end
        return pa.chunked_array(pieces, base.add_rows.type)

    def total_size(self) -> int:
        """The sum of the live files' ``size`` (no ``AddFile`` objects are built)."""
        total = sum(sum(map(block.size.__getitem__, rows)) for block, rows in self.changes.live_blocks())
        if self.base is not None and self.base.num_rows:
            import pyarrow.compute as pc

            sizes = self.base.add_field("size")  # (never the stats, which are read when first needed)
            dropped = self._base_rows_changed()
            total += (pc.sum(sizes).as_py() or 0) - (pc.sum(sizes.take(dropped)).as_py() or 0 if dropped else 0)
        return total

    def changed_add_columns(self):
        """The live adds of the JSON commits as (columns, live rows of them), in commit order: a checkpoint
        writes them without ``AddFile`` objects."""
        return self.changes.live_blocks()


NOT_LIVE = object()
_COMPACT_MIN_DEAD = 65_536  # dead rows before the changes are compacted (and only when most rows are dead)
