"""The SparkSession of a job: whatever ``spark-submit`` (EMR) configured, or a small local one."""

from __future__ import annotations

import os
import sys

from pyspark import SparkConf
from pyspark.sql import SparkSession

LOCAL_DEFAULTS = {
    # Few shuffle partitions: a day of one deployment's usage is small, and 200 tasks of nothing cost seconds.
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # The heap grows only as needed; a day of 10 million records needs about this much for its caches.
    "spark.driver.memory": "6g",
}


def build(app_name: str, master: str | None = None) -> SparkSession:
    """A session for ``app_name``: under spark-submit as submitted, otherwise ``local[2]`` with small settings.

    Python workers must run this interpreter (the Python Data Source imports this project and boto3), so
    ``PYSPARK_PYTHON`` defaults to it.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    submitted = SparkConf().contains("spark.master")
    if master or not submitted:
        builder = builder.master(master or "local[2]")
        for key, value in LOCAL_DEFAULTS.items():
            builder = builder.config(key, value)
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
