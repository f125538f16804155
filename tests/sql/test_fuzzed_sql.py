"""Fuzzed SQL: the scripts of the seed cases and of streamjoin's own cases, mutated and recombined, go through the
front end, the binder and the validator (``StatementPlanner``, as ``Engine.execute`` plans before anything
starts). Whatever the input, the only exception allowed is one of streamjoin's own errors, and it names a line
and a column of the script (the statement's own position at least).

Mutations, on the script's tokens: drop one, repeat one, swap two, put a declared name (of a stream, table or
column of any script), a literal or a type where one stood, cut the script at a token, or splice in a statement of
another script; the kinds that keep a script parseable come most often, so the binder and the validator see it. The
example budget (``FUZZ_EXAMPLES``, 300 by default) keeps it well under a minute; the note of the session that
wrote it says what a longer run tried and found.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamjoin.errors import StreamjoinError
from streamjoin.lower import operator_table
from streamjoin.plan.catalog import Catalog
from streamjoin.plan.statements import StatementPlanner
from streamjoin.sql import parse_script

from ..conftest import SEED_CASES

OWN_CASES = Path(__file__).parents[1] / "conformance" / "cases"
TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\d+(?:\.\d+)?|\w+|<=|>=|<>|!=|\|\||\S")
TYPES = ["INT", "BIGINT", "STRING", "VARCHAR(5)", "DOUBLE", "DECIMAL(4, 2)", "BOOLEAN", "TIMESTAMP(3)", "ARRAY<INT>",
         "MAP<STRING, INT>", "STRUCT<A INT>", "BYTES", "DATE"]


def _scripts() -> list[str]:
    scripts = []
    for folder in (Path(SEED_CASES), OWN_CASES):
        for path in sorted(folder.glob("*.json")):
            for case in json.loads(path.read_text())["tests"]:
                scripts.append("\n".join(case["statements"]))
    return scripts


def _names(scripts: list[str]) -> set[str]:
    """The streams', tables' and columns' names the scripts declare."""
    names = set()
    for script in scripts:
        planner = StatementPlanner(Catalog(), operators=operator_table)
        try:
            for item in parse_script(script):
                planner.plan(item)
        except StreamjoinError:
            pass
        for source in planner.catalog.sources.values():
            names |= {source.name.split(".")[-1]} | {c.name for c in source.columns}
    return {n for n in names if re.fullmatch(r"[A-Za-z_]\w*", n)}


SCRIPTS = _scripts()
TOKENS = [TOKEN.findall(s) for s in SCRIPTS]
NAMES = sorted(_names(SCRIPTS))
FOLDED = {n.casefold() for n in NAMES}
LITERALS = sorted({t for tokens in TOKENS for t in tokens if t[0] in "'0123456789"} | {"NULL", "-1", "''", "1e309"})
TYPE_WORDS = {"INT", "INTEGER", "BIGINT", "STRING", "VARCHAR", "DOUBLE", "DECIMAL", "BOOLEAN", "TIMESTAMP", "DATE",
              "LONG", "FLOAT", "SMALLINT", "TINYINT", "BYTES"}


# what keeps a script parseable (a name, a literal, a type for another) comes more often: the binder and the
# validator see those; the others mostly test the parser's errors
CHANGES = ["word"] * 4 + ["literal"] * 3 + ["type"] * 2 + ["splice"] * 2 + ["drop", "repeat", "swap", "cut"]


@st.composite
def mutated_scripts(draw) -> str:
    index = draw(st.integers(0, len(SCRIPTS) - 1))
    tokens = list(TOKENS[index])
    for _ in range(draw(st.integers(1, 2))):
        if not tokens:
            break
        change = draw(st.sampled_from(CHANGES))
        kind = {"word": lambda t: t.casefold() in FOLDED, "literal": lambda t: t[0] in "'0123456789",
                "type": lambda t: t.upper() in TYPE_WORDS}.get(change)
        places = [i for i, t in enumerate(tokens) if kind is None or kind(t)] or list(range(len(tokens)))
        at = draw(st.sampled_from(places))
        if change == "drop":
            del tokens[at]
        elif change == "repeat":
            tokens.insert(at, tokens[at])
        elif change == "swap":
            other = draw(st.integers(0, len(tokens) - 1))
            tokens[at], tokens[other] = tokens[other], tokens[at]
        elif change == "word":
            tokens[at] = draw(st.sampled_from(NAMES))
        elif change == "literal":
            tokens[at] = draw(st.sampled_from(LITERALS))
        elif change == "type":
            tokens[at] = draw(st.sampled_from(TYPES))
        elif change == "cut":
            tokens = tokens[:at]
        else:
            statements = [s for s in SCRIPTS[draw(st.integers(0, len(SCRIPTS) - 1))].split(";") if s.strip()]
            tokens[at:at] = TOKEN.findall(draw(st.sampled_from(statements)) + ";") if statements else []
    return " ".join(tokens)


def plan(script: str) -> None:
    """Plan every statement of ``script`` as ``Engine.execute`` does before it starts anything."""
    planner = StatementPlanner(Catalog(), operators=operator_table)
    for item in parse_script(script):
        planner.plan(item)


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_scripts())
def test_any_script_is_planned_or_refused_with_a_position(script):
    try:
        plan(script)
    except StreamjoinError as err:
        pos = getattr(err, "pos", None)
        assert pos is not None and getattr(pos, "line", 0) >= 1, f"{type(err).__name__} without a position: {err}"
    # any other exception fails the test, with the script hypothesis found it with


@pytest.mark.parametrize("script", SCRIPTS[:3])
def test_the_scripts_fuzzed_from_plan_as_they_are(script):
    plan(script)
