"""Cheat sheet: Spark operator resources."""
import mlrun

spark = mlrun.new_function(name="sparkreadcsv", kind="spark", command="spark_read_csv.py")
spark.with_driver_limits(cpu="1300m")
spark.with_driver_requests(cpu=1, mem="512m")
spark.with_executor_limits(cpu="1400m")
spark.with_executor_requests(cpu=1, mem="512m")
spark.spec.replicas = 2
