"""Tables in a relational database (Flink's 'jdbc' connector): PostgreSQL, or SQLite as the embedded default.

Reached through ADBC, Arrow Database Connectivity (``adbc-driver-postgresql``, ``adbc-driver-sqlite``): a
result arrives as an Arrow table, the form in which Spark's Python workers exchange rows with the JVM, with
no Python object per row (psycopg or ``sqlite3`` build a tuple per row), and both drivers ship their client
library in the wheel, so nothing is installed beside pip's packages.

URLs as users write them: ``jdbc:postgresql://host[:port]/db[?user=u&password=p]`` (or a libpq URI,
``postgresql://...``) and ``jdbc:sqlite:path`` (``sqlite:path``; a file, relative to the working directory).

Identifiers are sent as written, unquoted, as Flink's PostgreSQL dialect sends them (PostgreSQL folds them to
lower case); a name that is not a plain identifier is double-quoted.

Lookups (``Lookup``) send one query per call for all the keys asked for: a join with ``unnest($1::type[], ...)``
(an array per key column) on PostgreSQL, with a JSON array of key tuples unpacked by ``json_each`` on SQLite. A
``Lookup`` keeps the rows it read per key within the table's 'lookup.partial-cache.*' limits (least recently
used keys leave first). Writes (``write_part``) go in one transaction per part of a micro-batch: upserts and
deletes on a primary key, else inserts noted in ``COMMITS_TABLE``. ``DatabaseTableSource`` reads a table once
for Spark; ``database_writer`` is a query's ``foreachBatch`` sink into one.
"""
from __future__ import annotations

import json
import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import StreamjoinError
from .lookup_cache import LookupCache

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class DatabaseError(StreamjoinError):
    """A database could not be reached or refused a query; the message names the table and the URL (its
    password masked)."""


@dataclass(frozen=True)
class Endpoint:
    """Where a table lives: ``kind`` 'postgresql' or 'sqlite'; ``target`` a libpq URI (credentials in it) or a
    file path."""

    kind: str
    target: str

    def __repr__(self) -> str:
        return f"Endpoint({self.kind}, {mask(self.target)})"


def parse_url(url: str, username: Optional[str] = None, password: Optional[str] = None) -> Endpoint:
    """The endpoint of a JDBC URL; ValueError (with the URL masked) for one streamjoin cannot reach."""
    raw = url.strip()
    body = raw[len("jdbc:"):] if raw.lower().startswith("jdbc:") else raw
    lowered = body.lower()
    if lowered.startswith("sqlite:"):
        path = body[len("sqlite:"):]
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ValueError(f"'{mask(url)}' names no SQLite file")
        return Endpoint("sqlite", path)
    if lowered.startswith(("postgresql://", "postgres://")):
        parts = urllib.parse.urlsplit(body)
        query = dict(urllib.parse.parse_qsl(parts.query))
        in_url_user, in_url_password = query.pop("user", None), query.pop("password", None)
        user = username or in_url_user or parts.username
        secret = password if password is not None else in_url_password or parts.password
        if query.pop("ssl", "").lower() == "true":  # the JDBC driver's name for it
            query.setdefault("sslmode", "require")
        host = parts.hostname or "localhost"
        netloc = host + (f":{parts.port}" if parts.port else "")
        if user:
            credentials = urllib.parse.quote(user, safe="")
            if secret is not None:
                credentials += ":" + urllib.parse.quote(secret, safe="")
            netloc = credentials + "@" + netloc
        return Endpoint("postgresql", urllib.parse.urlunsplit(
            ("postgresql", netloc, parts.path, urllib.parse.urlencode(query), "")))
    raise ValueError(f"'{mask(url)}' is not a PostgreSQL (jdbc:postgresql://host:port/db) or SQLite "
                     "(jdbc:sqlite:path) URL")


def mask(url: str) -> str:
    """``url`` with any password in it replaced by ``***``."""
    masked = re.sub(r"(?i)(password=)[^&;]*", r"\1***", url)
    return re.sub(r"(//[^/:@]*:)[^/@]*@", r"\1***@", masked)


