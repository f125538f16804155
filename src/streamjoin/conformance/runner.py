"""Running conformance cases through the engine, exactly as a user's queries run.

Each case gets a fresh engine home (topics and checkpoints) on one shared SparkSession: its statements
are executed by ``Engine.execute`` (so a refused statement starts nothing), its inputs are produced in
list order — to the embedded topics as one commit, or, with ``bootstrap``, to a Kafka broker — and only
then do its queries start; every query runs until it has consumed everything — ``records_per_batch``
records per micro-batch, or all at once — and the sink topics are read back and compared with the
expected outputs.

On a broker, the case's topics are deleted before and after it, and its queries merge their input
partitions by the producer sequence the runner stamps on each record (``streamjoin.ingestion.order`` =
``produced``): that is the case's input list order, as on the embedded default.
"""
from __future__ import annotations

import base64
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

from pyspark.sql import SparkSession

from ..connectors.formats import (
    encode_key, encode_value, json_default, key_as_json, ksql_json_default, value_as_json, window_bytes,
)
from ..connectors.topic_store import Record, TopicStore
from ..errors import NotYetSupported, StreamjoinError
from ..plan.settings import INGESTION_ORDER
from ..plan.catalog import Catalog
from ..plan.statements import PlannedStatement, StatementPlanner
from ..runtime.engine import DEAD_LETTER_PROPERTY, DEAD_LETTER_TOPIC, Engine
from ..sql import SqlSyntaxError, ast, parse_script
from .cases import Case
from .compare import actual_record, compare
from .post import check_post


@dataclass(frozen=True)
class CaseResult:
    case: Case
    status: str  # 'pass', 'fail', 'skip'
    detail: str = ""
    seconds: float = 0.0
    outputs: tuple = ()
    unchecked: tuple[str, ...] = ()  # parts of the case's ``post`` this runner cannot check (``conformance.post``)


def produce_inputs(store: TopicStore, inputs, catalog=None) -> None:
    """Append the case's inputs in list order; values are written in their topic's declared format (a JSON_SR key
    or value behind a Schema Registry serializer's framing, as ksqlDB's test runner writes them)."""
    formats = _topic_formats(catalog)
    batches = []
    for i in inputs:
        topic = _input_topic(i["topic"], formats)
        source = formats.get(topic)
        key = with_registry_framing(encode_key(i.get("key"), source), source, "key")
        value = with_registry_framing(encode_value(i.get("value"), source), source, "value")
        batches.append((topic, [Record(windowed_key(key, i.get("window")), value, int(i.get("timestamp", 0)),
                                       headers=decode_headers(i.get("headers")))]))
    store.append(batches)


SCHEMA_ID = 1  # the schema id the framing of a JSON_SR input names (no registry is asked for it)


def with_registry_framing(data: Optional[bytes], source, part: str) -> Optional[bytes]:
    """``data`` behind a Schema Registry serializer's framing (a zero byte, a 4-byte schema id) when ``source``'s
    ``part`` is JSON_SR."""
    if data is None or source is None or not source.registry_framed(part):
        return data
    return b"\x00" + SCHEMA_ID.to_bytes(4, "big") + data


def _binary_key_as_json(writer: tuple[str, str], key: bytes, window: Optional[tuple[str, int]]) -> bytes:
    """An AVRO or PROTOBUF key as JSON text; a windowed key's window bytes (after the key) kept as they are."""
    size = 0 if window is None else window_bytes(window[0])
    if size and len(key) >= size:
        return (key_as_json(writer, key[:-size]) if len(key) > size else b"") + key[-size:]
    return key_as_json(writer, key)


def windowed_key(key: Optional[bytes], window: Optional[dict]) -> Optional[bytes]:
    """A case record's key with its ``window`` as Kafka Streams writes a windowed key: + 8-byte start (a time
    window), + 8-byte end + 8-byte start (a session)."""
    if window is None:
        return key
    bounds = (window["end"], window["start"]) if str(window.get("type", "time")).casefold() == "session" else (window["start"],)
    return (key or b"") + b"".join(int(b).to_bytes(8, "big", signed=True) for b in bounds)


