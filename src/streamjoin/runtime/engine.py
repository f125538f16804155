"""The engine: SQL text in, Spark Structured Streaming queries out.

``Engine(spark).execute(sql)`` parses and plans the whole script first — every statement is validated
and every join's operator looked up — and only then creates topics and starts the persistent queries,
so a refused statement starts nothing. Topics are the embedded store's, or a Kafka broker's when
``bootstrap.servers`` is given (argument, ``STREAMJOIN_BOOTSTRAP_SERVERS`` or ``SET``). Each query gets a checkpoint directory named after its id, so
running the same script again resumes every query where it stopped.
"""
from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Callable, Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from ..connectors.database import database_writer
from ..connectors.dead_letters import DEFAULT_TOPIC as DEAD_LETTER_TOPIC
from ..connectors.dead_letters import TOPIC_PROPERTY as DEAD_LETTER_PROPERTY
from ..connectors.late_records import TOPIC_PROPERTY as LATE_TOPIC_PROPERTY
from ..connectors.late_records import LateRecords
from ..connectors.dead_letters import DeadLetters
from ..connectors.embedded_sink import topic_writer
from ..connectors.kafka_sink import kafka_writer
from ..connectors.kafka_client import BOOTSTRAP_ENV, BOOTSTRAP_PROPERTY, KafkaTopics, masked_text, use_client_properties
from ..connectors.topic_store import TopicStore
from ..errors import StatementError, StreamjoinError
from ..lower.lowering import SourceOptions, lower, read_inputs, side_topics
from ..lower import operator_table
from ..lower.sink import database_rows, encode, key_writer, value_writer
from ..operators.base import LoweringContext
from ..plan.catalog import Catalog
from ..plan.nodes import Scan, walk
from ..plan.inference import first_pairs
from ..plan.settings import (DATA_LOSS, INGESTION_ORDER, OFFSET_RESET, RESULT_MODE, interval_ms, kafka_client_properties,
                             table_client_properties, trigger_interval)
from ..plan.statements import PlannedQuery, PlannedStatement, StatementPlanner
from ..sql import ast, parse_script
from .batch_sink import QueryRun, sink_function
from .checkpoint_layout import check_fingerprint, drop_unfinished_first_batch, fingerprint, reset, save_layout, state_buckets
from .crash_points import crash_point
from .observed_counts import ObservedCounts
from .session import register_sources
from .storage import delete, embedded_root, home_location, local_path, under
from .transient import RowPrinter, TransientQuery, printed_batch

DEFAULT_HOME = ".streamjoin"
LOADED_TABLES = "loaded-tables"  # in a query's checkpoint: its static join tables, as loaded at its last start


@dataclass
class RunningQuery:
    """A started persistent query: its id, the sink it writes and the Spark query."""

    query_id: str
    sink: str
    topic: str
    spark_query: StreamingQuery
    planned: PlannedQuery
    checkpoint: str
    writer: object = None  # the foreachBatch function; it counts the rows it wrote
    value_writer: tuple[str, str] | None = None  # a binary sink's (format, schema): lower.sink.value_writer
    key_writer: tuple[str, str] | None = None  # an AVRO- or PROTOBUF-keyed sink's key schema: lower.sink.key_writer
    release: Callable[[], None] | None = None  # lets go of the Spark query (``runtime.batch_sink.sink_function``)
    spark: SparkSession | None = None  # the session it runs on (read from any thread: the status view's)

    def rows_written(self) -> int:
        return getattr(self.writer, "rows_written", 0)

    def process_all_available(self) -> None:
        self.spark_query.processAllAvailable()

    def metrics(self) -> dict:
        """Dropped-record counts and state size, read from the checkpoint (see ``runtime.metrics``)."""
        from .metrics import query_metrics

        return query_metrics(self.spark or SparkSession.getActiveSession(), self.checkpoint, self.spark_query.lastProgress)

    def stop(self) -> None:
        self.spark_query.stop()
        for done in (getattr(self.writer, "close", None), self.release):
            if done is not None:
                done()