def quote(name: str) -> str:
    if _PLAIN.match(name):
        return name
    return '"' + name.replace('"', '""') + '"'


def table_name(name: str) -> str:
    """'schema.table' as SQL: each part quoted as needed."""
    return ".".join(quote(part) for part in name.split("."))


def connect(endpoint: Endpoint, autocommit: bool = True):
    """A connection, by default in autocommit mode: each query sees what the database holds when it runs (a
    kept connection would otherwise stay in one transaction, and SQLite's would block its writers)."""
    if endpoint.kind == "sqlite":
        import adbc_driver_sqlite.dbapi as driver

        return driver.connect(endpoint.target, autocommit=autocommit)
    import adbc_driver_postgresql.dbapi as driver

    return driver.connect(endpoint.target, autocommit=autocommit)


class RemoteError(Exception):
    """An error met in another process (the executor's lookup cache server), worded there with its type."""


def describe_failure(err: BaseException, table: str, url: str, password: Optional[str]) -> str:
    """What went wrong, naming the table and the URL, with the password nowhere in it."""
    text = str(err) if isinstance(err, RemoteError) else f"{type(err).__name__}: {err}"
    if password:
        text = text.replace(password, "***").replace(urllib.parse.quote(password, safe=""), "***")
    return f"database table {table} at {mask(url)}: {mask(text)}"


def with_retries(action, retries: int, table: str, url: str, password: Optional[str]):
    """``action()``, tried again up to ``retries`` times a second longer apart each time (1 s, 2 s, ...), as
    Flink's JDBC connector does; then DatabaseError naming the table and URL, the password masked."""
    for attempt in range(retries + 1):
        try:
            return action()
        except Exception as err:  # noqa: BLE001 - whatever the driver raises
            if attempt == retries:
                raise DatabaseError(describe_failure(err, table, url, password)) from None
            time.sleep(attempt + 1)


def select_sql(table: str, columns: Sequence[str]) -> str:
    return f"SELECT {', '.join(quote(c) for c in columns)} FROM {table_name(table)}"


def read_all(endpoint: Endpoint, table: str, columns: Sequence[str], schema: pa.Schema, where: Optional[str] = None) -> pa.Table:
    """The rows of ``table`` (those ``where``, SQL, lets through), its ``columns`` in the types of ``schema``
    (named as ``schema`` names them)."""
    with connect(endpoint) as conn, conn.cursor() as cur:
        cur.execute(select_sql(table, columns) + (f" WHERE {where}" if where else ""))
        return conform(cur.fetch_arrow_table(), schema)


def conform(result: pa.Table, schema: pa.Schema) -> pa.Table:
    """A result's columns, by position, in the names and types of ``schema``: the database's own types
    (PostgreSQL's NUMERIC arrives as text, SQLite's integers as int64) cast to the declared ones."""
    columns = []
    for i, field in enumerate(schema):
        column = result.column(i)
        if column.type != field.type:
            column = pc.cast(column, field.type, safe=False) if not pa.types.is_null(column.type) \
                else pa.nulls(len(column), field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def check_table(endpoint: Endpoint, table: str, columns: Sequence[tuple[str, str]]) -> None:
    """Raise (the driver's error) when ``table`` cannot be read: the database down, the password refused, the
    table or a column missing; DatabaseError when a declared column's type ((name, Spark type)) cannot hold
    the database's (PostgreSQL: its catalog's types; SQLite's columns take any value)."""
    with connect(endpoint) as conn, conn.cursor() as cur:
        cur.execute(select_sql(table, [n for n, _ in columns]) + " WHERE 1 = 0")
        cur.fetch_arrow_table()
        if endpoint.kind != "postgresql":
            return
        schema, _, name = table.rpartition(".")
        cur.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = $1 AND "
                    "table_schema = coalesce(nullif($2, ''), current_schema())", [_folded(name), _folded(schema)])
        catalog = cur.fetch_arrow_table()
        found = dict(zip(catalog.column(0).to_pylist(), catalog.column(1).to_pylist()))
    for column, declared in columns:
        actual = found.get(_folded(column))
        if actual is not None and not _fits(declared, actual):
            raise DatabaseError(f"column {column} is declared {declared.upper()} but is {actual.upper()} in the "
                                f"database table {table}")


