"""A test-only wrapper of the real lakelog sink whose commit fails once (marker file on disk)."""

import os

from spark_ext.datasource import LakelogDataSource, LakelogStreamWriter


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
