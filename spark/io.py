"""Reading usage lines and writing tables where the jobs are told to: natively when Hadoop can, else ``ferrymq_s3``.

On EMR (``s3://`` through EMRFS) and anywhere hadoop-aws is on the classpath (``s3a://``), Spark's own
readers and writers are used.  Local PySpark has neither, so S3 URLs go through the Python Data Source in
:mod:`ferrymq.spark.datasource`, which uses boto3 and the endpoint from FerryMQ's settings.  Local paths always use
Spark's own file sources.

Small outputs (CSV invoices, the HTML report) are written by the driver through :class:`ferrymq.spark.storage.Store`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ferrymq.spark.storage import Location, Store

# The Python Data Source (pyspark.sql.datasource, PySpark 4) is imported only where it is used: EMR releases
# with Spark 3.5 have no such module and never need it, as they read s3:// natively.
NAME = "ferrymq_s3"


def has_filesystem(spark: SparkSession, scheme: str) -> bool:
    """Whether Hadoop in this session can open ``scheme://`` URLs (EMRFS, s3a) by itself."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
        return True
    except Exception:  # py4j raises its own wrapper of the Java exception
        return False


@dataclass
class Io:
    spark: SparkSession
    endpoint_url: str | None = None
    region: str | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __post_init__(self) -> None:
        self.store = Store(self.endpoint_url, self.region)
        self._native: dict[str, bool] = {}
        self._registered = False

    def _source(self) -> str:
        if not self._registered:
            from ferrymq.spark.datasource import S3DataSource

            self.spark.dataSource.register(S3DataSource)
            self._registered = True
        return NAME

    def native(self, url: str) -> bool:
        scheme = url.split("://", 1)[0] if "://" in url else "file"
        if scheme == "file":
            return True
        if scheme not in self._native:
            self._native[scheme] = has_filesystem(self.spark, scheme)
        return self._native[scheme]

    def _options(self, url: str, fmt: str) -> dict[str, str]:
        options = {"url": url, "format": fmt, "run_id": self.run_id}
        if self.endpoint_url:
            options["endpoint_url"] = self.endpoint_url
            # A named endpoint is a local S3 (the stand-in, LocalStack): hand its credentials on, since the
            # data source's Python processes inherit the environment the JVM started with, not the driver's.
            options.update(self._credentials())
        if self.region:
            options["region"] = self.region
        return options

    def _credentials(self) -> dict[str, str]:
        import boto3

        found = boto3.session.Session().get_credentials()
        if found is None:
            return {}
        frozen = found.get_frozen_credentials()
        options = {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key}
        if frozen.token:
            options["session_token"] = frozen.token
        return options

    def read_lines(self, urls: list[str]) -> DataFrame:
        """Rows ``(source, value)``: every text line of every object under each URL (gzip decompressed)."""
        frames = []
        for url in urls:
            if not self.exists(url):
                continue
            if self.native(url):
                frame = self.spark.read.text(url if "://" in url else Location.parse(url).url, recursiveFileLookup=True)
                frame = frame.select(F.col("_metadata.file_path").alias("source"), "value")
            else:
                frame = self.spark.read.format(self._source()).options(**self._options(url, "lines")).load()
            frames.append(frame.where(F.trim("value") != ""))
        if not frames:
            return self.spark.createDataFrame([], "source string, value string")
        result = frames[0]
        for frame in frames[1:]:
            result = result.unionByName(frame)
        return result

    def exists(self, url: str) -> bool:
        return next(iter(self.store.list(Location.parse(url))), None) is not None

    def write_table(self, frame: DataFrame, url: str) -> None:
        """Replace the Parquet table at ``url`` (one date's partition) with ``frame``."""
        if self.native(url):
            frame.write.mode("overwrite").parquet(url)
        else:
            frame.write.format(self._source()).options(**self._options(url, "parquet")).mode("overwrite").save()

    def read_table(self, url: str) -> DataFrame:
        if self.native(url):
            return self.spark.read.parquet(url)
        return self.spark.read.format(self._source()).options(**self._options(url, "parquet")).load()

    def write_object(self, url: str, body: bytes, content_type: str) -> str:
        where = Location.parse(url)
        self.store.write(where, where.key, body, content_type)
        return where.url
