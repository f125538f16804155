"""Flink 'jdbc' tables in real databases, through the engine as users run it: SQLite (a file) and PostgreSQL
(started here on 127.0.0.1, with a password). A lookup join (FOR SYSTEM_TIME AS OF the stream's PROCTIME())
reads the database as each micro-batch runs: INNER and LEFT, keys on the primary key or on other columns
(several rows per key), ON conditions on the table and over both inputs, a partial cache; without FOR
SYSTEM_TIME AS OF the table is read once, when the query starts. INSERT INTO a 'jdbc' table inserts (no primary
key) or upserts and deletes (a primary key: a regular join's retractions, an aggregate's updates). A database
that refuses the password stops the script before any query starts, its password nowhere in the error.
(A micro-batch written twice after kill -9 writes its rows once: ``test_restart.py``.)"""
from __future__ import annotations

import pytest

from streamjoin import Engine
from streamjoin.conformance.runner import produce_inputs
from streamjoin.errors import StatementError

CUSTOMERS = [(1, "Ann", "DE"), (2, "Bob", "US"), (3, "Cy", "DE")]
# (order_id, customer_id, country, amount)
FIRST = [(10, 1, "DE", 20.0), (11, 2, "US", 30.0), (12, 3, "DE", 5.0), (13, 9, "FR", 50.0), (14, None, None, 1.0)]
SECOND = [(15, 1, "DE", 40.0), (16, 2, "US", 8.0)]

QUERIES = {
    # the row the database holds when the micro-batch runs: order 15 sees the update
    "by_key": ("SELECT o.order_id, c.name FROM orders AS o JOIN customers FOR SYSTEM_TIME AS OF o.proc_time AS c "
               "ON o.customer_id = c.id",
               [(10, "Ann"), (11, "Bob"), (12, "Cy"), (15, "Anna"), (16, "Bob")]),
    # a LEFT join pads a record whose row fails the ON conditions, is missing, or whose key is null
    "left": ("SELECT o.order_id, c.name FROM orders AS o LEFT JOIN customers FOR SYSTEM_TIME AS OF o.proc_time AS c "
             "ON o.customer_id = c.id AND c.country = 'DE' AND o.amount > 10",
             [(10, "Ann"), (11, None), (12, None), (13, None), (14, None), (15, "Anna"), (16, None)]),
    # a key that is not the primary key: a record joins every row of its key
    "by_country": ("SELECT o.order_id, c.name FROM orders AS o JOIN customers FOR SYSTEM_TIME AS OF o.proc_time AS c "
                   "ON o.country = c.country AND c.id <> o.customer_id",
                   [(10, "Cy"), (12, "Ann"), (15, "Cy")]),
    # a composite key (two equalities), both columns of the table
    "composite": ("SELECT o.order_id, c.name FROM orders AS o JOIN customers FOR SYSTEM_TIME AS OF o.proc_time AS c "
                  "ON o.country = c.country AND o.customer_id = c.id",
                  [(10, "Ann"), (11, "Bob"), (12, "Cy"), (15, "Anna"), (16, "Bob")]),
    # through the executor's partial cache: within its expiry, order 15 sees the row cached for order 10
    "cached": ("SELECT o.order_id, c.name FROM orders AS o JOIN cached_customers FOR SYSTEM_TIME AS OF o.proc_time "
               "AS c ON o.customer_id = c.id",
               [(10, "Ann"), (11, "Bob"), (12, "Cy"), (15, "Ann"), (16, "Bob")]),
    # ... and after it the database's row
    "expired": ("SELECT o.order_id, c.name FROM orders AS o JOIN briefly_cached_customers FOR SYSTEM_TIME AS OF "
                "o.proc_time AS c ON o.customer_id = c.id",
                [(10, "Ann"), (11, "Bob"), (12, "Cy"), (15, "Anna"), (16, "Bob")]),
    # no FOR SYSTEM_TIME AS OF, on a column that is not the key: every row of the key, as Flink joins a bounded scan
    "static_by_country": ("SELECT o.order_id, c.name FROM orders AS o JOIN customers AS c ON o.country = c.country",
                          [(10, "Ann"), (10, "Cy"), (11, "Bob"), (12, "Ann"), (12, "Cy"), (15, "Ann"), (15, "Cy"),
                           (16, "Bob")]),
    # no FOR SYSTEM_TIME AS OF: the table as it was when the query started
    "static": ("SELECT o.order_id, c.name FROM orders AS o JOIN customers AS c ON o.customer_id = c.id",
               [(10, "Ann"), (11, "Bob"), (12, "Cy"), (15, "Ann"), (16, "Bob")]),
}


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path):
    """(the 'jdbc' options of its tables, a function running SQL in it); ``run.server`` has the URL, user and
    password as a SQLstream server's OPTIONS."""
    if request.param == "sqlite":
        import adbc_driver_sqlite.dbapi as driver

        target, options = str(tmp_path / "dims.db"), f"'url' = 'jdbc:sqlite:{tmp_path / 'dims.db'}'"
        server_options = f"URL 'jdbc:sqlite:{tmp_path / 'dims.db'}', DRIVER_CLASS 'org.sqlite.JDBC'"
    else:
        import adbc_driver_postgresql.dbapi as driver

        server = request.getfixturevalue("postgres")
        target = server.uri
        options = f"'url' = '{server.jdbc_url}', 'username' = '{server.user}', 'password' = '{server.password}'"
        server_options = (f"\"URL\" '{server.jdbc_url}', \"USER_NAME\" '{server.user}', \"PASSWORD\" "
                          f"'{server.password}', \"DRIVER_CLASS\" 'org.postgresql.Driver'")

    def run(sql: str) -> list:
        """Run ``sql`` in the database; the rows it returns, sorted."""
        with driver.connect(target) as conn, conn.cursor() as cur:
            cur.execute(sql)
            rows = cur.fetchall() if cur.description else []
            conn.commit()
        return sorted(rows, key=repr)

    run("DROP TABLE IF EXISTS customers")
    run("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, country TEXT)")
    run("INSERT INTO customers VALUES " + ", ".join(f"({i}, '{n}', '{c}')" for i, n, c in CUSTOMERS))
    run.server = server_options
    return options, run


