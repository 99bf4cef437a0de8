"""Objects under a URL, for the driver and the Python Data Source's tasks: S3 through boto3, or a local directory.

A URL is ``s3://bucket/prefix``, ``s3a://bucket/prefix`` or a local path (``file://`` or plain).  S3 calls
go to the endpoint boto3 finds (``AWS_ENDPOINT_URL``, as everywhere in FerryMQ) unless one is given.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

S3_SCHEMES = ("s3", "s3a", "s3n")


@dataclass(frozen=True, slots=True)
class Location:
    scheme: str  # "s3" or "file"
    bucket: str  # empty for files
    key: str  # prefix inside the bucket, or an absolute path; never with a trailing slash

    @classmethod
    def parse(cls, url: str) -> Location:
        parts = urlsplit(url)
        if parts.scheme in S3_SCHEMES:
            return cls("s3", parts.netloc, parts.path.strip("/"))
        path = parts.path if parts.scheme == "file" else url
        return cls("file", "", str(Path(path).absolute()).rstrip("/"))

    def child(self, *names: str) -> Location:
        key = "/".join(n.strip("/") for n in (self.key, *names) if n)
        return Location(self.scheme, self.bucket, key if self.scheme == "s3" else "/" + key.lstrip("/"))

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}" if self.scheme == "s3" else self.key


class Store:
    """List, read, write and delete the objects under locations of one scheme."""

    def __init__(self, endpoint_url: str | None = None, region: str | None = None,
                 credentials: dict[str, str] | None = None) -> None:
        self._endpoint = endpoint_url
        self._region = region
        self._credentials = credentials or {}
        self._client: Any = None

    def _s3(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.session.Session(
                aws_access_key_id=self._credentials.get("access_key_id"),
                aws_secret_access_key=self._credentials.get("secret_access_key"),
                aws_session_token=self._credentials.get("session_token"),
            ).client(
                "s3", endpoint_url=self._endpoint, region_name=self._region or os.environ.get("AWS_DEFAULT_REGION"),
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 5, "mode": "standard"}),
            )
        return self._client

    def list(self, where: Location) -> Iterator[str]:
        """Object keys (or file paths) under ``where``, in name order."""
        return (key for key, _ in self.sizes(where))

    def sizes(self, where: Location) -> Iterator[tuple[str, int]]:
        """(key or file path, size in bytes) of every object under ``where``, in name order."""
        if where.scheme == "file":
            root = Path(where.key)
            if root.is_dir():
                yield from sorted((str(p), p.stat().st_size) for p in root.rglob("*") if p.is_file())
            return
        paginator = self._s3().get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=where.bucket, Prefix=where.key + "/"):
            for item in page.get("Contents", ()):
                yield item["Key"], item["Size"]

    def read(self, where: Location, key: str) -> bytes:
        if where.scheme == "file":
            return Path(key).read_bytes()
        return self._s3().get_object(Bucket=where.bucket, Key=key)["Body"].read()

    def write(self, where: Location, key: str, body: bytes, content_type: str = "application/octet-stream") -> None:
        if where.scheme == "file":
            path = Path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(body)
            tmp.replace(path)
            return
        self._s3().put_object(Bucket=where.bucket, Key=key, Body=body, ContentType=content_type)

    def delete(self, where: Location, keys: list[str]) -> None:
        if where.scheme == "file":
            for key in keys:
                Path(key).unlink(missing_ok=True)
            return
        for start in range(0, len(keys), 1000):
            chunk = keys[start:start + 1000]
            self._s3().delete_objects(Bucket=where.bucket, Delete={"Objects": [{"Key": k} for k in chunk]})

    def replace_prefix(self, where: Location, written: set[str]) -> None:
        """Delete every object under ``where`` that is not in ``written``: what makes a rerun an overwrite."""
        self.delete(where, [k for k in self.list(where) if k not in written])


def is_data(key: str, fmt: str) -> bool:
    """Whether ``key`` is an object a reader of ``fmt`` (``lines`` or ``parquet``) takes, not a marker or a
    temporary file."""
    name = key.rsplit("/", 1)[-1]
    if name.startswith((".", "_")) or name.endswith(".tmp"):
        return False
    return name.endswith(".parquet") if fmt == "parquet" else True


def text_lines(key: str, body: bytes) -> Iterator[str]:
    """The non-blank lines of an object, gzip decompressed for ``.gz``.  One that cannot be decompressed yields
    one line saying so, so the parser quarantines it rather than losing it silently."""
    if key.endswith(".gz"):
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error) as exc:
            yield f"<object {key} could not be decompressed: {exc}>"
            return
    for line in body.decode("utf-8", "replace").splitlines():
        if line.strip():
            yield line
