"""spark on this machine: pyspark's local mode, its executors and memory from the function."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from runplane.service.embedded import EmbeddedService
from runplane.spec import Function
from runplane.spec.run_options import RunOptions

WORDCOUNT = """
def count(context, path: str):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("wordcount").getOrCreate()
    sc = spark.sparkContext
    counts = dict(
        sc.textFile(path, minPartitions=2)
        .flatMap(lambda line: line.split())
        .map(lambda word: (word, 1))
        .reduceByKey(lambda a, b: a + b)
        .collect()
    )
    context.log_result("master", sc.master)
    context.log_result("driver_memory", sc.getConf().get("spark.driver.memory"))
    context.log_result("executors", sc.getConf().get("spark.executor.instances"))
    spark.stop()
    return {"counts": counts}
"""


def test_word_count_with_two_executors(
    make_function: Callable[..., Function], service: EmbeddedService, tmp_path: Path
):
    words = tmp_path / "words.txt"
    words.write_text("the cat\nthe dog and the cat\n")
    fn = make_function(WORDCOUNT, handler="count", name="wordcount", kind="spark")
    fn.spec.replicas = 2
    fn.with_driver_limits(mem="1Gi").with_executor_limits(mem="512Mi", cpu=1)
    record = service.wait(
        service.submit(fn, RunOptions(params={"path": str(words)})).uid, timeout=240
    )
    assert record.state == "completed", (record.status_text, service.logs(record.uid)[0][-3000:])
    counts = {"the": 3, "cat": 2, "dog": 1, "and": 1}
    assert record.results == {
        "counts": counts,
        "return": {"counts": counts},  # what the handler returned, whole, as MLRun records it
        "master": "local[2]",  # two executors, one core each, in local mode
        "driver_memory": "1228m",  # 60% of the run's 2Gi: driver 1Gi + 2 x 512Mi
        "executors": "2",
    }
    # The record shows an executor's resources, as the rendered application's lints do.
    assert record.limits == {"memory": "512Mi", "cpu": "1"}