def _script(options: str) -> str:
    columns = "id INT, name STRING, country STRING, PRIMARY KEY (id) NOT ENFORCED"
    sinks = "".join(f"CREATE TABLE {name} (order_id INT, name STRING) WITH ('connector' = 'kafka', 'topic' = '{name}', "
                    f"'format' = 'json');\nINSERT INTO {name} {query};\n" for name, (query, _) in QUERIES.items())
    return (
        "CREATE TABLE orders (order_id INT, customer_id INT, country STRING, amount DOUBLE, proc_time AS PROCTIME()) "
        "WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');\n"
        f"CREATE TABLE customers ({columns}) WITH ('connector' = 'jdbc', 'table-name' = 'customers', {options});\n"
        f"CREATE TABLE cached_customers ({columns}) WITH ('connector' = 'jdbc', 'table-name' = 'customers', {options}, "
        "'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '100', "
        "'lookup.partial-cache.expire-after-write' = '1 h');\n"
        f"CREATE TABLE briefly_cached_customers ({columns}) WITH ('connector' = 'jdbc', 'table-name' = 'customers', "
        f"{options}, 'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.expire-after-write' = '1 ms');\n" + sinks
    )


def _orders(engine, orders, start: int) -> None:
    produce_inputs(engine.store, [
        {"topic": "orders", "timestamp": start + i, "value": {"order_id": o, "customer_id": c, "country": k, "amount": a}}
        for i, (o, c, k, a) in enumerate(orders)
    ])
    engine.process_all_available()


def test_lookup_and_bounded_joins_of_a_database_table(spark, tmp_path, database):
    options, run = database
    engine = Engine(spark, home=str(tmp_path / "home"))
    queries = engine.execute(_script(options))
    try:
        _orders(engine, FIRST, 0)
        run("UPDATE customers SET name = 'Anna' WHERE id = 1")  # between two micro-batches
        _orders(engine, SECOND, 100)
        results = {q.sink: sorted(((r["order_id"], r["name"]) for r in engine.dataframe(q).collect()),
                                  key=lambda row: (row[0], row[1] or "")) for q in queries}
        metrics = {q.sink: q.metrics() for q in queries}
        progress = queries[0].spark_query.lastProgress
    finally:
        engine.stop()
    assert results == {name: expected for name, (_, expected) in QUERIES.items()}
    assert progress["stateOperators"] == []  # no operator state
    assert "s3cret" not in str(progress) and not [f for f in (tmp_path / "home").rglob("*")
                                                   if f.is_file() and b"s3cret" in f.read_bytes()]  # the password
    assert metrics["by_key"]["null_key"] == 1 and metrics["left"]["null_key"] == 0  # LEFT pads it, as Flink does
    # one query per partition of a micro-batch that has records (two partitions, two micro-batches), never per record
    assert 2 <= metrics["by_key"]["lookup_round_trips"] <= 4 and 1 <= metrics["by_key"]["lookup_round_trips_last_batch"] <= 2
    # the second micro-batch's keys were all looked up by the first, whichever Python worker ran which partition
    assert metrics["cached"]["lookup_round_trips_last_batch"] == 0 < metrics["expired"]["lookup_round_trips_last_batch"]


