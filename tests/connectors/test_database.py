"""Database tables without Spark: the 'jdbc' options as Flink's connector checks them, URLs and masking, and
``connectors.database.Lookup`` against a real SQLite file and a real PostgreSQL server (started here on
127.0.0.1 with a password): one round trip per call whatever the number of keys, keys on any columns, and the
partial cache's limits (rows, expiry after write and after access, missing keys)."""
from __future__ import annotations

import time

import pyarrow as pa
import pytest

from streamjoin.connectors import database
from streamjoin.errors import StatementError
from streamjoin.plan.catalog import Catalog
from streamjoin.plan.explain import describe_text
from streamjoin.plan.statements import StatementPlanner
from streamjoin.sql import parse_script


def _declare(options: str):
    catalog = Catalog()
    planner = StatementPlanner(catalog)
    for item in parse_script(f"CREATE TABLE dim (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ({options});"):
        planner.plan(item)
    return catalog.source("dim")


BASE = "'connector' = 'jdbc', 'url' = 'jdbc:sqlite:dims.db', 'table-name' = 'dim'"


@pytest.mark.parametrize("options, cache", [
    ("", ("NONE", None, None, None, True)),
    (", 'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '500'", ("PARTIAL", 500, None, None, True)),
    (", 'lookup.cache' = 'partial', 'lookup.partial-cache.expire-after-write' = '10 s', "
     "'lookup.partial-cache.expire-after-access' = '1min', 'lookup.partial-cache.cache-missing-key' = 'false'",
     ("PARTIAL", None, 10_000, 60_000, False)),
    # Flink's deprecated options make a partial cache, unless 'lookup.cache' = 'PARTIAL' is set too
    (", 'lookup.cache.max-rows' = '100', 'lookup.cache.ttl' = '2h'", ("PARTIAL", 100, 7_200_000, None, True)),
    (", 'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '5', 'lookup.cache.max-rows' = '100', "
     "'lookup.cache.ttl' = '2h'", ("PARTIAL", 5, None, None, True)),
    (", 'lookup.cache' = 'FULL'", ("NONE", None, None, None, True)),  # accepted as Flink's JDBC connector does
])
def test_lookup_cache_options(options, cache):
    table = _declare(BASE + options).database
    assert (table.cache, table.cache_max_rows, table.expire_after_write_ms, table.expire_after_access_ms,
            table.cache_missing_key) == cache


@pytest.mark.parametrize("options, message", [
    (BASE + ", 'lookup.cache.size' = '3'", "Unsupported options found for 'jdbc' in dim: lookup.cache.size"),
    ("'connector' = 'jdbc', 'table-name' = 'dim'", "needs the option(s) 'url'"),
    ("'connector' = 'jdbc', 'url' = 'jdbc:mysql://h/db', 'table-name' = 'dim'", "not a PostgreSQL"),
    (BASE + ", 'username' = 'u'", "either all or none of the options username, password"),
    (BASE + ", 'lookup.cache' = 'PARTIAL'", "the cache would never evict"),
    (BASE + ", 'lookup.cache' = 'SOME'", "is not NONE, PARTIAL or FULL"),
    (BASE + ", 'lookup.max-retries' = '-1'", "'lookup.max-retries' = '-1' is not valid"),
    (BASE + ", 'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.expire-after-write' = 'soon'", "is not valid"),
])
def test_refused_jdbc_options(options, message):
    with pytest.raises(StatementError, match="jdbc") as refused:
        _declare(options)
    assert message in str(refused.value)


def test_the_password_is_kept_out_of_what_is_shown():
    source = _declare("'connector' = 'jdbc', 'url' = 'jdbc:postgresql://db:5432/app?password=inurl', "
                      "'table-name' = 'dim', 'username' = 'app', 'password' = 'hunter2'")
    assert source.database.password == "hunter2"
    assert "hunter2" not in repr(source) and "password" not in dict(source.properties)
    assert database.mask(source.database.url) == "jdbc:postgresql://db:5432/app?password=***"
    assert database.mask("postgresql://app:hunter2@db/app") == "postgresql://app:***@db/app"
    described = describe_text(source)
    assert "Source: database table dim at jdbc:postgresql://db:5432/app?password=***" in described
    assert "hunter2" not in described and "inurl" not in described and "Topic" not in described
    endpoint = database.parse_url(source.database.url, "app", "hunter2")
    assert endpoint.target == "postgresql://app:hunter2@db:5432/app" and "hunter2" not in repr(endpoint)
    failure = database.describe_failure(RuntimeError("auth failed for hunter2"), "dim", source.database.url, "hunter2")
    assert "hunter2" not in failure and "dim" in failure and "db:5432/app" in failure


@pytest.mark.parametrize("url, endpoint", [
    ("jdbc:sqlite:/data/dims.db", ("sqlite", "/data/dims.db")),
    ("jdbc:sqlite:dims.db", ("sqlite", "dims.db")),
    ("jdbc:postgresql://h:6543/db?user=u&password=p&sslmode=require", ("postgresql", "postgresql://u:p@h:6543/db?sslmode=require")),
    ("postgresql://u@h/db", ("postgresql", "postgresql://u@h/db")),
])
def test_urls_as_users_write_them(url, endpoint):
    parsed = database.parse_url(url)
    assert (parsed.kind, parsed.target) == endpoint


