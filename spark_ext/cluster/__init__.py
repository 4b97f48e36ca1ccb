"""What differs between the processes of a Spark job: table paths resolved on the driver before anything is
shipped (``paths``: each executor runs in its own directory), the interpreter Spark's Python workers run
(``workers``), and what each task writes by (``tasks``: file names and identity values by partition)."""