def table_columns(endpoint: Endpoint, table: str) -> list[tuple[str, str, bool]]:
    """(name, Spark type, in the primary key) of each column of ``table``, in order, from the database's catalog."""
    with connect(endpoint) as conn, conn.cursor() as cur:
        if endpoint.kind == "sqlite":
            cur.execute(f"PRAGMA table_info({quote(table)})")
            rows = cur.fetchall()  # (cid, name, type, notnull, default, pk)
            return [(r[1], _sqlite_type(r[2] or ""), bool(r[5])) for r in rows]
        schema, _, name = table.rpartition(".")
        cur.execute("SELECT c.column_name, c.data_type, c.numeric_precision, c.numeric_scale, k.column_name IS NOT NULL "
                    "FROM information_schema.columns c LEFT JOIN (SELECT u.table_schema, u.table_name, u.column_name "
                    "FROM information_schema.table_constraints t JOIN information_schema.key_column_usage u "
                    "ON t.constraint_name = u.constraint_name AND t.table_schema = u.table_schema "
                    "WHERE t.constraint_type = 'PRIMARY KEY') k ON k.table_schema = c.table_schema AND "
                    "k.table_name = c.table_name AND k.column_name = c.column_name WHERE c.table_name = $1 AND "
                    "c.table_schema = coalesce(nullif($2, ''), current_schema()) ORDER BY c.ordinal_position",
                    [_folded(name), _folded(schema)])
        rows = cur.fetchall()
    if not rows:
        raise DatabaseError(f"table {table} does not exist")
    return [(r[0], _pg_type(r[1], r[2], r[3]), bool(r[4])) for r in rows]


_PG_SPARK = {"smallint": "smallint", "integer": "int", "bigint": "bigint", "real": "float", "double precision": "double",
             "numeric": "decimal(38,10)", "text": "string", "character varying": "string", "character": "string",
             "boolean": "boolean", "date": "date", "timestamp without time zone": "timestamp",
             "timestamp with time zone": "timestamp", "bytea": "binary"}


def _pg_type(data_type: str, precision, scale) -> str:
    if data_type == "numeric" and precision is not None:
        return f"decimal({precision},{scale})"
    return _PG_SPARK.get(data_type, "string")


def _sqlite_type(declared: str) -> str:
    """SQLite's type affinity rules, on the declared type."""
    upper = declared.upper()
    if "INT" in upper:
        return "bigint"
    if any(t in upper for t in ("CHAR", "CLOB", "TEXT")) or not upper:
        return "string"
    if any(t in upper for t in ("REAL", "FLOA", "DOUB")):
        return "double"
    if "BOOL" in upper:
        return "boolean"
    return "double" if any(t in upper for t in ("DEC", "NUM")) else "string"


def _folded(name: str) -> str:
    """A name as PostgreSQL stores it: an unquoted identifier in lower case."""
    return name.lower() if _PLAIN.match(name) else name


def _fits(declared: str, actual: str) -> bool:
    """Whether a column declared with the Spark type ``declared`` can hold PostgreSQL's ``actual`` (its catalog's
    ``data_type``): the same kind of value, or an integer where a fractional number is declared. A type either
    side does not know is let through."""
    found = _PG_SPARK.get(actual.lower())
    have, want = _kind(found or ""), _kind(declared)
    if found is None or want not in _KINDS:
        return True
    return have == want or (want, have) == ("number", "integer")


_KINDS = {"integer", "number", "string", "boolean", "date", "timestamp", "binary"}


