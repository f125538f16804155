"""Where a home's files live, named by URI, and the checkpoint's side files read and written through Hadoop's
FileSystem (as Spark reads and writes the checkpoint itself), never with Python's ``open``.

A home is a plain path or a URI: ``file:///shared/sj``, ``hdfs://nn/sj``, ``s3a://bucket/sj``, whatever
Hadoop's FileSystem resolves in the session's Hadoop configuration. Checkpoints live under it as given. The
embedded topic store is Python's own files, so it needs a local (or ``file://``) home; on another store,
topics live on Kafka.
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Optional
from urllib.parse import urlparse

from ..errors import StreamjoinError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def is_uri(location: str) -> bool:
    """``location`` names a scheme (a one-letter scheme is a Windows drive, not a URI)."""
    return len(urlparse(location).scheme) > 1


def home_location(home: str) -> str:
    """A home as a query's files are named under it: a URI as given (no trailing slash), a path made absolute."""
    return home.rstrip("/") if is_uri(home) else os.path.abspath(home)


def under(location: str, *names: str) -> str:
    """``names`` under a home or checkpoint location (a URI joins with '/', as Hadoop reads it)."""
    return "/".join([location.rstrip("/"), *names]) if is_uri(location) else os.path.join(location, *names)


def local_path(location: str) -> Optional[str]:
    """The local path of a plain path or ``file://`` URI; None for a location on another store."""
    url = urlparse(location)
    if not is_uri(location):
        return location
    return url.path if url.scheme == "file" else None


class StorageError(StreamjoinError):
    """A home or checkpoint file that cannot be used as asked."""


def embedded_root(home: str) -> str:
    """Where a home's embedded topics live: a local directory."""
    path = local_path(home)
    if path is None:
        raise StorageError(f"the embedded topics need a local or file:// home, and {home} is on another store: "
                           "keep topics on Kafka (--bootstrap-servers) with a home there, or use a shared "
                           "file system mounted on every machine (file://)")
    return os.path.join(path, "topics")


# ------------------------------------------------------------------ Hadoop's FileSystem

_IMPORTED: set[int] = set()  # the JVM views the classes below were imported into


def jvm(spark: "SparkSession"):
    """The JVM view, with Hadoop's ``Path`` and commons-io's ``IOUtils`` imported once: Py4J resolves
    ``jvm.org.apache.hadoop.fs.Path`` by trying each prefix (``org``, ``org.apache``, ...) as a class, and a class
    not found is searched for in every jar on the class path (seen as a few percent of the JVM's time)."""
    view = spark._jvm
    if id(view) not in _IMPORTED:
        from py4j.java_gateway import java_import

        for name in ("org.apache.hadoop.fs.Path", "org.apache.commons.io.IOUtils",
                     "org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager"):
            java_import(view, name)
        _IMPORTED.add(id(view))
    return view


def filesystem(spark: "SparkSession", location: str, *child: str):
    """Hadoop's FileSystem for a location, and the location's Hadoop path (or that of ``child`` under it)."""
    path = jvm(spark).Path(location)
    for name in child:
        path = jvm(spark).Path(path, name)
    return path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf()), path


def read_json(spark: "SparkSession", location: str, *child: str) -> Optional[dict]:
    """The JSON file at ``location`` (or ``child`` under it); None when there is none."""
    fs, path = filesystem(spark, location, *child)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        return json.loads(jvm(spark).IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def write_json(spark: "SparkSession", value: dict, location: str, *child: str) -> None:
    """Write a new JSON file at ``location`` (or ``child`` under it) whole or not at all, as Spark writes its
    offset log: through its checkpoint file manager, which writes aside and renames where the store renames
    atomically, and writes in place where the store's writes are atomic themselves (object stores). Like
    Spark's logs, a file is never overwritten (a rename does not replace a file): a value that changes is
    written under a new name (``Versions``)."""
    _, path = filesystem(spark, location, *child)
    _write_atomic(_file_manager(spark, path.getParent()), path, value)


def _file_manager(spark: "SparkSession", folder):
    return jvm(spark).CheckpointFileManager.create(folder, spark._jsparkSession.sessionState().newHadoopConf())


def _write_atomic(manager, path, value: dict) -> None:
    out = manager.createAtomic(path, False)
    try:
        out.write(json.dumps(value).encode())
    except Exception:
        out.cancel()
        raise
    out.close()


class Versions:
    """A value kept as numbered JSON files in a folder (``<folder>/<n>.json``), as Spark keeps its logs: a new
    version is a new file, the newest wins, and older ones are deleted after it is in place, so a crash at any
    moment leaves the last whole version readable.

    One instance is meant to serve a folder for as long as its one writer runs (a query's sink function writes a
    version per micro-batch): it makes the folder's file system and file manager once, lists the folder once, and
    from then on knows which versions it holds. Each ``newHadoopConf`` copies the session's whole Hadoop
    configuration; made anew for every file, they were most of the ~60 ms a version took to write here."""

    def __init__(self, spark: "SparkSession", location: str, folder: str):
        self.spark, self.location, self.folder = spark, location, folder
        self._fs = self._path = self._manager = None
        self._held: Optional[list[int]] = None  # the version numbers in the folder, once listed

    def _folder(self):
        if self._fs is None:
            self._fs, self._path = filesystem(self.spark, self.location, self.folder)
        return self._fs, self._path

    def _numbers(self) -> list[int]:
        if self._held is None:
            fs, path = self._folder()
            names = [status.getPath().getName() for status in fs.listStatus(path)] if fs.exists(path) else []
            self._held = sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())
        return self._held

    def latest(self) -> Optional[dict]:
        numbers = self._numbers()
        return read_json(self.spark, self.location, self.folder, f"{numbers[-1]}.json") if numbers else None

    def write(self, number: int, value: dict) -> None:
        """Add version ``number`` (above every version there is), then drop the older ones."""
        older = self._numbers()
        fs, folder = self._folder()
        if self._manager is None:
            self._manager = _file_manager(self.spark, folder)
        path = jvm(self.spark).Path(folder, f"{number}.json")
        _write_atomic(self._manager, path, value)
        self._held = [number]
        for n in older:
            fs.delete(jvm(self.spark).Path(folder, f"{n}.json"), False)


def delete(spark: "SparkSession", location: str) -> bool:
    """Delete ``location`` and everything under it; whether there was anything."""
    fs, path = filesystem(spark, location)
    return bool(fs.exists(path) and fs.delete(path, True))
