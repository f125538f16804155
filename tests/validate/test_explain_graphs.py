"""EXPLAIN as a picture: every seed query drawn as SVG (well-formed, naming its operator), DOT and Mermaid, and
the text form telling the same steps. Planned only: no Spark."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import pytest

from streamjoin.cli import main
from streamjoin.conformance.cases import load_cases
from streamjoin.errors import StreamjoinError
from streamjoin.lower import operator_table
from streamjoin.plan.catalog import Catalog
from streamjoin.plan.drawing import draw
from streamjoin.plan.explain import explain_text, query_graph
from streamjoin.plan.nodes import Aggregate, Filter, Join, walk
from streamjoin.plan.statements import StatementPlanner
from streamjoin.sql import parse_script

from ..conftest import SEED_CASES

SVG = "{http://www.w3.org/2000/svg}"


def planned_queries(case):
    catalog = Catalog()
    catalog.properties.update({k: str(v) for k, v in case.properties.items()})
    planner = StatementPlanner(catalog, operators=operator_table)
    script = "\n".join(s if s.rstrip().endswith(";") else s + ";" for s in case.statements)
    try:
        return [(p.query, catalog) for item in parse_script(script) if (p := planner.plan(item)).query is not None]
    except StreamjoinError:
        return []  # a case that expects a refusal


def operators_of(plan) -> list[str]:
    """What each operator step of a query's graph must name: its module, or how a stateless join runs."""
    names = []
    for node in walk(plan):
        if isinstance(node, Join):
            names.append("Broadcast hash join" if node.static_table else f"operators.{node.operator}")
        elif isinstance(node, (Aggregate, Filter)) and node.operator:
            names.append(f"operators.{node.operator}")
    return names


SEED_QUERIES = [(case.id, query, catalog) for case in load_cases([str(SEED_CASES)])
                for query, catalog in planned_queries(case)]


def test_the_seed_cases_have_queries_to_draw():
    assert len(SEED_QUERIES) >= 40 and any(operators_of(q.plan) for _, q, _ in SEED_QUERIES)


@pytest.mark.parametrize("case_id, query, catalog", SEED_QUERIES, ids=[f"{c}:{q.query_id}" for c, q, _ in SEED_QUERIES])
def test_each_seed_query_draws_as_svg_naming_its_operator(case_id, query, catalog):
    graph = query_graph(query.plan, operator_table.declared_state, catalog.properties, query.query_id)
    root = ElementTree.fromstring(draw([graph], "svg"))
    assert root.tag == f"{SVG}svg"
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    boxes = [g for g in root.iter(f"{SVG}g") if "step" in g.get("class", "").split()]
    assert len(boxes) == len(graph.steps)
    for operator in operators_of(query.plan):
        assert operator in texts
    # the sink is drawn, and every stateful operator's box says what it keeps and when it is purged
    assert query.query_id in texts and any("sink" in g.get("class") for g in boxes)
    for step in graph.steps:
        if step.kind == "operator" and step.title.startswith(("Join (", "Aggregate (", "Table filter (")):
            assert any(line.startswith("purged: ") for line in step.lines), step


def test_boxes_do_not_overlap_and_edges_point_down():
    case_id, query, catalog = next(q for q in SEED_QUERIES if len(operators_of(q[1].plan)) >= 2)
    root = ElementTree.fromstring(draw([query_graph(query.plan, operator_table.declared_state, catalog.properties)], "svg"))
    rects = [tuple(float(r.get(a)) for a in ("x", "y", "width", "height")) for r in root.iter(f"{SVG}rect") if r.get("x")]
    for i, (x, y, w, h) in enumerate(rects):
        for (x2, y2, w2, h2) in rects[i + 1:]:
            assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y
    for line in root.iter(f"{SVG}line"):
        assert float(line.get("y2")) > float(line.get("y1"))