def _input_topic(named: str, formats: dict) -> str:
    """The topic a case's input goes to: the topic it names when a source reads it; else the topic of the
    one declared source whose topic or name it names in another case, or without its schema (a SQLstream
    native stream ``zoo.events`` reads topic ``ZOO.EVENTS``: ``events`` names it)."""
    if named in formats or not formats:
        return named
    wanted = named.casefold()
    matches = {topic for topic, source in formats.items()
               if wanted in (topic.casefold(), source.name.casefold(), source.name.rsplit(".", 1)[-1].casefold())}
    return matches.pop() if len(matches) == 1 else named


def decode_headers(headers) -> tuple:
    """A case record's headers, as ksqlDB's test files write them: ``[{"KEY": name, "VALUE": base64}]``."""
    return tuple((h["KEY"], None if h.get("VALUE") is None else base64.b64decode(h["VALUE"])) for h in headers or ())


def _topic_formats(catalog) -> dict:
    formats: dict = {}
    for source in (catalog.sources.values() if catalog is not None else ()):
        if source.topic and not source.created_by_query:
            formats.setdefault(source.topic, source)
    return formats


def run_case(spark: SparkSession, case: Case, *, records_per_batch: int = 0, bootstrap: Optional[str] = None,
             query_name_prefix: str = "") -> CaseResult:
    started = time.monotonic()
    home = tempfile.mkdtemp(prefix="sjcase-")
    engine = Engine(spark, home=home, records_per_batch=records_per_batch, bootstrap_servers=bootstrap,
                    query_name_prefix=query_name_prefix)
    engine.catalog.properties.update({k: str(v) for k, v in case.properties.items()})
    if bootstrap:
        engine.catalog.properties.setdefault(INGESTION_ORDER, "produced")
    sql = "\n".join(s if s.rstrip().endswith(";") else s + ";" for s in case.statements)
    topics: set[str] = set()
    try:
        try:
            if bootstrap:
                topics = _case_topics(engine, sql, case)
                _delete(engine.store, topics)
            produced = _inputs_before_planning(engine, sql, case)
            engine.execute(sql, start=False)
        except (StreamjoinError, SqlSyntaxError) as err:
            return _refused(case, err, started)
        if case.expected_error is not None:
            return CaseResult(case, "fail", f"expected an error containing {case.expected_error!r}, but the statements ran",
                              time.monotonic() - started)
        if not produced:
            produce_inputs(engine.store, case.inputs, engine.catalog)
        engine.start_pending()
        engine.process_all_available()
        expected = [dict(o, topic=_output_topic(o["topic"], engine).casefold()) for o in case.outputs]
        expected_topics = {o["topic"] for o in expected}
        actual = _read_sinks(engine, expected_topics)
        actual = [a for a in actual if a["topic"].casefold() in expected_topics or not expected_topics]
        for a in actual:
            a["topic"] = a["topic"].casefold()
        problem = compare(expected, actual, ordering=case.ordering, mode=case.compare)
        post_problem, unchecked = check_post(case.post, engine.catalog, engine.store.topics())
        problem = problem or post_problem
        status = "pass" if problem is None else "fail"
        return CaseResult(case, status, problem or "", time.monotonic() - started, tuple(actual), unchecked)
    except Exception as err:  # a crash is a failure of this case, not of the run
        return CaseResult(case, "fail", f"{type(err).__name__}: {err}", time.monotonic() - started)
    finally:
        engine.stop()
        _delete(engine.store, topics)
        shutil.rmtree(home, ignore_errors=True)


def _output_topic(named: str, engine: Engine) -> str:
    """The topic an expected output names: a sink's topic, or (as for inputs) the topic of the one stream
    or table named so, with or without its schema."""
    sinks = {q.topic.casefold() for q in engine.queries}
    if named.casefold() in sinks:
        return named
    return _input_topic(named, {s.topic: s for s in engine.catalog.sources.values() if s.topic})


