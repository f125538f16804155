"""The ``streamjoin`` command: run scripts, run conformance cases, use embedded topics, show plans."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamjoin", description=__doc__)
    parser.add_argument("--home", default=os.environ.get("STREAMJOIN_HOME", ".streamjoin"),
                        help="where embedded topics and checkpoints live (default .streamjoin)")
    parser.add_argument("--verbose", action="store_true",
                        help="show Spark's and its Python workers' logs here (default: into <home>/logs/spark.log)")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a script's persistent queries until interrupted")
    run.add_argument("script")
    run.add_argument("--master", help="Spark master URL (default local[2])")
    run.add_argument("--once", action="store_true", help="process what is available, then stop")
    run.add_argument("--max-records-per-batch", type=int, default=0, help="cap each micro-batch at N input records")
    run.add_argument("--bootstrap-servers", default=os.environ.get("STREAMJOIN_BOOTSTRAP_SERVERS"),
                     help="read and write Kafka topics on this broker (default: the embedded topics)")
    _kafka_properties_option(run)
    run.add_argument("--reset", action="append", default=[], metavar="QUERY",
                     help="start this query over (its checkpoint is deleted; its sink receives its output again)")
    run.add_argument("--ui", action="store_true", help="serve Spark's web UI (its address is in the status view)")

    demo = sub.add_parser("demo", help="run the bundled demo on the embedded default and print its output")
    demo.add_argument("--master")

    test = sub.add_parser("test", help="run conformance cases (ksqlDB query-validation-test layout)")
    test.add_argument("paths", nargs="+")
    test.add_argument("--records-per-batch", default="all", help="N records per micro-batch, or 'all'")
    test.add_argument("--filter", default="", help="only cases whose name contains this text")
    test.add_argument("--json", dest="json_file", help="write results as JSON to this file")
    test.add_argument("--workers", type=int, default=1, help="cases run at once on the one SparkSession")
    test.add_argument("--bootstrap-servers", help="run the cases on Kafka topics on this broker "
                      "('local': start a throw-away broker on 127.0.0.1; the case's topics are deleted)")
    test.add_argument("--master")

    shell = sub.add_parser("shell", help="type statements and watch their results (as ksqlDB's CLI, Flink's SQL client)")
    shell.add_argument("--master", help="Spark master URL (default local[2])")
    shell.add_argument("--bootstrap-servers", default=os.environ.get("STREAMJOIN_BOOTSTRAP_SERVERS"),
                       help="read and write Kafka topics on this broker (default: the embedded topics)")
    _kafka_properties_option(shell)

    explain = sub.add_parser("explain", help="show what each query of a script runs: as text, or drawn as a graph")
    explain.add_argument("script")
    explain.add_argument("--format", default="text", choices=["text", "svg", "dot", "mermaid"],
                         help="text (default), or a drawing of each query: svg (opens in a browser), dot (Graphviz), "
                              "mermaid")
    explain.add_argument("--output", "-o", help="write it to this file (default: standard output)")
    explain.add_argument("--bootstrap-servers", default=os.environ.get("STREAMJOIN_BOOTSTRAP_SERVERS"),
                         help="explain the queries as they run on this broker (default: the embedded topics)")

    topic = sub.add_parser("topic", help="embedded topics, or a broker's with --bootstrap-servers")
    topic.add_argument("--bootstrap-servers", default=os.environ.get("STREAMJOIN_BOOTSTRAP_SERVERS"))
    _kafka_properties_option(topic)
    tsub = topic.add_subparsers(dest="topic_command", required=True)
    produce = tsub.add_parser("produce", help="append JSON lines from stdin to a topic")
    produce.add_argument("name", nargs="?", help="the topic (with --envelope, a line's own \"topic\" wins)")
    produce.add_argument("--key-field", help="take each record's key from this field of the value")
    produce.add_argument("--timestamp-field", help="take each record's timestamp (ms) from this field")
    produce.add_argument("--envelope", action="store_true",
                         help='each line is {"topic": .., "key": .., "value": .., "timestamp": ..} (value null = '
                              'tombstone; "topic" optional): one file feeds several topics in one ingestion order')
    produce.add_argument("--partitions", type=int, default=1)
    cat = tsub.add_parser("cat", help="print a topic's records as JSON lines")
    cat.add_argument("name")
    tsub.add_parser("list", help="list topics")

    args = parser.parse_args(argv)
    handler = {"run": _run, "demo": _demo, "test": _test, "shell": _shell, "explain": _explain, "topic": _topic}[args.command]
    if args.command in ("run", "demo", "test", "shell") and not args.verbose:
        _quiet(_log_path(args.home))
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # user-facing: one line, not a traceback
        from .errors import StreamjoinError
        from .sql import SqlSyntaxError

        if isinstance(err, (StreamjoinError, SqlSyntaxError)):
            print(f"error: {err}", file=sys.stderr)
            return 2
        raise


def _log_path(home: str) -> str:
    """Where this process's Spark log goes: ``logs/spark.log`` under the home, a local file (a ``file://`` home is
    its path; a home on another store, ``s3a://`` or ``hdfs://``, keeps its log in the local temporary folder)."""
    from urllib.parse import urlparse

    url = urlparse(home)
    if url.scheme and len(url.scheme) > 1:  # a one-letter scheme is a Windows drive
        home = url.path if url.scheme == "file" else os.path.join(tempfile.gettempdir(), "streamjoin")
    return os.path.join(home, "logs", "spark.log")