def test_dot_and_mermaid_hold_every_step_and_edge():
    graphs = [query_graph(q.plan, operator_table.declared_state, c.properties, q.query_id) for _, q, c in SEED_QUERIES[:6]]
    dot, mermaid = draw(graphs, "dot"), draw(graphs, "mermaid")
    assert dot.startswith("digraph streamjoin {") and dot.count("subgraph cluster_") == len(graphs)
    assert dot.count("{") == dot.count("}")
    assert mermaid.startswith("flowchart TD") and mermaid.count("  end\n") == len(graphs)
    for q, graph in enumerate(graphs):
        for step in graph.steps:
            assert re.search(rf"^    q{q}_{step.number} \[label=", dot, re.M)
            assert re.search(rf'^    q{q}_{step.number}\["', mermaid, re.M)
        for a, b, _ in graph.edges:
            assert f"q{q}_{a} -> q{q}_{b}" in dot and re.search(rf"q{q}_{a} -->(\|[^|]*\|)? q{q}_{b}\b", mermaid)
    assert '"' not in "".join(re.findall(r'\["(.*)"\]', mermaid))  # quotes inside labels are entity codes


def test_text_tells_the_same_steps_in_the_order_records_flow():
    _, query, catalog = next(q for q in SEED_QUERIES if "operators.stream_stream" in operators_of(q[1].plan))
    text = explain_text(query.plan, operator_table.declared_state, catalog.properties)
    graph = query_graph(query.plan, operator_table.declared_state, catalog.properties)
    listed = re.findall(r"^  \[(\d+)\] (.*?)(?:  <- .*)?$", text, re.M)
    assert [(int(n), title) for n, title in listed] == [(s.number, s.title) for s in graph.steps]
    assert all(a < b for a, b, _ in graph.edges)  # what feeds a step is listed before it
    assert "retention" in text and "Shuffle by hash bucket of the join key" in text


def test_kafka_input_is_named_as_kafka():
    script = ("CREATE STREAM a (id INT KEY, v STRING) WITH (kafka_topic='a', value_format='JSON');"
              "CREATE TABLE b (id INT PRIMARY KEY, w STRING) WITH (kafka_topic='b', value_format='JSON');"
              "CREATE STREAM c AS SELECT a.id, v, w FROM a JOIN b ON a.id = b.id;")
    catalog = Catalog()
    catalog.properties["bootstrap.servers"] = "127.0.0.1:9092"
    planner = StatementPlanner(catalog, operators=operator_table)
    (query,) = [p.query for item in parse_script(script) if (p := planner.plan(item)).query]
    notes = query_graph(query.plan, None, catalog.properties).notes
    assert notes == ["Input: one Spark source reads a, b from Kafka at 127.0.0.1:9092, partitions merged by record timestamp"]


@pytest.mark.parametrize("fmt", ["svg", "dot", "mermaid", "text"])
def test_the_explain_command_writes_each_format(tmp_path, fmt, capsys):
    script = tmp_path / "app.sql"
    script.write_text("CREATE STREAM a (id INT KEY, v STRING) WITH (kafka_topic='a', value_format='JSON');\n"
                      "CREATE STREAM b (id INT KEY, w STRING) WITH (kafka_topic='b', value_format='JSON');\n"
                      "CREATE STREAM c AS SELECT a.id, v, w FROM a JOIN b WITHIN 1 MINUTE ON a.id = b.id;\n"
                      "CREATE TABLE n AS SELECT id, COUNT(*) AS k FROM a GROUP BY id;\n")
    out = tmp_path / f"plan.{fmt}"
    assert main(["--home", str(tmp_path / "home"), "explain", str(script), "--format", fmt, "-o", str(out)]) == 0
    document = out.read_text()
    for name in ("CSAS_C", "CTAS_N", "operators.stream_stream", "operators.aggregate"):
        assert name in document
    if fmt == "svg":
        assert ElementTree.fromstring(document).tag == f"{SVG}svg"


def test_a_late_records_topic_is_named():
    script = ("SET 'streamjoin.late.topic' = 'late';"
              "CREATE STREAM a (id INT KEY, v STRING) WITH (kafka_topic='a', value_format='JSON');"
              "CREATE STREAM b (id INT KEY, w STRING) WITH (kafka_topic='b', value_format='JSON');"
              "CREATE STREAM c AS SELECT a.id, v, w FROM a JOIN b WITHIN 1 MINUTE ON a.id = b.id;")
    catalog = Catalog()
    planner = StatementPlanner(catalog, operators=operator_table)
    (query,) = [p.query for item in parse_script(script) if (p := planner.plan(item)).query]
    assert any("written to topic late" in note for note in query_graph(query.plan, None, catalog.properties).notes)
