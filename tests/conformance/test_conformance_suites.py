"""The conformance suites — the seed cases, the pending seed cases and our own (``cases/``) — through the
engine, at one record per batch and all at once.

Cases whose join operator is not built yet are listed in ``known_failures.txt`` with the issue that
builds it. The suite fails if an unlisted case fails, or if a listed case passes (so the list shrinks).
Outputs must not depend on the batch cut: both runs must produce the same records. The seed cases are cut
at every record, as the product promises. Our own cases are cut only where a cut could matter, a query that
keeps operator state (a join, an aggregate, a table filter): at every record up to ``SHORT_CASE`` records, every
``CUT`` records up to ``LONG_CASE``, and every ``LONG_CUT`` beyond, always into two batches at least. That keeps
the suite's time in bounds: it is CPU-bound, a query start costs about a second of the machine and a micro-batch about half of one. The
operators' own tests cut every one of their steps at every record.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamjoin.conformance.cases import load_cases
from streamjoin.conformance.report import run_cases, summary_line
from streamjoin.errors import StreamjoinError
from streamjoin.lower import operator_table
from streamjoin.plan.catalog import Catalog
from streamjoin.plan.nodes import walk
from streamjoin.plan.statements import StatementPlanner
from streamjoin.sql import SqlSyntaxError, parse_script

from ..conftest import PENDING_CASES, SEED_CASES

KNOWN_FAILURES = Path(__file__).with_name("known_failures.txt")
OUR_CASES = Path(__file__).with_name("cases")


def known_failures() -> dict[str, str]:
    known = {}
    for line in KNOWN_FAILURES.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            case_id, _, issue = line.partition("  # ")
            known[case_id.strip()] = issue.strip()
    return known


SHORT_CASE, CUT, LONG_CASE, LONG_CUT = 3, 4, 30, 10
WORKERS = 3  # cases at once on the shared session: a case mostly waits on the driver


@pytest.fixture(scope="module")
def results(spark):
    seeds = load_cases([str(SEED_CASES)])
    cases = seeds + load_cases([str(OUR_CASES)] + ([str(PENDING_CASES)] if PENDING_CASES.is_dir() else []))
    whole = run_cases(spark, cases, records_per_batch=0, echo=False, workers=WORKERS)
    # a case of one input record (or none) is one micro-batch however it is cut, and a query without operator state
    # answers each record alone: their runs all at once stand for both
    seed_ids = {c.id for c in seeds}
    cuttable = {c.id for c in cases if len(c.inputs) > 1 and (c.id in seed_ids or keeps_state(c))}
    cut = iter(run_cases(spark, [c for c in cases if c.id in cuttable],
                         records_per_batch=lambda c: cut_size(c, c.id in seed_ids), echo=False, workers=WORKERS))
    return {0: whole, 1: [next(cut) if r.case.id in cuttable else r for r in whole]}


def cut_size(case, seed: bool) -> int:
    """Records per micro-batch in the cut run."""
    records = len(case.inputs)
    if seed or records <= SHORT_CASE:
        return 1
    return min(CUT if records <= LONG_CASE else LONG_CUT, (records + 1) // 2)


def keeps_state(case) -> bool:
    """Whether a query of ``case`` keeps operator state, planned without Spark. A case its statements refuse
    runs once; one the planner cannot judge alone (a Lenses topic whose schema its records tell) is cut."""
    catalog = Catalog()
    catalog.properties.update({k: str(v) for k, v in case.properties.items()})
    planner = StatementPlanner(catalog, operators=operator_table)
    try:
        plans = [planned.query.plan for item in parse_script("\n".join(s if s.rstrip().endswith(";") else s + ";"
                                                                        for s in case.statements))
                 if (planned := planner.plan(item)).query is not None]
    except (StreamjoinError, SqlSyntaxError):
        return case.expected_error is None
    return any(getattr(node, "operator", "") for plan in plans for node in walk(plan))


@pytest.mark.parametrize("mode", [0, 1], ids=["all-in-one-batch", "one-record-per-batch"])
def test_cases_pass_except_known_failures(results, mode):
    runs = results[mode]
    failing = {r.case.id: r.detail for r in runs if r.status == "fail"}
    known = known_failures()
    unexpected = {cid: detail for cid, detail in failing.items() if cid not in known}
    now_passing = sorted(set(known) - set(failing))
    print(summary_line(runs))
    assert not unexpected, "unexpected failures:\n" + "\n\n".join(f"{k}\n{v}" for k, v in unexpected.items())
    assert not now_passing, "these cases pass now: remove them from known_failures.txt:\n" + "\n".join(now_passing)


def per_key(outputs) -> dict:
    """Each (topic, key)'s records in order: what batch cuts must not change (records of different keys
    may interleave differently, e.g. a null-padded row released by stream time)."""
    grouped: dict = {}
    for record in outputs:
        grouped.setdefault((record["topic"], json.dumps(record["key"], sort_keys=True)), []).append(record)
    return grouped


def test_outputs_do_not_depend_on_batch_cuts(results):
    by_id = {r.case.id: r for r in results[0]}
    for r in results[1]:
        other = by_id[r.case.id]
        if r.status == other.status == "pass" and r.case.expected_error is None:
            assert per_key(r.outputs) == per_key(other.outputs), r.case.id