def _kind(spark_type: str) -> str:
    name = spark_type.split("(")[0].strip().lower()
    if name in ("tinyint", "smallint", "int", "bigint"):
        return "integer"
    if name in ("float", "double", "decimal"):
        return "number"
    return "timestamp" if name == "timestamp_ntz" else name


_PG_ARRAY_TYPES = {
    pa.int8(): "int2", pa.int16(): "int2", pa.int32(): "int4", pa.int64(): "int8", pa.float32(): "float4",
    pa.float64(): "float8", pa.bool_(): "bool", pa.string(): "text", pa.large_string(): "text", pa.date32(): "date",
}


class Lookup:
    """Rows of a database table by the values of some of its columns, with an optional cache.

    ``key_columns``: the table's columns the lookup compares; ``columns``: what it reads (the key columns
    among them or not); ``schema``: the names and types the result has, ``columns`` first, then the key
    columns (as ``key_schema`` types them: the types of the values looked up). ``cache``: None (every call
    asks the database) or ``(max_rows, expire_after_write_ms, expire_after_access_ms, cache_missing_key)``."""

    def __init__(self, endpoint: Endpoint, table: str, key_columns: Sequence[str], columns: Sequence[str],
                 schema: pa.Schema, key_schema: pa.Schema, cache: Optional[tuple] = None):
        self.endpoint, self.table = endpoint, table
        self.key_columns, self.columns = list(key_columns), list(columns)
        self.schema, self.key_schema = schema, key_schema
        self.cache = LookupCache(schema, len(key_columns), *cache) if cache is not None else None
        self.round_trips = 0
        self._conn = None

    # ------------------------------------------------------------------ the database

    def _connection(self):
        if self._conn is None:
            self._conn = connect(self.endpoint)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def query(self, keys: pa.Table) -> pa.Table:
        """The table's rows whose key columns equal one of the rows of ``keys`` (distinct, no nulls), in
        ``schema``; one round trip."""
        selected = [quote(c) for c in self.columns + self.key_columns]
        where_columns = [quote(c) for c in self.key_columns]
        if self.endpoint.kind == "postgresql":
            arrays = [_pg_array_type(keys.schema.field(i).type) for i in range(keys.num_columns)]
            unnest = ", ".join(f"${i + 1}::{t}[]" for i, t in enumerate(arrays))
            names = ", ".join(f"k{i}" for i in range(keys.num_columns))
            on = " AND ".join(f"t.{c} = k.k{i}" for i, c in enumerate(where_columns))
            sql = (f"SELECT {', '.join('t.' + c for c in selected)} FROM {table_name(self.table)} AS t "
                   f"JOIN unnest({unnest}) AS k({names}) ON {on}")
            params = [keys.column(i).to_pylist() for i in range(keys.num_columns)]
        else:
            extract = ", ".join(f"json_extract(value, '$[{i}]')" for i in range(keys.num_columns))
            sql = (f"SELECT {', '.join(selected)} FROM {table_name(self.table)} "
                   f"WHERE ({', '.join(where_columns)}) IN (SELECT {extract} FROM json_each(?))")
            params = [json.dumps([list(row) for row in zip(*(_json_values(keys.column(i))
                                                              for i in range(keys.num_columns)))])]
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                result = cur.fetch_arrow_table()
        except BaseException:
            self.close()
            raise
        self.round_trips += 1
        return conform(result, self.schema)

    # ------------------------------------------------------------------ the cache

    def rows(self, keys: pa.Table) -> pa.Table:
        """The rows of ``keys`` (distinct, no nulls; named and typed as ``key_schema``), from the cache where it
        holds them, else from the database (one round trip for all the others)."""
        if self.cache is None or keys.num_rows == 0:
            return self.query(keys) if keys.num_rows else self.schema.empty_table()
        now = time.monotonic() * 1000
        found, unanswered = self.cache.get(keys, now)
        if not unanswered.any():
            return found
        asked = keys.filter(pa.array(unanswered))
        fetched = self.query(asked)
        self.cache.put(asked, fetched, now)
        return pa.concat_tables([found, fetched])