@dataclass
class Engine:
    spark: SparkSession
    home: str = field(default_factory=lambda: os.environ.get("STREAMJOIN_HOME", DEFAULT_HOME))
    records_per_batch: int = 0  # 0: everything available in one micro-batch
    bootstrap_servers: str | None = field(default_factory=lambda: os.environ.get(BOOTSTRAP_ENV) or None)
    kafka_properties: dict = field(default_factory=dict, repr=False)  # the deployment's Kafka client properties
    catalog: Catalog = field(default_factory=Catalog)
    queries: list[RunningQuery] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    query_name_prefix: str = ""  # Spark query names must be unique in a session: set it when engines share one

    def __post_init__(self) -> None:
        self.home = home_location(self.home)  # a path, or a URI Hadoop's FileSystem resolves (runtime.storage)
        self.checkpoint_root = under(self.home, "checkpoints")
        if self.bootstrap_servers:
            self.catalog.properties.setdefault(BOOTSTRAP_PROPERTY, self.bootstrap_servers)
        self.store: TopicStore | KafkaTopics | None = None
        self._client: dict = {}  # the client properties the store's broker is reached with
        self._use_broker()
        if self.store is None:
            self.store = TopicStore(embedded_root(self.home))
        self.pending: list[PlannedQuery] = []
        self.stopped: dict[str, PlannedQuery] = {}  # SQLstream pumps created STOPPED or stopped by ALTER PUMP
        register_sources(self.spark)

    @property
    def topics_root(self) -> str | None:
        """The embedded topics' directory; None for a home not on local disk (its topics are on Kafka)."""
        return embedded_root(self.home) if local_path(self.home) is not None else None

    def _use_broker(self) -> None:
        """Topics live on the broker named by ``bootstrap.servers`` (flag, environment or SET), if any, reached
        with the script's client properties (``plan.settings.kafka_client_properties``)."""
        bootstrap = self.catalog.properties.get(BOOTSTRAP_PROPERTY)
        if not bootstrap:
            return
        client = self._client_properties()
        if getattr(self.store, "bootstrap", None) != bootstrap or client != self._client:
            use_client_properties(bootstrap, client)
            self.store, self._client = KafkaTopics(bootstrap), client

    def _client_properties(self) -> dict:
        tables = [table_client_properties(s.properties) for s in self.catalog.sources.values()]
        try:
            return kafka_client_properties(self.catalog.properties, tables, self.kafka_properties)
        except ValueError as err:  # the deployment's: a script's own are refused when planned
            raise StreamjoinError(f"Kafka client properties: {err}") from None

    def _sample(self, topic: str) -> list:
        """The first (key, value) records of ``topic`` (none when there is no such topic), to infer its schema."""
        return first_pairs(self.store, topic)

    # ------------------------------------------------------------------ public API

    def plan(self, sql: str) -> list[PlannedStatement]:
        """Parse, bind and validate a script against a copy of the catalog; nothing is started."""
        planner = StatementPlanner(_copy(self.catalog), operators=operator_table, sample_topic=self._sample)
        return [planner.plan(item) for item in parse_script(sql)]

    def execute(self, sql: str, *, start: bool = True,
                on_transient: Callable[[TransientQuery], object] | None = None) -> list[RunningQuery]:
        """Run a script: DDL updates the catalog, persistent queries start. Returns the started queries.

        A bare SELECT starts a transient query (``runtime.transient``: its rows are printed, nothing is stored)
        once the statements before it have run, and ``on_transient(query)`` waits for it — the CLI until its
        LIMIT or Ctrl-C; by default, until it has shown what its inputs hold now. The next statement runs after.

        With ``start=False`` the queries wait in ``pending`` until ``start_pending()`` (the conformance
        runner produces a case's inputs in between); a bare SELECT is then not run."""
        self._check(sql)  # refuse before any side effect
        planner = StatementPlanner(self.catalog, operators=operator_table, sample_topic=self._sample)
        started = []
        for item in parse_script(sql):
            planned = planner.plan(item)
            self._use_broker()
            if planned.created_topic:
                self.store.create(*planned.created_topic)
            if planned.produced:
                self.store.append([planned.produced])
            if planned.output:
                self.outputs.append(planned.output)
            if planned.dropped:
                self._stop_writers_of(planned.dropped)
            if planned.query and planned.query.transient:
                if start:
                    (on_transient or (lambda q: q.wait(once=True)))(self._start_transient(planned.query))
            elif planned.query and not planned.start:
                self.stopped[planned.query.query_id] = planned.query
            elif planned.query:
                started += self._run([planned.query], start)
            if planned.pump_action == "START":
                started += self._run([self.stopped.pop(q) for q in planned.pumps if q in self.stopped], start)
            elif planned.pump_action == "STOP":
                self._stop_pumps(planned.pumps, started)
        self.queries.extend(started)
        return started

    def _run(self, queries: list[PlannedQuery], start: bool) -> list[RunningQuery]:
        """Start ``queries`` now, or keep them in ``pending`` (``execute(start=False)``)."""
        if start:
            return [self._start(q) for q in queries]
        self.pending.extend(queries)
        return []

    def _stop_pumps(self, query_ids: tuple[str, ...], started: list[RunningQuery]) -> None:
        """SQLstream ``ALTER PUMP ... STOP``: the pumps' queries stop (their checkpoints stay, so a later START
        resumes them) and wait in ``stopped``."""
        for q in [q for q in self.queries + started if q.query_id in query_ids]:
            q.stop()
            (self.queries if q in self.queries else started).remove(q)
            self.stopped[q.query_id] = q.planned
        for planned in [p for p in self.pending if p.query_id in query_ids]:
            self.pending.remove(planned)
            self.stopped[planned.query_id] = planned

    def _check(self, sql: str) -> None:
        """Plan ``sql`` against a copy of the catalog, and check each query's checkpoint: layout, fingerprint, and
        that no query of that id runs already."""
        catalog = _copy(self.catalog)
        planner = StatementPlanner(catalog, operators=operator_table, sample_topic=self._sample)
        running = {q.query_id for q in self.queries}
        for item in parse_script(sql):
            planned = planner.plan(item).query
            if planned is None or planned.transient:  # a transient query has a fresh checkpoint of its own
                continue
            if planned.query_id in running:
                raise StatementError(f"query {planned.query_id} is running already", rule="query-running",
                                     pos=planned.statement.pos)
            _check_databases(planned)
            state_buckets(self.spark, planned.query_id, self._checkpoint(planned), catalog.properties)
            check_fingerprint(self.spark, planned.query_id, self._checkpoint(planned), _fingerprint(planned))

    def reset(self, query_id: str) -> bool:
        """Forget a query's checkpoint, so that it starts over (``streamjoin run --reset``)."""
        return reset(self.spark, under(self.checkpoint_root, query_id.upper()))

    def _checkpoint(self, planned: PlannedQuery) -> str:
        return under(self.checkpoint_root, planned.query_id)

    def start_pending(self) -> list[RunningQuery]:
        crash_point()  # a test's crash point that names no point is refused before anything starts
        started = [self._start(planned) for planned in self.pending]
        self.pending.clear()
        self.queries.extend(started)
        return started

    def explain(self, sql: str) -> str:
        """The logical and physical plan of every query in ``sql`` (DDL in it is applied to a copy)."""
        texts = []
        for planned in self.plan(sql):
            if planned.output:
                texts.append(planned.output)
            elif planned.query:
                from ..plan.explain import explain_text

                texts.append(explain_text(planned.query.plan, operator_table.declared_state, self.catalog.properties))
        return "\n\n".join(texts)

    def dataframe(self, query: RunningQuery | str) -> DataFrame:
        """A query's result as a Spark DataFrame (a batch read of its sink topic, decoded)."""
        name = query.sink if isinstance(query, RunningQuery) else query
        info = self.catalog.source(name)
        from ..connectors.reading import read_topic_batch

        return read_topic_batch(self.spark, self.store, info)

    def process_all_available(self) -> None:
        """Run every query until it has consumed all input, repeating while queries feed each other."""
        while True:
            before = self.store.committed_seq()
            for q in self.queries:
                q.process_all_available()
            if self.store.committed_seq() == before:
                return

    def stop(self) -> None:
        for q in self.queries:
            q.stop()
        self.queries.clear()
        close = getattr(self.store, "close", None)
        if close is not None:
            close()

    # ------------------------------------------------------------------ internals

    def _stop_writers_of(self, name: str) -> None:
        for q in [q for q in self.queries if q.sink.casefold() == name.casefold()]:
            q.stop()
            self.queries.remove(q)

    def _start(self, planned: PlannedQuery) -> RunningQuery:
        sink = planned.plan
        checkpoint = self._checkpoint(planned)
        lowered, letters, counts, late = self._lowered(planned, checkpoint, keeps_late=True)
        result = encode(sink, lowered)
        bootstrap = getattr(self.store, "bootstrap", None)
        name = self.query_name_prefix + planned.query_id
        run = QueryRun(self.spark, name, planned.query_id)
        if sink.target.database is not None:
            result = database_rows(sink, lowered)
            write = database_writer(sink.target.database, [sink.input.field(f).name for f in sink.value_fields],
                                    list(sink.target.key_columns), run.writer)
        elif bootstrap:
            write = kafka_writer(bootstrap, sink.target.topic, run.writer,
                                 from_executors=not self.spark.sparkContext.master.startswith("local"))
        else:
            write = topic_writer(self.topics_root, sink.target.topic, run.writer, sink.target.partitions)
        batch_function = sink_function(write, letters, counts, run, late)
        query = self._started(result, name, batch_function, checkpoint)
        return RunningQuery(planned.query_id, sink.target.name, sink.target.topic, query, planned, checkpoint,
                            write, value_writer(sink, lowered), key_writer(sink, lowered), batch_function.release, self.spark)

    def _start_transient(self, planned: PlannedQuery) -> TransientQuery:
        """Start a bare SELECT: its rows go to a ``RowPrinter`` (standard output), its checkpoint is a directory
        of its own, removed when it stops."""
        sink = planned.plan
        run = f"{planned.query_id}_{uuid.uuid4().hex[:8]}"  # one of many runs of the same statement
        checkpoint = under(self.home, "transient", run)
        lowered, letters, counts, _ = self._lowered(planned, checkpoint)
        printer = RowPrinter([f.name for f in sink.input.fields if not f.hidden], changelog=sink.target.kind == "TABLE",
                             limit=planned.limit, mode=str(self.catalog.properties.get(RESULT_MODE, "tableau")).lower())
        name = self.query_name_prefix + run
        batch_function = sink_function(printed_batch(sink, printer), letters, counts, QueryRun(self.spark, name, run))
        query = self._started(lowered, name, batch_function, checkpoint)
        return TransientQuery(planned.query_id, query, printer, checkpoint, batch_function.release, self.spark)

    def _started(self, result: DataFrame, name: str, batch_function: Callable, checkpoint: str) -> StreamingQuery:
        writer = (
            result.writeStream.queryName(name)
            .foreachBatch(batch_function)
            .option("checkpointLocation", checkpoint)
            .outputMode("append")
        )
        interval = trigger_interval(self.catalog.properties)
        if interval is not None:  # else a micro-batch starts as soon as the last one ends and input is there
            writer = writer.trigger(processingTime=f"{interval_ms(interval)} milliseconds")
        return writer.start()

    def _lowered(self, planned: PlannedQuery, checkpoint: str, keeps_late: bool = False
                 ) -> tuple[DataFrame, list[DeadLetters], ObservedCounts, Optional[LateRecords]]:
        """A query's result as a streaming DataFrame (before the sink's encoding), with the dead letters, drop
        counts and (``keeps_late``: a persistent query under ``SET 'streamjoin.late.topic'``) late records its
        micro-batches record; the checkpoint's state layout saved first."""
        sink = planned.plan
        buckets = state_buckets(self.spark, planned.query_id, checkpoint, self.catalog.properties)
        layout = save_layout(self.spark, checkpoint, buckets, _fingerprint(planned))
        drop_unfinished_first_batch(self.spark, checkpoint)
        bootstrap = getattr(self.store, "bootstrap", None)
        properties = self.catalog.properties
        options = SourceOptions(self.topics_root, self.records_per_batch, time_buckets=buckets, bootstrap=bootstrap,
                                starting_offsets=str(properties.get(OFFSET_RESET, "earliest")).lower(),
                                ingestion_order=properties.get(INGESTION_ORDER, "timestamp"),
                                fail_on_data_loss=properties.get(DATA_LOSS, "true").lower() != "false",
                                client_properties=tuple(sorted(self._client.items())))
        dead_letter_topic = self.catalog.properties.get(DEAD_LETTER_PROPERTY, DEAD_LETTER_TOPIC)
        letters: list[DeadLetters] = []  # one per scan, made while lowering

        def dead_letters(source: str, explain: Callable) -> DeadLetters:
            letters.append(DeadLetters(planned.query_id, source, dead_letter_topic, root=self.topics_root, bootstrap=bootstrap,
                                       explain=explain))
            return letters[-1]

        counts = ObservedCounts(checkpoint)
        late = None
        if keeps_late and properties.get(LATE_TOPIC_PROPERTY):
            late = LateRecords(planned.query_id, properties[LATE_TOPIC_PROPERTY], root=self.topics_root, bootstrap=bootstrap)
            late.create_topic()
        loaded_tables = under(checkpoint, LOADED_TABLES)
        delete(self.spark, loaded_tables)  # an earlier start's
        ctx = LoweringContext(checkpoint_dir=checkpoint, properties=dict(self.catalog.properties),
                              time_buckets=options.time_buckets, dead_letters=dead_letters,
                              observe_counts=counts.observe_counts,
                              side_topics=tuple(side_topics(sink)), plan=sink, loaded_tables=loaded_tables,
                              meta_in_value_state=layout == 1, late_records=late)
        records = read_inputs(self.spark, sink, options)
        return lower(sink.input, records, ctx), letters, counts, late


