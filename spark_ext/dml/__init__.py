"""Row-level changes run as Spark jobs on lakelog's row-level operations: DELETE and UPDATE and the machinery
MERGE shares (``jobs``), MERGE's clauses and rules (``merge``), its jobs (``merge_jobs``) and change data
feed (``merge_changes``), and what their Spark tasks run (``tasks``)."""