def _pg_array_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_decimal(arrow_type):
        return "numeric"
    if pa.types.is_timestamp(arrow_type):
        return "timestamptz" if arrow_type.tz else "timestamp"
    try:
        return _PG_ARRAY_TYPES[arrow_type]
    except KeyError:
        raise DatabaseError(f"a lookup key of type {arrow_type} is not supported") from None


def _json_values(column: pa.ChunkedArray) -> list:
    if pa.types.is_decimal(column.type):
        return [float(v) for v in column.to_pylist()]
    if pa.types.is_timestamp(column.type) or pa.types.is_date(column.type):
        return [str(v) for v in column.to_pylist()]
    return column.to_pylist()


# ---------------------------------------------------------------------------------------------- writing

COMMITS_TABLE = "streamjoin_sink_commits"  # (writer, batch, part): the parts of micro-batches written (append mode)
DELETE, ORDER = "__delete", ("__seq", "__sub")


def write_part(endpoint: Endpoint, table: str, columns: Sequence[str], key_columns: Sequence[str], rows: pa.Table,
               writer: str, batch_id: int, part: int) -> int:
    """Write one part of a micro-batch into ``table`` in one transaction; the number of rows sent.

    ``rows``: ``columns`` (named as the table's), ``DELETE`` (a retraction) and the ``ORDER`` columns. With
    ``key_columns`` (the table's primary key) each key's last change in ``ORDER`` is applied: an upsert, or a
    delete; applying a part again leaves the same rows (a micro-batch run again after a crash writes nothing
    twice). Without, the rows are inserted and ``(writer, batch_id, part)`` noted in ``COMMITS_TABLE`` in the
    same transaction; a part found noted there is not written again."""
    placeholder = (lambda i: f"${i + 1}") if endpoint.kind == "postgresql" else (lambda i: "?")
    names = ", ".join(quote(c) for c in columns)
    values = ", ".join(placeholder(i) for i in range(len(columns)))
    with connect(endpoint, autocommit=False) as conn, conn.cursor() as cur:
        if not key_columns:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {COMMITS_TABLE} (writer TEXT NOT NULL, batch BIGINT NOT NULL, "
                        "part INTEGER NOT NULL, PRIMARY KEY (writer, batch, part))")
            marks = [placeholder(i) for i in range(3)]
            cur.execute(f"SELECT count(*) FROM {COMMITS_TABLE} WHERE writer = {marks[0]} AND batch = {marks[1]} "
                        f"AND part = {marks[2]}", [writer, batch_id, part])
            if cur.fetchone()[0]:
                conn.rollback()
                return 0
            if rows.num_rows:
                cur.executemany(f"INSERT INTO {table_name(table)} ({names}) VALUES ({values})", rows.select(list(columns)))
            cur.execute(f"INSERT INTO {COMMITS_TABLE} VALUES ({', '.join(marks)})", [writer, batch_id, part])
            conn.commit()
            return rows.num_rows
        last = _last_change_per_key(rows, list(key_columns))
        deletes = last.filter(pc.fill_null(last.column(DELETE), False))
        upserts = last.filter(pc.invert(pc.fill_null(last.column(DELETE), False)))
        if deletes.num_rows:
            match = " AND ".join(f"{quote(k)} = {placeholder(i)}" for i, k in enumerate(key_columns))
            cur.executemany(f"DELETE FROM {table_name(table)} WHERE {match}", deletes.select(list(key_columns)))
        if upserts.num_rows:
            others = [c for c in columns if c not in key_columns]
            update = (f"DO UPDATE SET {', '.join(f'{quote(c)} = excluded.{quote(c)}' for c in others)}" if others
                      else "DO NOTHING")
            cur.executemany(f"INSERT INTO {table_name(table)} ({names}) VALUES ({values}) ON CONFLICT "
                            f"({', '.join(quote(k) for k in key_columns)}) {update}", upserts.select(list(columns)))
        conn.commit()
        return last.num_rows


