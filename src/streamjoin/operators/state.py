"""Keyed state for streamjoin's operators, on Spark's ``transformWithStateInPandas``.

An operator supplies a pure function ``step(state, rows) -> (output, new_state)`` over one group's rows of
a micro-batch (a pandas frame) and its previous state (any picklable value, None at first). The state
lives in Spark's state store (RocksDB) as one pickled value per group, so it is checkpointed with the
query and restored exactly on restart, and works unchanged on a cluster. ``transformWithStateInPandas``
is used rather than ``applyInPandasWithState`` because several of them can be chained in one query
(a join feeding a join or an aggregate).
"""
from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any, Callable, Iterator

from pyspark import cloudpickle
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame

Step = Callable[[Any, "pd.DataFrame"], "tuple[pd.DataFrame, Any]"]
_STATE_SCHEMA = StructType([StructField("value", BinaryType())])


class _PickledStateProcessor(StatefulProcessor):
    """Spark also unpickles the processor in a fresh Python process on the driver, when a query plans its
    first batch, only to call ``init``; the step (and with it pandas and the operators) is therefore kept
    as bytes and loaded on first use, which saves most of a second per stateful operator and query start."""

    def __init__(self, step: Step, input_columns: list[str], columns: list[str]):
        self.step_bytes = cloudpickle.dumps(step)
        self.step = None
        self.input_columns = input_columns
        self.columns = columns

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("state", _STATE_SCHEMA)

    def handleInputRows(self, key, rows: Iterator["pd.DataFrame"], timerValues) -> Iterator["pd.DataFrame"]:
        import pandas as pd

        if self.step is None:
            self.step = cloudpickle.loads(self.step_bytes)
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.input_columns  # the worker hands columns over by position (_0, _1, ...)
        previous = pickle.loads(self.state.get()[0]) if self.state.exists() else None
        out, new_state = self.step(previous, batch)
        self.state.update((pickle.dumps(new_state, protocol=5),))
        if len(out):  # an empty frame's columns may have no usable type
            yield out.reindex(columns=self.columns)

    def close(self) -> None:
        pass


def run_keyed(df: "DataFrame", group_columns: list[str], step: Step, output_schema: StructType) -> "DataFrame":
    """Apply ``step`` per group of ``group_columns`` with state kept across micro-batches."""
    processor = _PickledStateProcessor(step, df.columns, output_schema.fieldNames())
    return df.groupBy(*group_columns).transformWithStateInPandas(processor, output_schema, "append", "None")
