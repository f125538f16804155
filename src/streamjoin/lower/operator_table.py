"""The operator of each join: ``streamjoin.operators.<Join.operator>`` (chosen when the join was bound,
``plan.joins``), an object with the ``JoinOperator`` protocol; GROUP BY's is ``operators.<Aggregate.operator>``
(``aggregate``, ``table_aggregate``, ``window_aggregate`` or ``session_aggregate``, chosen by the binder), a
stateful filter's ``operators.<Filter.operator>`` (``table_filter``). Every
module the planner can choose exists; ``check_supported`` still refuses, before anything starts, a join whose
module could not be loaded. ``declared_states`` gives what each stateful operator of a plan keeps, from the
operators' own declarations (``operators.base.DeclaredState``)."""
from __future__ import annotations

import importlib
from typing import Optional

from ..errors import NotYetSupported
from ..operators.base import DeclaredState, JoinOperator
from ..plan.nodes import Aggregate, Filter, Join, PlanNode, walk


def operator_for(join: Join) -> JoinOperator:
    try:
        module = importlib.import_module(f"streamjoin.operators.{join.operator}")
    except (ModuleNotFoundError, ValueError):
        raise NotYetSupported(f"a {join.shape} join (operator {join.operator or '?'})", issue=2, pos=join.pos) from None
    return module.OPERATOR


def check_supported(join: Join) -> None:
    """Refuse, before anything starts, a join whose operator cannot be loaded."""
    operator_for(join)


def declared_state(node: PlanNode) -> Optional[DeclaredState]:
    """What the operator running ``node`` keeps, or None for a node without state."""
    if isinstance(node, Join):
        return operator_for(node).state(node)
    if isinstance(node, (Aggregate, Filter)) and node.operator:
        return node_operator(node).state(node)
    return None


def node_operator(node: "Aggregate | Filter"):
    """The operator of GROUP BY or of a stateful filter: ``streamjoin.operators.<node.operator>``, chosen when
    it was bound."""
    return importlib.import_module(f"streamjoin.operators.{node.operator}").OPERATOR


def declared_states(plan: PlanNode) -> list[DeclaredState]:
    """The state of every stateful operator of ``plan``, in plan order."""
    return [state for state in map(declared_state, walk(plan)) if state is not None]