# ---------------------------------------------------------------------------------------------- lookups

CUSTOMERS = [(1, "Ann", "DE"), (2, "Bob", "US"), (3, "Cy", "DE")]


@pytest.fixture(params=["sqlite", "postgresql"])
def endpoint(request, tmp_path):
    """A database holding ``customers``, and a function running SQL in it."""
    if request.param == "sqlite":
        import adbc_driver_sqlite.dbapi as driver

        url, target = f"jdbc:sqlite:{tmp_path / 'dims.db'}", str(tmp_path / "dims.db")
    else:
        import adbc_driver_postgresql.dbapi as driver

        server = request.getfixturevalue("postgres")
        url, target = server.jdbc_url, server.uri

    def run(sql: str):
        with driver.connect(target) as conn, conn.cursor() as cur:
            cur.execute(sql)
            conn.commit()

    run("DROP TABLE IF EXISTS customers")
    run("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, country TEXT)")
    run("INSERT INTO customers VALUES " + ", ".join(f"({i}, '{name}', '{country}')" for i, name, country in CUSTOMERS))
    credentials = ("streamjoin", request.getfixturevalue("postgres").password) if request.param == "postgresql" else (None, None)
    return database.parse_url(url, *credentials), run


ROWS = pa.schema([("name", pa.string()), ("k0", pa.int64())])


def _lookup(endpoint, cache=None, key_columns=("id",), columns=("name",), schema=ROWS):
    keys = pa.schema([f for f in schema if f.name.startswith("k")])
    return database.Lookup(endpoint, "customers", list(key_columns), list(columns), schema, keys, cache)


def _keys(*values):
    return pa.table({"k0": pa.array(values, pa.int64())})


def test_a_lookup_asks_once_for_all_its_keys_and_finds_rows_by_any_columns(endpoint):
    endpoint, _ = endpoint
    lookup = _lookup(endpoint)
    assert sorted(lookup.rows(_keys(1, 3, 9)).to_pylist(), key=str) == [{"name": "Ann", "k0": 1}, {"name": "Cy", "k0": 3}]
    assert lookup.round_trips == 1
    by_country = _lookup(endpoint, key_columns=("country",), schema=pa.schema([("name", pa.string()), ("k0", pa.string())]))
    found = by_country.rows(pa.table({"k0": ["DE", "FR"]}))
    assert sorted(found.column("name").to_pylist()) == ["Ann", "Cy"] and by_country.round_trips == 1


@pytest.mark.parametrize("cache, seen_after_update", [
    (None, "Anna"),  # no cache: every call reads the database
    ((100, 3_600_000, None, True), "Ann"),  # within the expiry the cached row answers
    ((100, 1, None, True), "Anna"),  # written 1 ms ago: expired
    ((100, None, 3_600_000, True), "Ann"),
])
def test_the_partial_cache_answers_within_its_expiry(endpoint, cache, seen_after_update):
    endpoint, run = endpoint
    lookup = _lookup(endpoint, cache)
    assert lookup.rows(_keys(1)).column("name").to_pylist() == ["Ann"]
    run("UPDATE customers SET name = 'Anna' WHERE id = 1")
    time.sleep(0.01)
    assert lookup.rows(_keys(1)).column("name").to_pylist() == [seen_after_update]


def test_the_partial_cache_keeps_max_rows_and_missing_keys_as_told(endpoint):
    endpoint, run = endpoint
    lookup = _lookup(endpoint, (2, None, None, True))
    lookup.rows(_keys(1, 2))
    lookup.rows(_keys(3))  # the least recently used key (1 or 2) leaves
    assert len(lookup.cache) == 2 and (3,) in lookup.cache
    trips = lookup.round_trips
    lookup.rows(_keys(3))
    assert lookup.round_trips == trips  # a hit

    missing = _lookup(endpoint, (10, None, None, True))
    missing.rows(_keys(7))
    run("INSERT INTO customers VALUES (7, 'Dee', 'FR')")
    assert missing.rows(_keys(7)).num_rows == 0  # the empty answer was cached
    uncached = _lookup(endpoint, (10, None, None, False))
    assert uncached.rows(_keys(8)).num_rows == 0
    run("INSERT INTO customers VALUES (8, 'Eve', 'FR')")
    assert uncached.rows(_keys(8)).column("name").to_pylist() == ["Eve"]


def test_a_declared_type_the_database_cannot_hold_is_refused(postgres):
    endpoint = database.parse_url(postgres.jdbc_url, postgres.user, postgres.password)
    import adbc_driver_postgresql.dbapi as driver

    with driver.connect(postgres.uri) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS typed")
        cur.execute("CREATE TABLE typed (id INTEGER, label TEXT)")
        conn.commit()
    database.check_table(endpoint, "typed", [("id", "bigint"), ("label", "string")])
    with pytest.raises(database.DatabaseError, match="column label is declared INT but is TEXT"):
        database.check_table(endpoint, "typed", [("id", "bigint"), ("label", "int")])
    wrong = database.parse_url(postgres.jdbc_url, postgres.user, "not-it")
    with pytest.raises(Exception, match="password authentication failed"):
        database.check_table(wrong, "typed", [("id", "int")])