def test_insert_into_database_tables(spark, tmp_path, database):
    options, run = database
    run("DROP TABLE IF EXISTS order_log")
    run("DROP TABLE IF EXISTS paid")
    run("CREATE TABLE order_log (order_id INTEGER, customer_id INTEGER)")
    run("CREATE TABLE paid (order_id INTEGER PRIMARY KEY, amount DOUBLE PRECISION, paid DOUBLE PRECISION)")
    engine = Engine(spark, home=str(tmp_path / "home"))
    engine.execute(
        "CREATE TABLE orders (order_id INT, customer_id INT, country STRING, amount DOUBLE) "
        "WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');\n"
        "CREATE TABLE payments (order_id INT, paid DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'payments', 'format' = 'json');\n"
        f"CREATE TABLE order_log (order_id INT, customer_id INT) WITH ('connector' = 'jdbc', 'table-name' = 'order_log', {options});\n"
        "CREATE TABLE paid (order_id INT, amount DOUBLE, paid DOUBLE, PRIMARY KEY (order_id) NOT ENFORCED) "
        f"WITH ('connector' = 'jdbc', 'table-name' = 'paid', {options});\n"
        "INSERT INTO order_log SELECT order_id, customer_id FROM orders;\n"
        "INSERT INTO paid SELECT o.order_id, o.amount, p.paid FROM orders o LEFT JOIN payments p ON o.order_id = p.order_id;"
    )
    try:
        _orders(engine, FIRST, 0)
        produce_inputs(engine.store, [{"topic": "payments", "timestamp": 50, "value": {"order_id": 11, "paid": 30.0}},
                                      {"topic": "payments", "timestamp": 51, "value": {"order_id": 99, "paid": 1.0}}])
        engine.process_all_available()  # order 11's padded row is retracted and replaced
        _orders(engine, SECOND, 100)
    finally:
        engine.stop()
    assert run("SELECT * FROM order_log") == sorted(((o, c) for o, c, _, _ in FIRST + SECOND), key=repr)
    assert run("SELECT * FROM paid") == sorted(((o, a, 30.0 if o == 11 else None) for o, _, _, a in FIRST + SECOND), key=repr)


ANIMALS = [(1, "Bessie", True, False, "Bos"), (2, "Puff", False, True, "Draco"), (3, "Rex", True, True, "Canis"),
           (4, "Dolly", True, False, "Ovis")]
BEASTS = [(1, 1), (2, 2), (3, 4), (4, 3), (5, 9), (6, None)]  # (row_id, animal_id)


def test_a_sqlstream_foreign_table_is_read_at_start_with_its_filters_sent(spark, tmp_path, database):
    """SQLstream's CREATE SERVER ... SYS_JDBC and a CREATE FOREIGN TABLE without a column list (the database's
    columns and key), joined to a stream as its seed's static join: the equi-join with extra filters on the
    table sends them to the database; USING; LEFT."""
    _, run = database
    run("DROP TABLE IF EXISTS animal_data")
    run("CREATE TABLE animal_data (animal_id INTEGER PRIMARY KEY, edible BOOLEAN, poisonous BOOLEAN, name TEXT, genus TEXT)")
    run("INSERT INTO animal_data VALUES " + ", ".join(f"({i}, {e}, {p}, '{n}', '{g}')" for i, n, e, p, g in ANIMALS))
    script = (f'CREATE OR REPLACE SERVER "Zoo_DB" FOREIGN DATA WRAPPER "SYS_JDBC" OPTIONS ({run.server});\n'
              'CREATE FOREIGN TABLE animal_data SERVER "Zoo_DB" OPTIONS (TABLE_NAME \'animal_data\');\n'
              "CREATE STREAM beast_events (row_id integer not null, animal_id int, weight integer);\n"
              "CREATE STREAM eaten AS SELECT STREAM e.row_id, a.name FROM beast_events e JOIN animal_data a "
              "ON (e.animal_id = a.animal_id AND a.edible AND NOT a.poisonous AND a.genus IN ('Bos', 'Ovis'));\n"
              "CREATE STREAM named AS SELECT STREAM e.row_id, a.name FROM beast_events e LEFT JOIN animal_data a USING (animal_id);\n")
    engine = Engine(spark, home=str(tmp_path / "home"))
    explained = engine.explain(script)
    queries = engine.execute(script)
    try:
        produce_inputs(engine.store, [{"topic": "BEAST_EVENTS", "timestamp": i, "value": {"ROW_ID": r, "ANIMAL_ID": a, "WEIGHT": 5}}
                                      for i, (r, a) in enumerate(BEASTS)])
        engine.process_all_available()
        results = {q.sink: sorted((r["ROW_ID"], r["NAME"]) for r in engine.dataframe(q).collect()) for q in queries}
    finally:
        engine.stop()
    assert "SQL sent: SELECT animal_id, edible, poisonous, name, genus FROM animal_data WHERE (edible) AND " \
           "(NOT (poisonous)) AND (genus IN ('Bos', 'Ovis'))" in explained
    assert "SQL sent: SELECT animal_id, name FROM animal_data\n" in explained + "\n"  # only the columns used
    assert "s3cret" not in explained  # the server's password
    assert results == {"EATEN": [(1, "Bessie"), (3, "Dolly")],
                       "NAMED": [(1, "Bessie"), (2, "Puff"), (3, "Dolly"), (4, "Rex"), (5, None)]}