def _case_topics(engine: Engine, sql: str, case: Case) -> set[str]:
    try:
        planned = engine.plan(sql)
    except StreamjoinError:  # e.g. a Lenses query over a topic with no records yet: its declarations' topics
        planned = _declarations(sql, engine.catalog.properties)[1]
    dead = engine.catalog.properties.get(DEAD_LETTER_PROPERTY, DEAD_LETTER_TOPIC)
    return {p.created_topic[0] for p in planned if p.created_topic} | {i["topic"] for i in case.inputs} | {dead}


def _declarations(sql: str, properties: dict) -> tuple[Catalog, list[PlannedStatement]]:
    """The script's declarations alone (its CREATE STREAM/TABLE, schema and type statements), planned on a catalog
    of their own, under the case's ``properties``."""
    planner = StatementPlanner(Catalog())
    planner.catalog.properties.update(properties)
    declarations = (ast.CreateSource, ast.CreateSchema, ast.SetSchema, ast.CreateType, ast.DropType)
    planned = [planner.plan(item) for item in parse_script(sql) if isinstance(item.statement, declarations)]
    return planner.catalog, planned


def _inputs_before_planning(engine: Engine, sql: str, case: Case) -> bool:
    """Produce the case's inputs before its script is planned when one of them goes to a topic no statement
    declares: a Lenses query reads such a topic by the schema its records imply (``plan.inference``), so they
    must be there first. The declared topics are created first, with their partitions. False (nothing done)
    for every other case, whose inputs are produced after planning, in their declared formats."""
    catalog, planned = _declarations(sql, engine.catalog.properties)
    formats = _topic_formats(catalog)
    if all(_input_topic(i["topic"], formats) in formats for i in case.inputs):
        return False
    for p in planned:
        if p.created_topic:
            engine.store.create(*p.created_topic)
    produce_inputs(engine.store, case.inputs, catalog)
    return True


def _delete(store, topics) -> None:
    for topic in topics:
        store.delete(topic)


def _refused(case: Case, err: Exception, started: float) -> CaseResult:
    elapsed = time.monotonic() - started
    if case.expected_error is None:
        reason = "not yet supported" if isinstance(err, NotYetSupported) else "refused"
        return CaseResult(case, "fail", f"{reason}: {err}", elapsed)
    if case.expected_error.casefold() in str(err).casefold():
        return CaseResult(case, "pass", str(err), elapsed)
    return CaseResult(case, "fail", f"error {str(err)!r} does not contain {case.expected_error!r}", elapsed)


def _read_sinks(engine: Engine, expected_topics: set[str]) -> list[dict]:
    """The records of every query's sink topic, and of the dead-letter topic when a case expects some."""
    topics = list(dict.fromkeys(q.topic for q in engine.queries))
    dead = engine.catalog.properties.get(DEAD_LETTER_PROPERTY, DEAD_LETTER_TOPIC)
    if dead.casefold() in expected_topics and engine.store.exists(dead):
        topics.append(dead)
    writers = {q.topic: q.value_writer for q in engine.queries if q.value_writer}
    key_writers = {q.topic: q.key_writer for q in engine.queries if q.key_writer}
    windows = {q.topic: q.planned.plan.target.window for q in engine.queries}
    # a ksqlDB sink's Avro or Protobuf record shown as ksqlDB's tests give one: its times as numbers
    defaults = {q.topic: ksql_json_default for q in engine.queries if q.planned.plan.target.dialect == "ksql"}
    out = []
    for topic in topics:
        for r in engine.store.records(topic):
            value = (r.value if r.value is None or topic not in writers
                     else value_as_json(writers[topic], r.value, defaults.get(topic, json_default)))
            key = r.key if r.key is None or topic not in key_writers else _binary_key_as_json(
                key_writers[topic], r.key, windows.get(topic))
            out.append(actual_record(topic, key, value, r.timestamp, windows.get(topic)))
    return out
