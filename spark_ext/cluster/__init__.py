"""What differs between the processes of a Spark job: table paths resolved on the driver before anything is
shipped (``paths``: each executor runs in its own directory) and the interpreter Spark's Python workers run
(``workers``)."""