def test_a_database_that_refuses_the_password_stops_the_script_before_anything_starts(spark, tmp_path, postgres):
    engine = Engine(spark, home=str(tmp_path / "home"))
    options = f"'url' = '{postgres.jdbc_url}', 'username' = '{postgres.user}', 'password' = 'not-the-password'"
    with pytest.raises(StatementError) as refused:
        engine.execute(_script(options))
    assert refused.value.rule == "database-table"
    text = str(refused.value)
    assert "customers" in text and postgres.jdbc_url[len("jdbc:"):] in text and "password authentication failed" in text
    assert "not-the-password" not in text
    assert engine.queries == [] and not spark.streams.active


def test_a_database_down_mid_run_stops_the_query_and_a_restart_writes_what_an_uninterrupted_run_would(
        spark, tmp_path, postgres):
    import adbc_driver_postgresql.dbapi as driver

    with driver.connect(postgres.uri) as conn, conn.cursor() as cur:
        for sql in ("DROP TABLE IF EXISTS customers", "DROP TABLE IF EXISTS named",
                    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, country TEXT)",
                    "CREATE TABLE named (order_id INTEGER PRIMARY KEY, name TEXT)",
                    "INSERT INTO customers VALUES " + ", ".join(f"({i}, '{n}', '{c}')" for i, n, c in CUSTOMERS)):
            cur.execute(sql)
        conn.commit()
    options = (f"'url' = '{postgres.jdbc_url}', 'username' = '{postgres.user}', 'password' = '{postgres.password}', "
               "'lookup.max-retries' = '1', 'sink.max-retries' = '1'")
    script = (
        "CREATE TABLE orders (order_id INT, customer_id INT, country STRING, amount DOUBLE, proc_time AS PROCTIME()) "
        "WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');\n"
        f"CREATE TABLE customers (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', "
        f"'table-name' = 'customers', {options});\n"
        f"CREATE TABLE named (order_id INT, name STRING, PRIMARY KEY (order_id) NOT ENFORCED) WITH ('connector' = 'jdbc', "
        f"'table-name' = 'named', {options});\n"
        "CREATE TABLE found (order_id INT, name STRING) WITH ('connector' = 'kafka', 'topic' = 'found', 'format' = 'json');\n"
        "INSERT INTO named SELECT o.order_id, c.name FROM orders AS o LEFT JOIN customers FOR SYSTEM_TIME AS OF "
        "o.proc_time AS c ON o.customer_id = c.id;\n"
        "INSERT INTO found SELECT o.order_id, c.name FROM orders AS o JOIN customers FOR SYSTEM_TIME AS OF "
        "o.proc_time AS c ON o.customer_id = c.id;\n"
    )
    home = str(tmp_path / "home")
    engine = Engine(spark, home=home)
    engine.execute(script)
    try:
        _orders(engine, FIRST, 0)
        postgres.stop()
        with pytest.raises(Exception) as failed:
            _orders(engine, SECOND, 100)  # each query tries twice, a second apart, then stops
    finally:
        engine.stop()
        postgres.start()
    text = str(failed.value)
    assert "customers" in text and postgres.jdbc_url[len("jdbc:"):] in text and postgres.password not in text

    engine = Engine(spark, home=home)  # the same script again, the database back: the failed batch runs again
    queries = engine.execute(script)
    try:
        engine.process_all_available()
        found = sorted((r["order_id"], r["name"]) for r in engine.dataframe(queries[1]).collect())
    finally:
        engine.stop()
    names = dict((i, n) for i, n, _ in CUSTOMERS)
    with driver.connect(postgres.uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT order_id, name FROM named ORDER BY order_id")
        assert cur.fetchall() == [(o, names.get(c)) for o, c, _, _ in FIRST + SECOND]
    assert found == sorted((o, names[c]) for o, c, _, _ in FIRST + SECOND if c in names)
