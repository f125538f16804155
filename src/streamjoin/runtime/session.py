"""Building the SparkSession streamjoin runs on, and registering its data sources."""
from __future__ import annotations

import os
import shutil
import sys
from typing import Optional

from pyspark.sql import SparkSession

from .storage import filesystem

_REGISTERED: set[int] = set()

DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # Checkpoint files through Hadoop's FileSystem API rather than FileContext. A pip-installed PySpark has no
    # native Hadoop library, and FileContext's rename then asks for the file's link status by running a
    # `readlink` process (seen in a JFR recording). Writing one checkpoint file took ~40 ms that way and
    # ~12 ms this way; the offset and commit logs took ~110 ms of every micro-batch. Each file is still
    # written aside and renamed into place.
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
    ),
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # PySpark's DataFrame debugging records the Python call site of every Column operation in the JVM (an active
    # session lookup, a conf read and two more Py4J calls per operation): most of the ~3,400 Py4J round trips a
    # join query's lowering made, 0.3 s of its 0.85 s start here. streamjoin's errors name SQL lines, not these.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Spark talks to its Python workers (data source reads, mapInArrow, transformWithStateInPandas) over loopback
    # TCP by default, and every Python task waited ~40 ms on it (a TCP delayed acknowledgement: the JVM
    # idle, the worker blocked reading its first message). Over a Unix domain socket a one-record mapInArrow
    # job took 70 ms instead of 110, and a join's result showed ~25% sooner (``benchmarks/run.py latency``).
    "spark.python.unix.domain.socket.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.timeType.enabled": "true",  # SQL's TIME (ksqlDB's and Flink's columns of that type); off by default
    "spark.executorEnv.PYTHONWARNINGS": "ignore::FutureWarning",
    # Every micro-batch is a SQL execution with jobs, stages and tasks, and the driver keeps the last 1,000 of each
    # (100,000 tasks) with their plans for its status pages: a long-running script's heap fills with history.
    "spark.sql.ui.retainedExecutions": "100",
    "spark.ui.retainedJobs": "200",
    "spark.ui.retainedStages": "200",
    "spark.ui.retainedTasks": "20000",
}


def require_java() -> None:
    """Fail with a plain message when no Java runtime is on the PATH (PySpark needs Java 17+)."""
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise RuntimeError(
            "streamjoin needs a Java 17+ runtime for Spark, and none was found. "
            "Install one (e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME."
        )


def build_session(master: Optional[str] = None, app_name: str = "streamjoin", conf: Optional[dict] = None) -> SparkSession:
    """A SparkSession with streamjoin's defaults (few shuffle partitions, RocksDB state, UTC). On one machine
    (a ``local`` master) Spark binds to the loopback address and its Python workers run this interpreter; on a
    cluster both are the deployment's to say (``SPARK_LOCAL_IP``, ``PYSPARK_PYTHON``, as for any PySpark job):
    executors on other hosts must reach the driver, and run a Python of their own, to which streamjoin's code is
    shipped (``package_zip``)."""
    require_java()
    master = master or os.environ.get("STREAMJOIN_MASTER", "local[2]")
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # pandas warns inside PySpark's own worker code when a group's output has an all-null column
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    use_worker_site()
    shipped = None if master.startswith("local") else package_zip()
    if shipped is not None:  # the Python processes Spark starts on the driver's host (a source's planner) import it too
        _on_python_path(shipped)
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    write_local_files_without_checksums(spark)
    if shipped is not None:
        spark.sparkContext.addPyFile(shipped)
    register_sources(spark)
    return spark


def write_local_files_without_checksums(spark: SparkSession) -> None:
    """Checkpoint files on a local disk are written without Hadoop's checksum files (``.<name>.crc``), as Spark's
    default checkpoint manager (FileContext-based, not used here: see ``DEFAULT_CONF``) writes them. A pip-installed
    PySpark has no native Hadoop library, so the local file system sets each new file's permissions by running a
    ``chmod`` process, once for the file and once for its checksum file: ~10 ms a checkpoint file, ~5.7 ms without
    the checksum file, and every micro-batch writes several (offset and commit logs, each state store's changelog,
    the query's counts). Set on the file system instance Hadoop caches for ``file:`` URIs in this JVM (the driver,
    and on a ``local`` master its tasks too); a file that is written anew drops its stale checksum file."""
    local, _ = filesystem(spark, "file:///")
    local.setWriteChecksum(False)


def package_zip() -> str:
    """streamjoin's own code as a zip that Spark ships to every executor and puts on its Python path: a
    cluster's workers need PySpark and streamjoin's dependencies (pyarrow, pandas, numpy, the Kafka and
    database clients), not streamjoin itself, so a new version runs without reinstalling the workers. Made once
    per driver process, from the package this process imported."""
    global _PACKAGE_ZIP
    if _PACKAGE_ZIP is None:
        import tempfile
        import zipfile

        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.path.join(tempfile.mkdtemp(prefix="streamjoin-ship-"), "streamjoin.zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
            for folder, dirs, files in os.walk(package):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                for name in files:
                    full = os.path.join(folder, name)
                    out.write(full, os.path.relpath(full, os.path.dirname(package)))
        _PACKAGE_ZIP = path
    return _PACKAGE_ZIP


_PACKAGE_ZIP: Optional[str] = None


WORKER_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_site")


def use_worker_site() -> None:
    """Python processes started by Spark import PySpark's compiled installed files rather than its source
    zip (``worker_site/sitecustomize.py``): a query starts about 0.7 s sooner, and so does each of its
    stateful operators. Spark passes the driver's ``PYTHONPATH`` on to them; set before Spark starts."""
    _on_python_path(WORKER_SITE)


def _on_python_path(path: str) -> None:
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if path not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(paths + [path])


def register_sources(spark: SparkSession) -> None:
    """Register streamjoin's Python data sources with ``spark`` (once per session)."""
    if id(spark) in _REGISTERED:
        return
    from ..connectors.database import DatabaseTableSource
    from ..connectors.embedded_source import EmbeddedTopicSource
    from ..connectors.kafka_source import KafkaTopicSource

    for source in (EmbeddedTopicSource, KafkaTopicSource, DatabaseTableSource):
        _register(spark, source)
    _REGISTERED.add(id(spark))


def _register(spark: SparkSession, source) -> None:
    """Register ``source`` as PySpark does, but with its environment variables in a ConcurrentHashMap.

    Spark keeps one Python function per registered source and shares its environment map with every query
    that reads the source: each read task carries the map, and each query's start writes into it
    (``PythonStreamingSourceRunner.init``) on that query's own thread. With a plain HashMap, a task
    serialised during such a write can carry fewer entries than the size it records, and two queries
    starting at once can leave the map itself in that state; the task then fails to deserialise
    (``OptionalDataException``: CI once failed that way). A ConcurrentHashMap may be written and
    serialised at once."""
    spark.dataSource.register(source)  # PySpark pickles the class; its function is then copied with a safe map
    jvm = spark._jvm
    plain = spark._jsparkSession.sessionState().dataSourceManager().lookupDataSource(source.name()).dataSourceCls()
    function = jvm.org.apache.spark.api.python.SimplePythonFunction(
        plain.command(), jvm.java.util.concurrent.ConcurrentHashMap(plain.envVars()), plain.pythonIncludes(),
        plain.pythonExec(), plain.pythonVer(), plain.broadcastVars(), plain.accumulator())
    data_source = jvm.org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource(function)
    spark._jsparkSession.dataSource().registerPython(source.name(), data_source)
