"""The change data feed of spark_ext.LakelogTable delete, update and merge: every changed row recorded."""

import pyarrow as pa

import lakelog
from spark_ext import LakelogTable


def test_a_spark_merge_on_a_deletion_vector_table_records_changes_in_every_file(spark, tmp_path):
    """Merge-on-read: the changes of a merge were picked per file row index across files, so rows of
    different files at the same position hid each other (a file outside the source's key range, whose
    rows only a not-matched-by-source clause deletes, against one the matched clause updates)."""
    path = str(tmp_path / "t")
    conf = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}
    lakelog.write_table(path, pa.table({"id": [1, 2, 3], "v": [10, 20, 30]}), configuration=conf)
    lakelog.write_table(path, pa.table({"id": [11, 12, 13], "v": [110, 120, 130]}), mode="append")
    source = spark.createDataFrame([(11, 0), (12, 0)], "id long, v long")
    m = (LakelogTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
         .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedBySourceDelete().execute())
    assert (m["num_target_rows_updated"], m["num_target_rows_deleted"]) == (2, 4)
    t = lakelog.Table(path)
    assert sorted((r["id"], r["v"]) for r in t.to_pyarrow().to_pylist()) == [(11, 0), (12, 0)]
    got = sorted((r["_change_type"], r["id"], r["v"]) for r in t.changes(2).to_pylist())
    assert got == [("delete", 1, 10), ("delete", 2, 20), ("delete", 3, 30), ("delete", 13, 130),
                   ("update_postimage", 11, 0), ("update_postimage", 12, 0), ("update_preimage", 11, 110), ("update_preimage", 12, 120)]