def _fingerprint(planned: PlannedQuery) -> dict:
    text = masked_text(planned.statement.text)  # stored in the checkpoint: no secret in it
    if isinstance(planned.statement.statement, ast.CreatePump):  # STARTED / STOPPED is no change to the query
        text = text[re.search(r"(?i)\bas\s+insert\b", text).start():]
    return fingerprint(text, [n.source for n in walk(planned.plan) if isinstance(n, Scan)],
                       operator_table.declared_states(planned.plan))


def _check_databases(planned: PlannedQuery) -> None:
    """Refuse, before anything starts, a query whose database table cannot be read as declared."""
    from ..connectors.database import check_table, describe_failure, parse_url

    tables = [n.source for n in walk(planned.plan) if isinstance(n, Scan)] + [planned.plan.target]
    for source in [t for t in tables if t.database is not None]:
        db = source.database
        columns = [(c.name, c.type) for c in source.columns if c.computed is None]
        try:
            check_table(parse_url(db.url, db.username, db.password), db.table, columns)
        except Exception as err:  # noqa: BLE001 - whatever the driver raises, named and masked
            raise StatementError(describe_failure(err, db.table, db.url, db.password), rule="database-table",
                                 pos=planned.statement.pos) from None


def _copy(catalog: Catalog) -> Catalog:
    return Catalog(dict(catalog.sources), dict(catalog.views), dict(catalog.functions), dict(catalog.properties),
                   set(catalog.schemas), catalog.schema, dict(catalog.pumps), dict(catalog.servers))
