"""``ferrymq_s3``: a PySpark Python Data Source that reads and writes S3 through boto3.

Local PySpark ships no hadoop-aws, so ``s3a://`` has no filesystem here; EMR reads ``s3://`` natively and
never uses this.  It is chosen by :mod:`ferrymq.spark.io` when Hadoop has no filesystem for the URL's scheme.

Reading (``spark.read.format("ferrymq_s3")``), one input partition per object under ``url``:

- ``format=lines``: rows ``(source, value)``, one per text line, gzip decompressed for ``.gz`` objects.  An
  object that cannot be decompressed yields one row whose value says so, so the parser quarantines it rather
  than losing it silently.
- ``format=parquet``: the objects' rows, schema taken from the first object unless one is given.

Writing (``df.write.format("ferrymq_s3").mode("overwrite")``): each task writes its rows as one Parquet
object ``<url>/part-<partition>-<run id>.parquet``; the commit then deletes every other object under ``url``,
so a rerun replaces the partition it writes and nothing else, and readers never see it empty in between.

Options (Spark lower-cases their names): ``url`` (or ``urls``, one a line, read as one frame), ``format``,
``endpoint_url``, ``region``, ``run_id``, and for a local S3 only (the stand-in, LocalStack) ``access_key_id``,
``secret_access_key``, ``session_token``.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ferrymq.spark.storage import Location, Store, is_data, text_lines

NAME = "ferrymq_s3"
LINES_SCHEMA = StructType([StructField("source", StringType()), StructField("value", StringType())])


_stores: dict[tuple[str | None, ...], Store] = {}
_CREDENTIAL_OPTIONS = ("access_key_id", "secret_access_key", "session_token")


def _store(options: dict[str, str]) -> Store:
    # One per Python worker process (Spark reuses them across tasks): a boto3 client costs ~0.1-0.3 s to build,
    # more than reading one usage object.
    credentials = {k: options[k] for k in _CREDENTIAL_OPTIONS if options.get(k)}
    key = (options.get("endpoint_url") or None, options.get("region") or None,
           *(credentials.get(k) for k in _CREDENTIAL_OPTIONS))
    if key not in _stores:
        _stores[key] = Store(key[0], key[1], credentials)
    return _stores[key]


class _ObjectPartition(InputPartition):
    def __init__(self, url: str, key: str) -> None:
        super().__init__(key)
        self.url = url
        self.key = key


def _urls(options: dict[str, str]) -> list[str]:
    # ``urls`` (one a line) reads many prefixes as one frame: a month is one scan, not a union of 31.
    return options["urls"].splitlines() if options.get("urls") else [options["url"]]


class _Reader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self._options = options
        self._schema = schema

    def partitions(self) -> list[InputPartition]:
        fmt = self._options.get("format", "lines")
        store = _store(self._options)
        return [_ObjectPartition(url, key) for url in _urls(self._options)
                for key in store.list(Location.parse(url)) if is_data(key, fmt)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, _ObjectPartition)
        where = Location.parse(partition.url)
        body = _store(self._options).read(where, partition.key)
        if self._options.get("format", "lines") == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(io.BytesIO(body)).select([f.name for f in self._schema.fields])
            yield from table.to_batches()
            return
        yield from ((partition.key, line) for line in text_lines(partition.key, body))


@dataclass
class _Written(WriterCommitMessage):
    key: str | None


class _Writer(DataSourceWriter):
    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self._options = options
        self._schema = schema
        self._overwrite = overwrite

    def write(self, iterator: Iterator[Any]) -> _Written:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        rows = [row.asDict() for row in iterator]
        if not rows:
            return _Written(None)
        table = pa.Table.from_pylist(rows, schema=arrow_schema(self._schema))
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="snappy")
        context = TaskContext.get()
        part = context.partitionId() if context is not None else 0
        where = Location.parse(self._options["url"])
        key = where.child(f"part-{part:05d}-{self._options['run_id']}.parquet").key
        _store(self._options).write(where, key, sink.getvalue())
        return _Written(key)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self._overwrite:
            written = {m.key for m in messages if isinstance(m, _Written) and m.key}
            _store(self._options).replace_prefix(Location.parse(self._options["url"]), written)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        keys = [m.key for m in messages if isinstance(m, _Written) and m.key]
        _store(self._options).delete(Location.parse(self._options["url"]), keys)


class S3DataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType | str:
        if self.options.get("format", "lines") != "parquet":
            return LINES_SCHEMA
        import pyarrow.parquet as pq

        where = Location.parse(self.options["url"])
        store = _store(self.options)
        for key in store.list(where):
            if is_data(key, "parquet"):
                return spark_schema(pq.read_schema(io.BytesIO(store.read(where, key))))
        raise FileNotFoundError(f"no Parquet objects under {where.url}")

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _Writer(self.options, schema, overwrite)


# --- type mapping between Spark and Arrow, for the types the jobs write ----------------------------------------


def _arrow_type(spark_type: DataType) -> Any:
    import pyarrow as pa

    mapping: dict[type, Any] = {
        StringType: pa.string(), LongType: pa.int64(), IntegerType: pa.int32(), DoubleType: pa.float64(),
        BooleanType: pa.bool_(), DateType: pa.date32(), TimestampType: pa.timestamp("us", tz="UTC"),
    }
    if isinstance(spark_type, DecimalType):
        return pa.decimal128(spark_type.precision, spark_type.scale)
    for kind, arrow in mapping.items():
        if isinstance(spark_type, kind):
            return arrow
    raise TypeError(f"{NAME} cannot write {spark_type.simpleString()} columns")


def arrow_schema(schema: StructType) -> Any:
    import pyarrow as pa

    return pa.schema([pa.field(f.name, _arrow_type(f.dataType), f.nullable) for f in schema.fields])


def spark_schema(schema: Any) -> StructType:
    import pyarrow as pa

    def convert(arrow: Any) -> DataType:
        if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
            return StringType()
        if pa.types.is_int64(arrow):
            return LongType()
        if pa.types.is_integer(arrow):
            return IntegerType()
        if pa.types.is_floating(arrow):
            return DoubleType()
        if pa.types.is_boolean(arrow):
            return BooleanType()
        if pa.types.is_date(arrow):
            return DateType()
        if pa.types.is_timestamp(arrow):
            return TimestampType()
        if pa.types.is_decimal(arrow):
            return DecimalType(arrow.precision, arrow.scale)
        raise TypeError(f"{NAME} cannot read {arrow} columns")

    return StructType([StructField(f.name, convert(f.type), f.nullable) for f in schema])
