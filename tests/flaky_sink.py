"""Test-only wrappers of the real lakelog sinks: a streaming commit that fails once (marker file on disk),
and batch tasks whose first attempt fails after writing."""

import os

from spark_ext.datasource.source import LakelogDataSource, LakelogStreamWriter, LakelogWriter


class FlakyStreamWriter(LakelogStreamWriter):
    def commit(self, messages, batchId):
        marker = self.options.get("failMarker")
        if marker and os.path.exists(marker) and int(self.options.get("failBatch", -1)) == batchId:
            os.remove(marker)
            raise RuntimeError(f"injected commit failure at batch {batchId}")
        return super().commit(messages, batchId)


class FlakyLakelog(LakelogDataSource):
    @classmethod
    def name(cls):
        return "lakelog_flaky"

    def streamWriter(self, schema, overwrite):
        return FlakyStreamWriter(self.options, schema, "overwrite" if overwrite else "append")


class FailAfterLastBatchWriter(LakelogWriter):
    """A batch writer whose first attempt of every task fails after the lakelog writer took all its
    batches (its files are open on disk): the input iterator raises where it would end. Before raising
    it records, in option ``markerDir``, which of the attempt's files existed at that moment."""

    def write(self, iterator):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None or ctx.attemptNumber() > 0:
            return super().write(iterator)
        table, marker_dir = self.options["path"], self.options["markerDir"]
        prefix = f"part-{ctx.partitionId():05d}-a0-"

        def batches_then_failure():
            yield from iterator
            opened = sorted(f for f in os.listdir(table) if f.startswith(prefix))
            with open(os.path.join(marker_dir, f"task-{ctx.partitionId()}"), "w") as f:
                f.write("\n".join(opened))
            raise RuntimeError("injected failure after the last batch of the first attempt")

        # The writer buffers rows in memory until a row group fills; with no buffer allowance every batch
        # goes to its file at once, so the attempt's file is on disk when the failure comes.
        import lakelog.write.files

        saved = lakelog.write.files.MAX_BUFFERED_BYTES
        lakelog.write.files.MAX_BUFFERED_BYTES = 1
        try:
            return super().write(batches_then_failure())
        finally:
            lakelog.write.files.MAX_BUFFERED_BYTES = saved


class FailFirstAttemptLakelog(LakelogDataSource):
    @classmethod
    def name(cls):
        return "lakelog_fail_first_attempt"

    def writer(self, schema, overwrite):
        return FailAfterLastBatchWriter(self.options, schema, "overwrite" if overwrite else "append")