def _quiet(log_path: str) -> None:
    """Send what the JVM and Spark's Python workers write to their standard error (Spark's log, the workers'
    chatter) to ``log_path``; streamjoin's own messages still reach the terminal. Spark is started later, as
    a child process of this one, and inherits the redirected stream."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    terminal = os.dup(2)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 2)
    sys.stderr = os.fdopen(terminal, "w", buffering=1)
    print(f"Spark's logs go to {log_path} (--verbose shows them here)", file=sys.stderr)


def _session(master=None, ui: bool = False):
    from .runtime.session import build_session

    return build_session(master, conf={"spark.ui.enabled": "true"} if ui else None)


def _run(args) -> int:
    from .runtime.engine import Engine
    from .runtime.progress import LiveView, Status, status_lines, status_table
    from .sql import read_script

    script = read_script(args.script)  # before Spark starts: a file that cannot be read is refused at once
    engine = Engine(_session(args.master, args.ui), home=args.home, records_per_batch=args.max_records_per_batch,
                    bootstrap_servers=args.bootstrap_servers, kafka_properties=_kafka_properties(args))
    for query_id in args.reset:
        if engine.reset(query_id):
            print(f"query {query_id.upper()} starts over: it reads its inputs from the beginning, and its sink "
                  "receives its whole output again")
    # a bare SELECT prints its rows until its LIMIT or Ctrl-C (with --once: what its inputs hold), then the script goes on
    queries = engine.execute(script, on_transient=lambda query: query.wait(once=args.once))
    for text in engine.outputs:
        print(text)
    if not queries:
        return 0
    status = Status(engine)
    if args.once:
        engine.process_all_available()
        for line in status_lines(status.queries()):
            print(line)
        engine.stop()
        return 0
    print(f"running {len(queries)} queries; Ctrl-C stops them (running again resumes from the checkpoints)")
    live = LiveView(sys.stdout) if sys.stdout.isatty() else None  # on a terminal: a table redrawn in place
    print(status.spark_ui())
    try:
        while True:
            time.sleep(2 if live else 5)
            if live:
                live.draw(status_table(status.queries()))
            else:
                for line in status_lines(status.queries()):
                    print(line, flush=True)
    except KeyboardInterrupt:
        engine.stop()
        print("stopped")
    return 0


def _kafka_properties_option(parser) -> None:
    parser.add_argument("--kafka-properties", default=os.environ.get("STREAMJOIN_KAFKA_PROPERTIES"), metavar="FILE",
                        help="Kafka client properties (security.protocol, sasl.*, ssl.*: librdkafka's or Java's names), "
                             "one key=value a line, as Kafka's tools take them")


def _kafka_properties(args) -> dict:
    """The client properties of ``--kafka-properties FILE`` (none without it), refused if unusable."""
    from .connectors.kafka_client import client_properties, read_properties_file
    from .errors import StreamjoinError

    if not args.kafka_properties:
        return {}
    try:
        given = read_properties_file(args.kafka_properties)
        client_properties(given)
    except (OSError, ValueError) as err:
        raise StreamjoinError(f"--kafka-properties {args.kafka_properties}: {err}") from None
    return given


def _shell(args) -> int:
    from .shell import Shell, loop

    def engine():
        from .runtime.engine import Engine

        return Engine(_session(args.master), home=args.home, bootstrap_servers=args.bootstrap_servers,
                      kafka_properties=_kafka_properties(args))

    return loop(Shell(engine), args.home)


def _demo(args) -> int:
    from .demo import run_demo

    return run_demo(_session(args.master), args.home)


def _test(args) -> int:
    from .conformance.cases import load_cases
    from .conformance.report import run_and_report

    per_batch = 0 if args.records_per_batch == "all" else int(args.records_per_batch)
    cases = [c for c in load_cases(args.paths) if args.filter.casefold() in c.name.casefold()]

    def run(bootstrap):
        return run_and_report(_session(args.master), cases, records_per_batch=per_batch, bootstrap=bootstrap,
                              json_file=args.json_file, workers=args.workers)

    if args.bootstrap_servers == "local":
        from .connectors.local_broker import local_broker

        with local_broker() as bootstrap:
            return run(bootstrap)
    return run(args.bootstrap_servers)


def _explain(args) -> int:
    from .connectors.kafka_client import BOOTSTRAP_PROPERTY
    from .connectors.topic_store import TopicStore
    from .lower import operator_table
    from .plan.catalog import Catalog
    from .plan.drawing import draw
    from .plan.explain import explain_text, query_graph
    from .plan.inference import first_pairs
    from .plan.statements import StatementPlanner
    from .sql import parse_script, read_script

    root = os.path.join(args.home, "topics")  # a Lenses query's undeclared topics (``plan.inference``)
    sample = partial(first_pairs, TopicStore(root)) if os.path.isdir(root) and not args.bootstrap_servers else None
    catalog = Catalog()
    if args.bootstrap_servers:
        catalog.properties[BOOTSTRAP_PROPERTY] = args.bootstrap_servers
    planner = StatementPlanner(catalog, operators=operator_table, sample_topic=sample)
    texts, graphs = [], []
    for item in parse_script(read_script(args.script)):
        planned = planner.plan(item)
        if planned.output:
            texts.append(planned.output)
        if planned.query:
            query = planned.query
            texts.append(f"-- {query.query_id}\n" + explain_text(query.plan, operator_table.declared_state,
                                                                  catalog.properties))
            graphs.append(query_graph(query.plan, operator_table.declared_state, catalog.properties, query.query_id))
    document = "\n".join(texts) + "\n" if args.format == "text" else draw(graphs, args.format)
    if args.output:
        Path(args.output).write_text(document)
    else:
        sys.stdout.write(document)
    return 0


def _topic(args) -> int:
    from .topics import Topics

    with Topics(args.home, bootstrap_servers=args.bootstrap_servers, kafka_properties=_kafka_properties(args)) as topics:
        if args.topic_command == "list":
            for name in topics.list():
                print(name)
            return 0
        if args.topic_command == "cat":
            for record in topics.read(args.name):
                print(json.dumps(record))
            return 0
        records = []
        for number, line in enumerate(sys.stdin, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as err:
                print(f"error: line {number} is not JSON: {err}", file=sys.stderr)
                return 2
            record = dict(obj) if args.envelope else {
                "key": obj.get(args.key_field) if args.key_field else None, "value": obj,
                "timestamp": int(obj[args.timestamp_field]) if args.timestamp_field else None}
            record["topic"] = (obj.get("topic") if args.envelope else None) or args.name
            if not record["topic"]:
                print(f"error: line {number} names no topic (give one, or a \"topic\" field with --envelope)",
                      file=sys.stderr)
                return 2
            records.append(record)
        if not records and args.name:
            topics.create(args.name, args.partitions)
        topics.produce(records, partitions=args.partitions)
        names = list(dict.fromkeys(r["topic"] for r in records)) or ([args.name] if args.name else [])
        print(f"{len(records)} records appended to {', '.join(names)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