def _last_change_per_key(rows: pa.Table, keys: list[str]) -> pa.Table:
    if rows.num_rows == 0:
        return rows
    ordered = rows.sort_by([(c, "ascending") for c in ORDER]).append_column("__pos", pa.array(range(rows.num_rows)))
    last = ordered.group_by(keys, use_threads=False).aggregate([("__pos", "max")])
    return ordered.take(last.column("__pos_max"))


# ---------------------------------------------------------------------------------------------- Spark source

try:
    from pyspark.sql.datasource import DataSource, DataSourceReader
except ImportError:  # pragma: no cover - PySpark is a dependency
    DataSource = DataSourceReader = object  # type: ignore[misc,assignment]


class DatabaseTableSource(DataSource):
    """``spark.read.format("streamjoin_database")``: a database table read once, on an executor (a bounded
    scan: Flink's 'jdbc' table without FOR SYSTEM_TIME AS OF). Options: ``url``, ``table``, ``columns`` (JSON
    list, the table's columns in the order of the schema given to ``.schema()``), ``user`` and ``password``
    (Spark masks an option named ``password`` wherever it shows a plan)."""

    @classmethod
    def name(cls) -> str:
        return "streamjoin_database"

    def schema(self):
        raise DatabaseError("the streamjoin_database source needs its schema given")

    def reader(self, schema):
        return _TableReader(dict(self.options), schema)


class _TableReader(DataSourceReader):
    def __init__(self, options: dict, schema):
        self.options, self.spark_schema = options, schema

    def read(self, partition):
        from pyspark.sql.pandas.types import to_arrow_schema

        options = self.options
        endpoint = parse_url(options["url"], options.get("user"), options.get("password"))
        try:
            table = read_all(endpoint, options["table"], json.loads(options["columns"]),
                             to_arrow_schema(self.spark_schema), options.get("where"))
        except DatabaseError:
            raise
        except Exception as err:  # noqa: BLE001 - the driver's own error, with the table and URL named
            raise DatabaseError(describe_failure(err, options["table"], options["url"], options.get("password"))) from None
        yield from table.to_batches()


# ---------------------------------------------------------------------------------------------- Spark sink

def database_writer(database, columns: list[str], key_columns: list[str], writer_id):
    """A ``foreachBatch`` function writing each micro-batch (rows from ``lower.sink.database_rows``: ``columns``,
    ``DELETE``, ``ORDER``) into the ``DatabaseTable`` ``database`` from the executors: one transaction per
    partition (``write_part``); with a primary key (``key_columns``) a key's changes go to one partition first."""
    from pyspark.sql.functions import col

    def write_batch(batch, batch_id: int) -> None:
        if key_columns:
            batch = batch.repartition(*[col(f"`{k}`") for k in key_columns])
        run = _PartWriter(database, columns, key_columns, writer_id(), batch_id)
        write_batch.rows_written += sum(r.written for r in batch.mapInArrow(run, "written long").collect())

    write_batch.rows_written = 0
    return write_batch


class _PartWriter:
    """One partition of a micro-batch into the database (``write_part``), tried again 'sink.max-retries'
    times, a second longer each time, before the query stops with the error."""

    def __init__(self, database, columns, key_columns, writer: str, batch_id: int):
        self.database, self.columns, self.key_columns = database, list(columns), list(key_columns)
        self.writer, self.batch_id = writer, batch_id

    def __call__(self, batches):
        from pyspark import TaskContext

        batches = list(batches)
        rows = pa.Table.from_batches(batches) if batches else None
        written = 0
        if rows is not None and rows.num_rows:
            db, part = self.database, TaskContext.get().partitionId()
            endpoint = parse_url(db.url, db.username, db.password)
            written = with_retries(lambda: write_part(endpoint, db.table, self.columns, self.key_columns, rows,
                                                      self.writer, self.batch_id, part),
                                   db.sink_max_retries, db.table, db.url, db.password)
        yield pa.RecordBatch.from_pydict({"written": [written]})
