import os, sys, time, shutil
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
from pyspark.sql import SparkSession
t0=time.time()
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled","false").config("spark.sql.session.timeZone","UTC")
         .config("spark.sql.shuffle.partitions","2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
print("start", time.time()-t0)
import spark_ext, lakelog
spark_ext.register(spark)
p = "/tmp/v2spark"; shutil.rmtree(p, ignore_errors=True)
df = spark.sql("""select id, parse_json(format_string('{"key": %s, "arr": [1, "x", null]}', id)) as v from range(3)""")
print(df.schema)
try:
    df.write.format("lakelog").save(p)
    print("written", lakelog.Table(p).protocol, lakelog.Table(p).to_pandas())
except Exception as e:
    print("WRITE FAIL", type(e).__name__, str(e)[:2000])
try:
    r = spark.read.format("lakelog").load(p)
    print(r.schema); print(r.selectExpr("id", "to_json(v)", "v:key").collect())
except Exception as e:
    print("READ FAIL", type(e).__name__, str(e)[:3000])
# lakelog writes, spark reads
q = "/tmp/v2spark2"; shutil.rmtree(q, ignore_errors=True)
lakelog.write_table(q, lakelog.with_variants({"id": [1, 2], "v": ['{"a": [1, 2.5]}', None]}, ["v"]))
try:
    print(spark.read.format("lakelog").load(q).selectExpr("id", "to_json(v)").collect())
except Exception as e:
    print("READ2 FAIL", type(e).__name__, str(e)[:3000])