# ---------------------------------------------------------------------------------------------- writing

def _changes(*rows):
    """(id, name, delete, seq) rows as ``write_part`` takes them."""
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int32()), "name": [r[1] for r in rows],
                     database.DELETE: [r[2] for r in rows], "__seq": pa.array([r[3] for r in rows], pa.int64()),
                     "__sub": pa.array([0] * len(rows), pa.int64())})


def _table(run, create: str) -> None:
    run("DROP TABLE IF EXISTS written")
    run(create)


def _rows(endpoint):
    with database.connect(endpoint) as conn, conn.cursor() as cur:
        cur.execute("SELECT * FROM written")
        return sorted(cur.fetchall(), key=repr)


def test_an_append_part_is_written_once_however_often_it_is_sent(endpoint):
    endpoint, run = endpoint
    _table(run, "CREATE TABLE written (id INTEGER, name TEXT)")
    part = _changes((1, "a", False, 1), (1, "b", False, 2), (2, "c", False, 3))
    assert database.write_part(endpoint, "written", ["id", "name"], [], part, "q@run", 4, 0) == 3
    assert database.write_part(endpoint, "written", ["id", "name"], [], part, "q@run", 4, 0) == 0  # again after a crash
    database.write_part(endpoint, "written", ["id", "name"], [], part.slice(0, 1), "q@run", 4, 1)  # another part
    assert _rows(endpoint) == [(1, "a"), (1, "a"), (1, "b"), (2, "c")]


def test_an_upsert_part_applies_each_keys_last_change_and_can_be_sent_again(endpoint):
    endpoint, run = endpoint
    _table(run, "CREATE TABLE written (id INTEGER PRIMARY KEY, name TEXT)")
    database.write_part(endpoint, "written", ["id", "name"], ["id"], _changes((1, "a", False, 1), (2, "b", False, 2),
                                                                            (3, "c", False, 3)), "q", 0, 0)
    # out of order in the part: by sequence, 1 is updated twice, 2 deleted, 3 deleted then written again
    changes = _changes((1, "z", False, 9), (2, "b", True, 5), (1, "y", False, 6), (3, "c2", False, 8), (3, "c", True, 7))
    for _ in range(2):
        database.write_part(endpoint, "written", ["id", "name"], ["id"], changes, "q", 1, 0)
        assert _rows(endpoint) == [(1, "z"), (3, "c2")]


@pytest.mark.parametrize("script, rule, message", [
    ("CREATE FOREIGN TABLE t SERVER nowhere;", "unknown-server", "unknown server nowhere"),
    ("CREATE SERVER k TYPE 'KAFKA' FOREIGN DATA WRAPPER ECDA; CREATE FOREIGN TABLE t SERVER k;", "foreign-table-server",
     "is a ECDA server"),
    ("CREATE SERVER s FOREIGN DATA WRAPPER SYS_JDBC OPTIONS (URL 'jdbc:sqlite:x.db'); CREATE SERVER s FOREIGN DATA "
     "WRAPPER SYS_JDBC;", "duplicate-name", "server s already exists"),
    ("CREATE SERVER s FOREIGN DATA WRAPPER SYS_JDBC OPTIONS (URL 'jdbc:sqlite:x.db'); CREATE FOREIGN TABLE t (a INT) "
     "SERVER s;", "table-needs-key", "needs a PRIMARY KEY"),
])
def test_refused_foreign_tables(script, rule, message):
    planner = StatementPlanner(Catalog())
    with pytest.raises(StatementError) as refused:
        for item in parse_script(script):
            planner.plan(item)
    assert refused.value.rule == rule and message in str(refused.value)


def test_a_foreign_table_takes_its_servers_options_and_keeps_the_password_out_of_sight():
    catalog = Catalog()
    planner = StatementPlanner(catalog)
    for item in parse_script('CREATE OR REPLACE SERVER "Pg" FOREIGN DATA WRAPPER "SYS_JDBC" OPTIONS ("URL" '
                             "'jdbc:postgresql://db/zoo', \"USER_NAME\" 'zoo', \"PASSWORD\" 'hunter2', \"SCHEMA_NAME\" 'public');"
                             'CREATE FOREIGN TABLE "Animals" (id INTEGER, name VARCHAR(32), PRIMARY KEY (id)) SERVER "Pg" '
                             "OPTIONS (TABLE_NAME 'animals');"):
        planner.plan(item)
    source = catalog.source("Animals")
    assert (source.kind, source.key_columns, source.database.table, source.database.username) == \
        ("TABLE", ("ID",), "public.animals", "zoo")
    assert source.database.password == "hunter2" and "hunter2" not in repr(source) + repr(catalog.servers)
