"""The operator of each join: ``streamjoin.operators.<Join.operator>`` (chosen when the join was bound,
``plan.joins``), an object with the ``JoinOperator`` protocol. Every module the planner can choose exists;
``check_supported`` still refuses, before anything starts, a join whose module could not be loaded."""
from __future__ import annotations

import importlib

from ..errors import NotYetSupported
from ..operators.base import JoinOperator
from ..plan.nodes import Join


def operator_for(join: Join) -> JoinOperator:
    try:
        module = importlib.import_module(f"streamjoin.operators.{join.operator}")
    except (ModuleNotFoundError, ValueError):
        raise NotYetSupported(f"a {join.shape} join (operator {join.operator or '?'})", issue=2, pos=join.pos) from None
    return module.OPERATOR


def check_supported(join: Join) -> None:
    """Refuse, before anything starts, a join whose operator cannot be loaded."""
    operator_for(join)
