"""Reading usage lines and writing tables where the jobs are told to: natively when Hadoop can, else ``ferrymq_s3``.

On EMR (``s3://`` through EMRFS) and anywhere hadoop-aws is on the classpath (``s3a://``), Spark's own
readers and writers are used.  Local PySpark has neither, so S3 URLs go through the Python Data Source in
:mod:`ferrymq.spark.datasource`, which uses boto3 and the endpoint from FerryMQ's settings.  Local paths always use
Spark's own file sources.

Small inputs (a small day's usage objects) are fetched, and small outputs (every aggregate table, the CSV invoices,
the HTML report) written, by the driver through :class:`ferrymq.spark.storage.Store`: on a day of a few thousand
records, a Spark job per object or per shuffle partition costs far more than the data.
"""

from __future__ import annotations

import io
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from ferrymq.spark.storage import Location, Store, is_data, text_lines

# The Python Data Source (pyspark.sql.datasource, PySpark 4) is imported only where it is used: EMR releases
# with Spark 3.5 have no such module and never need it, as they read s3:// natively.
NAME = "ferrymq_s3"
LINES_SCHEMA = StructType([StructField("source", StringType()), StructField("value", StringType())])
BATCH_BYTES = 8 * 1024 * 1024
"""Usage objects (compressed) up to this many bytes in all are fetched by the driver; more go through Spark."""
DRIVER_ROWS = 200_000
"""Output tables up to this many rows are collected and written by the driver as one object."""
FETCH_THREADS = 8


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
    spark: SparkSession | None
    """None for a job that needs no Spark job (the report): everything it does goes through :attr:`store`."""
    endpoint_url: str | None = None
    region: str | None = None
    batch_bytes: int = BATCH_BYTES
    driver_rows: int = DRIVER_ROWS
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __post_init__(self) -> None:
        self.store = Store(self.endpoint_url, self.region)
        self._native: dict[str, bool] = {}
        self._registered = False

    @property
    def session(self) -> SparkSession:
        if self.spark is None:
            raise RuntimeError("this job's I/O was built without a Spark session")
        return self.spark

    def _source(self) -> str:
        if not self._registered:
            from ferrymq.spark.datasource import S3DataSource

            self.session.dataSource.register(S3DataSource)
            self._registered = True
        return NAME

    def native(self, url: str) -> bool:
        scheme = url.split("://", 1)[0] if "://" in url else "file"
        if scheme == "file":
            return True
        if scheme not in self._native:
            self._native[scheme] = has_filesystem(self.session, scheme)
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
        """Rows ``(source, value)``: every non-blank text line of every object under each URL (gzip decompressed).

        Local paths and filesystems Hadoop has are read by Spark in one scan.  Other S3 URLs are listed once by
        the driver: up to ``batch_bytes`` of objects are fetched by the driver in one batch (a small day costs a
        few requests, not a Python task per object per action), a larger input through ``ferrymq_s3``.
        """
        native = [u for u in urls if self.native(u) and self.exists(u)]
        remote = [u for u in urls if not self.native(u)]
        frames = []
        if native:
            paths = [u if "://" in u else Location.parse(u).url for u in native]
            frame = self.session.read.text(paths, recursiveFileLookup=True)
            frames.append(frame.select(F.col("_metadata.file_path").alias("source"), "value"))
        if remote:
            objects = [(url, key, size) for url in remote for key, size in self.store.sizes(Location.parse(url))
                       if is_data(key, "lines")]
            if sum(size for _, _, size in objects) <= self.batch_bytes:
                frames.append(self._fetch_lines([(url, key) for url, key, _ in objects]))
            else:
                options = {**self._options(remote[0], "lines"), "urls": "\n".join(remote)}
                frames.append(self.session.read.format(self._source()).options(**options).load())
        if not frames:
            return self.session.createDataFrame([], LINES_SCHEMA)
        result = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
        return result.where(F.trim("value") != "")

    def _fetch_lines(self, objects: list[tuple[str, str]]) -> DataFrame:
        import pyarrow as pa

        def fetch(url_key: tuple[str, str]) -> list[str]:
            url, key = url_key
            return list(text_lines(key, self.store.read(Location.parse(url), key)))

        with ThreadPoolExecutor(FETCH_THREADS) as pool:
            bodies = list(pool.map(fetch, objects))
        sources = [key for (_, key), lines in zip(objects, bodies, strict=True) for _ in lines]
        values = [line for lines in bodies for line in lines]
        table = pa.table({"source": pa.array(sources, pa.string()), "value": pa.array(values, pa.string())})
        return self.session.createDataFrame(table) if values else self.session.createDataFrame([], LINES_SCHEMA)

    def exists(self, url: str) -> bool:
        return next(iter(self.store.list(Location.parse(url))), None) is not None

    def write_table(self, frame: DataFrame, url: str) -> Any:
        """Replace the Parquet table at ``url`` (one date's partition) with ``frame``; the rows as an Arrow table
        when there were at most ``driver_rows`` of them, else None.

        A table that small (every aggregate of a day, most days' quarantine) is collected in one action and
        written by the driver as one object: no Spark write job, no Python task per shuffle partition.
        """
        import pyarrow.parquet as pq

        table = frame.limit(self.driver_rows + 1).toArrow()
        if table.num_rows > self.driver_rows:
            if self.native(url):
                frame.write.mode("overwrite").parquet(url)
            else:
                frame.write.format(self._source()).options(**self._options(url, "parquet")).mode("overwrite").save()
            return None
        where = Location.parse(url)
        written = set()
        if table.num_rows:
            sink = io.BytesIO()
            pq.write_table(table, sink, compression="snappy")
            key = where.child(f"part-00000-{self.run_id}.parquet").key
            self.store.write(where, key, sink.getvalue())
            written.add(key)
        self.store.replace_prefix(where, written)
        return table

    def read_rows(self, url: str) -> list[dict[str, Any]]:
        """Every row of the Parquet table at ``url``, read by the driver (for the report's few hundred rows)."""
        import pyarrow.parquet as pq

        where = Location.parse(url)
        rows: list[dict[str, Any]] = []
        for key in self.store.list(where):
            if is_data(key, "parquet"):
                rows += pq.read_table(io.BytesIO(self.store.read(where, key))).to_pylist()
        return rows

    def write_object(self, url: str, body: bytes, content_type: str) -> str:
        where = Location.parse(url)
        self.store.write(where, where.key, body, content_type)
        return where.url
