"""How a row-level operation reads its candidate files: one file's rows with their file row indexes
(``ROW``; rows a deletion vector deletes left out), the candidates in bounded groups read in parallel
on the operation's pool, the rest of a file's columns for a rewrite of it, and the dictionary
encodings a rewritten file keeps. ``FileReads`` is a part of ``RowLevelOperation``."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..actions import AddFile, decode_path
from ..schema import arrow_values
from ..read.data_files import physical_rows
from ..table_features.deletion_vectors import check_row_count, keep_mask
from ..storage.parquet_read import parquet_file
from ..read.scan import _data_file_error, partition_values
from ..table_features.column_mapping import ColumnMapping
from ..schema.types import has_variant
from ..schema.partition_values import parse_partition_value
from .file_groups import Group, with_file_index
from .internal_columns import ROW
from .stable_ids import with_stable_ids

GROUP_BYTES = 6 * 1024 * 1024  # data-file bytes scanned at once (only the columns predicates read; 16 MiB: 30% more peak memory, 4% faster)
REWRITE_BYTES = 8 * 1024 * 1024  # data-file bytes read whole at once for rewriting (16 MiB: 20-30% more memory, no faster)


class FileReads:
    """The reading part of ``RowLevelOperation`` (which sets ``snapshot``, ``storage``, ``pool``,
    ``row_tracking``, ``deletion_vectors`` and the dicts filled here)."""

    def read_file(self, add: AddFile, columns: list[str] | None = None, rewrite: bool = False) -> pa.Table:
        """The rows of one data file in the table's schema (partition values as columns, columns the file
        lacks as nulls), in file order, with their file row index in ``ROW``. ``columns``: only these;
        ``rewrite``: the file is being rewritten (its encodings are noted for the new file, as for a whole read)."""
        self.read_files[decode_path(add.path)] = add
        snap = self.snapshot
        schema = snap.schema
        mapping = snap.column_mapping
        names = schema.names if columns is None else [c for c in schema.names if c in columns]
        try:
            with snap.storage.arrow_fs.open_input_file(snap.storage.join(add.relative_path)) as f:
                pf = parquet_file(f, pre_buffer=not snap.storage.is_local)
                # The footer's count: a read of no columns (a predicate on partition columns only, or
                # on none) has no column to count rows by.
                n = pf.metadata.num_rows
                present = set(pf.schema_arrow.names)
                if mapping.active:  # files name columns by physical name (or field id)
                    data_names = [c for c in names if c not in snap.partition_columns]
                    fc = mapping.file_columns(pf.schema_arrow, data_names, add.path)
                    data = pa.table(fc.convert(pf.read(columns=fc.to_read, use_threads=False), schema), names=data_names)
                    present = set(data_names)
                else:
                    data = pf.read(columns=[c for c in names if c in present and c not in snap.partition_columns], use_threads=False)
                tracked = self.row_tracking is not None and columns is None
                if tracked:
                    stored = [c for c in self.row_tracking if c in pf.schema_arrow.names]
                    stored = pf.read(columns=stored, use_threads=False) if stored else None
        except (OSError, pa.ArrowInvalid) as e:
            err = _data_file_error(snap, e)
            if err is None:
                raise
            raise err from None
        if columns is None or rewrite:
            self.dictionary_columns[decode_path(add.path)] = _dictionary_encoded(pf.metadata)
            self._file_columns[decode_path(add.path)] = present
        cols = []
        for name in names:
            t = schema.field(name).type
            if name in snap.partition_columns:
                value = parse_partition_value(partition_values(add, snap.partition_columns, mapping).get(name), t)
                cols.append(pa.repeat(arrow_values.scalar(value, t), n))
            elif name in present:
                col = data.column(name)
                if col.type != t and has_variant(schema.field(name)):
                    # (by field name, shredded variants reassembled: a cast would refuse or drop typed_value)
                    col = ColumnMapping("none", "").file_columns(data.schema, [name], add.path).convert(data, schema)[0]
                cols.append(col if col.type == t else col.cast(t))
            else:
                cols.append(pa.nulls(n, t))
        cols.append(arrow_values.from_numpy(np.arange(n, dtype=np.int64)))
        out = pa.table(cols, schema=pa.schema([schema.field(c) for c in names] + [pa.field(ROW, pa.int64())]))
        if tracked:
            out = with_stable_ids(out, add, stored, self.row_tracking)
        if add.deletion_vector is not None:
            # Rows the file's deletion vector deletes are not rows of the table: never matched, never copied.
            deleted = self.deletion_vectors.rows(add)
            check_row_count(deleted, n, add, snap.storage)
            mask = keep_mask(deleted, 0, n)
            if mask is not None:
                out = out.filter(arrow_values.from_numpy(mask))
        return out

    def scan(self, files: list[AddFile], columns: set[str] | None = None, group_bytes: int | None = None,
             prefetch: bool = True) -> Iterator[Group]:
        """The candidate files in groups of about ``group_bytes`` (default GROUP_BYTES), read in parallel;
        ``columns`` limits the columns read (None: all). ``prefetch``: the next group's reads are queued
        before a group is yielded, ahead of the rewrites the caller then queues, so that the pool need
        not wait for the caller (at the cost of holding two groups)."""
        names = None if columns is None else [c for c in self.snapshot.schema.names if c in columns]
        limit = GROUP_BYTES if group_bytes is None else group_bytes
        bounds = []
        start = 0
        while start < len(files):
            end, size = start, 0
            while end < len(files) and (end == start or size + files[end].size <= limit):
                size += files[end].size
                end += 1
            bounds.append((start, end))
            start = end
        queued: dict[int, list[Future]] = {}

        def queue(k: int) -> None:
            if k < len(bounds) and k not in queued:
                queued[k] = [self.pool.submit(self.read_file, a, names) for a in files[slice(*bounds[k])]]

        for k, (start, end) in enumerate(bounds):
            queue(k)
            if prefetch:
                queue(k + 1)
            try:
                tables = [f.result() for f in queued.pop(k)]
            except BaseException:
                for f in queued.pop(k + 1, []):
                    f.cancel()
                raise
            tables = with_file_index(tables, range(start, end))
            yield Group(files[start:end], start, pa.concat_tables(tables), [t.num_rows for t in tables])

    @staticmethod
    def chunks(files: list[AddFile], indexes: list[int]) -> Iterator[list[int]]:
        """``indexes`` (into ``files``) in runs of about REWRITE_BYTES of data files."""
        run: list[int] = []
        size = 0
        for i in indexes:
            if run and size + files[i].size > REWRITE_BYTES:
                yield run
                run, size = [], 0
            run.append(i)
            size += files[i].size
        if run:
            yield run

    def complete(self, add: AddFile, known: pa.Table | None) -> pa.Table:
        """``read_file(add)``, reading only the columns ``known`` (that file's rows as ``read_file`` gave
        them, with ``ROW``: the columns a predicate read) lacks: a rewrite decodes each column once."""
        if known is None or self.row_tracking is not None:
            return self.read_file(add)
        schema = self.snapshot.schema
        have = set(known.column_names)
        other = self.read_file(add, [c for c in schema.names if c not in have], rewrite=True)
        if other.num_rows != known.num_rows:
            return self.read_file(add)
        columns = [known.column(c) if c in have else other.column(c) for c in schema.names] + [other.column(ROW)]
        return pa.table(columns, schema=pa.schema(list(schema) + [pa.field(ROW, pa.int64())]))

    def read_many(self, adds: list[AddFile], indexes: list[int], columns: list[str] | None = None,
                  known: list[pa.Table] | None = None) -> list[pa.Table]:
        """``read_file`` of several files in parallel, each with its FILE index (``indexes``) as a column;
        ``known``: per file, the columns already read (whole files are then read as ``complete`` does)."""
        if known is not None:
            tables = list(self.pool.map(self.complete, adds, known))
        else:
            tables = list(self.pool.map(lambda a: self.read_file(a, columns), adds))
        return with_file_index(tables, indexes)

    def num_rows(self, add: AddFile) -> int:
        """Live row count of a file (its deletion vector's rows excluded): from its stats, else from its
        Parquet footer."""
        n = add.num_logical_records()
        if n is not None:
            return n
        n = physical_rows(self.storage, add)
        return n if add.deletion_vector is None else max(0, n - add.deletion_vector.cardinality)


def _dictionary_encoded(metadata: pq.FileMetaData) -> list[str]:
    """Leaf columns (Parquet paths) whose chunks were dictionary-encoded throughout (no fallback to
    plain pages): a dictionary page, and under 4 bytes per value (plain values take at least 4: a
    string's length, a 32-bit number)."""
    sizes: dict[str, list[int]] = {}
    for r in range(metadata.num_row_groups):
        rg = metadata.row_group(r)
        for i in range(rg.num_columns):
            c = rg.column(i)
            s = sizes.setdefault(c.path_in_schema, [0, 0, 1])
            s[0] += c.total_uncompressed_size
            s[1] += c.num_values
            s[2] &= int(bool(c.has_dictionary_page))
    return [path for path, (size, n, has_dict) in sizes.items() if has_dict and (n == 0 or size / n < 4)]
