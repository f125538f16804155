"""GROUP BY over a TABLE (a changelog, e.g. a table-table join result): ksqlDB's table aggregation.

Semantics: every row of the input table counts once, in the group its current values put it in. A change
of a row takes its previous values out of their group and adds its new values to their group; a tombstone
only takes them out. After each input change every group it touched emits its new aggregate values — one
update when the row stayed in its group. A group left with no rows stays, with the aggregates of no rows (COUNT
0), as Kafka Streams' table aggregation keeps it (ksqlDB, Lenses: its count.json "count table" writes 0; users
write HAVING COUNT(*) > 0 to drop it); Flink's emits a tombstone (a group without rows does not exist).
Aggregates must be undoable: COUNT, COUNT(DISTINCT), SUM, AVG, MIN and MAX (the last three keep a multiset of
values per group), HISTOGRAM, ksqlDB's COLLECT_LIST (a list per group: a retraction takes out the last
occurrence of its value, as ``CollectListUdaf.undo``), CORRELATION (running sums a retraction subtracts from,
as ``CorrelationUdaf.undo``) and ATTR (a count per distinct value, NULL included, as ``Attr.Impl``).

Algorithm: two keyed stages, each over state buckets (``operators.state.run_segmented``):
1. by the input's key — every change of a row becomes a *retract* event carrying the row's previous group
   and arguments (the previous change of its key in the batch, else the stored row) and, unless it is a
   tombstone, an *add* event carrying its new ones, both with the change's ingestion order; computed for
   the whole batch at once;
2. by group — the events in ingestion order (retract before add) folded into the groups' accumulators,
   emitting, per input change, each touched group's values after it; computed for the whole batch at once as
   running sums per group (``_GroupFold``), only MIN, MAX and DISTINCT's multisets event by event. As in ksqlDB,
   a row whose group is null counts in no group (dropped and counted; Flink keeps a NULL group).

State (per bucket, segmented, as a table log: ``state.log_changes``): stage 1 the group and arguments of
every live input row, removed by its tombstone; stage 2 the accumulators of every group that has had a row (as
columns: ``accumulator_columns``), removed when its last row leaves (Flink) or never (Kafka Streams). A batch
reads and writes the rows and groups it touches.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StructField, StructType

from ..errors import NotYetSupported
from ..lower.expressions import compile_expr
from ..plan.nodes import ROWTIME, SEQ, SUB, TOMBSTONE, Aggregate, naming_style
from .aggregate import (
    GLOBAL, AggSpec, _correlation, _first_rows, _last_rows, _objects, _scalar, aggregate_specs, result_type, running_totals,
    same_value,
)
from .base import DeclaredState, LoweringContext
from .keyed_inputs import BUCKET, bucketed, drop_records, integral_columns, key_codes, restore_integers, take
from .state import GONE, apply_changes, new_table_log, read_table, run_segmented

UNDOABLE = {"COUNT", "SUM", "AVG", "MIN", "MAX", "HISTOGRAM", "COLLECT_LIST", "CORRELATION", "ATTR"}
SIGN = "__sign"
RETRACT, ADD = 0, 1


STATE = DeclaredState(
    "table_aggregate", 2,
    keeps="the group and arguments of every live input row (stage 1); the accumulators of every group with "
          "a row (stage 2)",
    segments="chunks of each stage's change log",
    purged="an input row at its tombstone; a group when its last row leaves")
KAFKA_STREAMS_STATE = replace(
    STATE, keeps="the group and arguments of every live input row (stage 1); the accumulators of every group that "
                 "has had a row (stage 2)",
    purged="an input row at its tombstone; a group never (it stays at COUNT 0, as in ksqlDB)")


def _keeps_empty_groups(node: Aggregate) -> bool:
    """Kafka Streams' table aggregation (ksqlDB, Lenses) keeps a group its last row left; Flink's deletes it."""
    return naming_style(node) != "flink"


class TableAggregate:
    def state(self, node: Aggregate) -> DeclaredState:
        state = KAFKA_STREAMS_STATE if _keeps_empty_groups(node) else STATE
        return replace(state, stages=("the input table's key (a row's previous values retracted)", "the GROUP BY key"))

    def lower(self, node: Aggregate, df: DataFrame, ctx: LoweringContext) -> DataFrame:
        for f, call in node.aggregates:
            if call.name not in UNDOABLE:
                raise NotYetSupported(f"{call.name} in a GROUP BY over a table (only {', '.join(sorted(UNDOABLE))} can be undone)",
                                      issue=4, pos=call.pos)
        groups = [f.id for f, _ in node.groups]
        arg_cols, specs = aggregate_specs(node)
        row_key = [f"__rk{i}" for i in range(len(node.input.key))]
        tombstone = F.coalesce(F.col(TOMBSTONE), F.lit(False)) if TOMBSTONE in df.columns else F.lit(False)
        prepared = df.select(*[F.col(k).alias(rk) for k, rk in zip(node.input.key, row_key)],
                             *[compile_expr(e).alias(g) for g, (_, e) in zip(groups, node.groups)], *arg_cols,
                             tombstone.alias(TOMBSTONE), ROWTIME, SEQ, SUB)
        types = {f.name: f.dataType for f in prepared.schema.fields}
        args = [s.arg for s in specs if s.arg]
        event_schema = StructType([StructField(c, types[c]) for c in groups + args]
                                  + [StructField(SIGN, IntegerType())] + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB)])
        rows = bucketed(prepared, row_key, ctx.time_buckets)
        events = run_segmented(rows, BUCKET, row_step(row_key, groups + args, integral_columns(rows, row_key)), event_schema, ctx)

        out_schema = StructType([StructField(g, types[g]) for g in groups]
                                + [StructField(s.out, result_type(s, types.get(s.arg))) for s in specs]
                                + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB)] + [StructField(TOMBSTONE, BooleanType())])
        if not groups:
            events = events.withColumn(GLOBAL, F.lit(0))
        keys = groups or [GLOBAL]
        events = bucketed(events, keys, ctx.time_buckets)
        step = group_step(keys, groups, specs, integral_columns(events, keys + args), out_schema.fieldNames(),
                          drop_null_groups=naming_style(node) != "flink", keep_empty=_keeps_empty_groups(node))
        return run_segmented(events, BUCKET, step, out_schema, ctx)


def row_step(row_key: list[str], carried: list[str], integral: list[str]):
    """Stage 1, per bucket of input keys: every change → retract(previous values) and add(new values)."""
    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"dropped": {}, "rows": 0, "table": new_table_log()}
        rows = restore_integers(rows, integral).sort_values([SEQ, SUB], kind="stable").reset_index(drop=True)
        store = read_table(meta["table"], segments, row_key, carried)
        deleted = rows[TOMBSTONE].to_numpy(dtype=bool)
        codes = rows.groupby(row_key, sort=False, dropna=False).ngroup()
        before = pd.Series(np.arange(len(rows))).groupby(codes.to_numpy()).shift(1).to_numpy()
        in_batch = ~np.isnan(before)
        before = np.where(in_batch, before, 0).astype(np.int64)
        stored = store.find(rows)
        from_store = ~in_batch & (stored >= 0)
        retracted, added = np.flatnonzero((in_batch & ~deleted[before]) | from_store), np.flatnonzero(~deleted)
        events = {c: np.concatenate([np.where(in_batch, take(rows[c].to_numpy(), before, in_batch),
                                              take(store.column(c), stored, from_store))[retracted],
                                     rows[c].to_numpy(dtype=object)[added]]) for c in carried}
        events[SIGN] = np.repeat([RETRACT, ADD], [len(retracted), len(added)])
        for c in (ROWTIME, SEQ, SUB):
            events[c] = np.concatenate([rows[c].to_numpy()[retracted], rows[c].to_numpy()[added]])
        changes = rows.drop_duplicates(row_key, keep="last")
        changes = changes[row_key + carried].assign(**{GONE: changes[TOMBSTONE].to_numpy(dtype=bool)})
        table = apply_changes(meta["table"], segments, store, changes.reset_index(drop=True), row_key)
        meta["rows"] = len(table)
        return pd.DataFrame(events), meta

    return step


def group_step(keys: list[str], groups: list[str], specs: list[AggSpec], integral: list[str], out_names: list[str],
               drop_null_groups: bool = False, keep_empty: bool = False):
    """Stage 2, per bucket of groups: undoable accumulators; one output per input change and group.
    ``drop_null_groups``: an event for a null group is dropped and counted (``null_key``), as ksqlDB does;
    ``keep_empty``: a group its last row left emits the aggregates of no rows and stays (Kafka Streams), rather
    than a tombstone.

    Computed for the whole batch at once: a group's row count and each aggregate's count and total are running
    sums over its events (``running_totals`` adds totals in event order, as a fold would); a group its last row
    left starts again from nothing (Flink), so sums run per *segment* of a group between such resets. Only the
    multisets (MIN, MAX, DISTINCT) are folded event by event."""
    columns = accumulator_columns(specs)

    def step(meta, events: pd.DataFrame, segments):
        meta = meta or {"dropped": {}, "rows": 0, "table": new_table_log()}
        if drop_null_groups and groups:
            null_group = events[groups].isna().any(axis=1).to_numpy()
            drop_records(meta, "null_key", events, null_group & (events[SIGN].to_numpy() == ADD))
            events = events[~null_group]
        events = restore_integers(events, integral).sort_values([SEQ, SUB, SIGN], kind="stable").reset_index(drop=True)
        store = read_table(meta["table"], segments, keys, columns)
        codes = key_codes(events, keys)
        heads = events.iloc[_first_rows(codes)].reset_index(drop=True)  # one row per group, in the order of ``codes``
        found = store.find(heads)
        fold = _GroupFold(events, codes, {c: take(store.column(c), found, found >= 0) for c in columns}, keep_empty)
        out = pd.DataFrame({c: events[c].to_numpy()[fold.emits] for c in groups + [ROWTIME, SEQ, SUB]})
        changes = heads[keys].assign(**{ROWS: fold.final_rows, GONE: (fold.final_rows <= 0) & (not keep_empty)})
        for i, s in enumerate(specs):
            out[s.out], after = fold.aggregate(i, s, events[s.arg] if s.arg else None, s.arg in integral)
            changes = changes.assign(**after)
        out[TOMBSTONE] = fold.tombstone
        table = apply_changes(meta["table"], segments, store, changes[keys + columns + [GONE]], keys)
        meta["rows"] = len(table)
        return out[out_names], meta

    return step


ROWS = "__rows"  # stage 2's state: per group its row count, and per aggregate i (``accumulator_columns``) ...


def accumulator_columns(specs: list[AggSpec]) -> list[str]:
    """... the count of its non-null values ``__n<i>``, their total ``__total<i>`` (SUM, AVG) and their multiset
    ``__values<i>`` (a Counter: MIN, MAX, DISTINCT; a list: COLLECT_LIST)."""
    return [ROWS] + [f"__{field}{i}" for i, s in enumerate(specs) for field in ("n", "total", "values")
                     if field == "n" or field == "total" and s.fn in ("SUM", "AVG")
                     or field == "values" and (_multiset(s) or s.fn in FOLDED)]


FOLDED = ("COLLECT_LIST", "CORRELATION", "ATTR")  # kept per group as a list, as running sums, as counted values


def _multiset(s: AggSpec) -> bool:
    return s.distinct or s.fn in ("MIN", "MAX", "HISTOGRAM")


class _GroupFold:
    """Stage 2's arithmetic for one batch of events, sorted by ingestion order (retract before add), in groups
    ``codes`` whose stored accumulators are ``prior`` (a column per ``accumulator_columns``, a row per group;
    None where the group is new). ``emits``: the events after which their group emits (all but a retract followed
    by an add of the same change to the same group); ``tombstone``: per emitted event, whether its group is left
    without rows (and not kept)."""

    def __init__(self, events: pd.DataFrame, codes: np.ndarray, prior: dict, keep_empty: bool):
        n, seq, sub = len(codes), events[SEQ].to_numpy(), events[SUB].to_numpy()
        self.codes, self.prior = codes, prior
        self.sign = np.where(events[SIGN].to_numpy() == ADD, 1, -1)
        again = np.zeros(n, dtype=bool)
        again[:-1] = (codes[1:] == codes[:-1]) & (seq[1:] == seq[:-1]) & (sub[1:] == sub[:-1])
        self.emits = ~again
        # a group's row count never falls below 0 (a row's retract follows its add), so resets need no segments
        rows = self._stored(ROWS, np.int64)[codes] + _grouped_cumsum(self.sign, codes)
        self.reset = self.emits & (rows <= 0) & (not keep_empty)
        self.tombstone = self.reset[self.emits]
        epoch = _grouped_cumsum(self.reset.astype(np.int64), codes) - self.reset
        width = int(epoch.max(initial=0)) + 1
        self.segment, firsts = pd.factorize(codes.astype(np.int64) * width + epoch)
        self.segment_group, self.segment_fresh = firsts // width, firsts % width > 0
        self.last = _last_rows(codes, len(prior[ROWS]))
        self.ended = self.reset[self.last]  # the group's last event left it without rows: its state starts anew
        self.final_rows = np.where(self.ended, 0, rows[self.last])

    def _stored(self, column: str, dtype) -> np.ndarray:
        """``column`` of every group's stored accumulators (0 for a new group)."""
        values = self.prior[column]
        return np.where(pd.isna(values), 0, values).astype(dtype)

    def _starts(self, column: str, dtype) -> np.ndarray:
        """Every segment's starting value of ``column``: the stored one for a group's first segment, else 0."""
        return np.where(self.segment_fresh, 0, self._stored(column, dtype)[self.segment_group]).astype(dtype)

    def aggregate(self, i: int, s: AggSpec, values: pd.Series | None, integral: bool):
        """Aggregate ``i`` (``s``) over the argument ``values`` (None: COUNT(*)): (its result per emitted event,
        each group's accumulator columns after the batch)."""
        n, emits, last = len(self.codes), self.emits, self.last
        present = np.ones(n, dtype=bool) if values is None else values.notna().to_numpy()
        counts = self._starts(f"__n{i}", np.int64)[self.segment] + _grouped_cumsum(np.where(present, self.sign, 0), self.segment)
        totals = np.zeros(n, dtype=np.int64)
        if s.fn in ("SUM", "AVG"):
            numbers = values.to_numpy()
            if numbers.dtype.kind in "fO" and integral:  # nulls made it float, or objects: whole numbers, as the rows hold them
                numbers = np.where(present, numbers, 0).astype(np.int64)
            elif numbers.dtype.kind not in "iuf":
                numbers = values.to_numpy(dtype=object)  # decimals
            steps = np.where(present, numbers, 0)
            steps = np.where(self.sign < 0, -steps, steps)
            totals = running_totals(self._starts(f"__total{i}", steps.dtype), steps, self.segment)
        if _multiset(s):
            bags, folded = self._multisets(i, s, values, present)
        else:
            fold = {"COLLECT_LIST": lambda: self._lists(i, s, values), "CORRELATION": lambda: self._correlations(i, values),
                    "ATTR": lambda: self._attrs(i, values)}
            bags, folded = fold[s.fn]() if s.fn in fold else (None, None)
        if s.fn == "SUM":
            results = _objects(totals[emits], counts[emits] > 0)
        elif s.fn == "AVG":
            results = _objects(totals[emits].astype(np.float64) / np.maximum(counts[emits], 1), counts[emits] > 0)
        else:
            results = folded if folded is not None else _objects(counts[emits])
        results[self.tombstone] = None
        after = {f"__n{i}": np.where(self.ended, 0, counts[last])}
        if s.fn in ("SUM", "AVG"):
            after[f"__total{i}"] = np.where(self.ended, 0, totals[last])
        if bags is not None:
            after[f"__values{i}"] = np.full(len(last), None, dtype=object)
            after[f"__values{i}"][:] = [None if ended else bag for bag, ended in zip(bags, self.ended)]
        return results, after

    def _multisets(self, i: int, s: AggSpec, values: pd.Series | None, present: np.ndarray):
        """Aggregate ``i``'s multiset of values per group, folded event by event: (each group's after the batch,
        the result at every emitted event of COUNT(DISTINCT), MIN or MAX, None for the others)."""
        args = values.tolist() if values is not None else [1] * len(self.codes)
        pick = {"COUNT": len, "MIN": min, "MAX": max, "HISTOGRAM": dict}.get(s.fn)

        def change(bag: Counter, j: int) -> Counter:
            if present[j]:
                value = _scalar(args[j])
                bag[value] += int(self.sign[j])
                if bag[value] <= 0:
                    del bag[value]
            return bag

        def result(bag: Counter):
            return pick(bag) if bag or s.fn in ("COUNT", "HISTOGRAM") else None

        bags, folded = self._folded([Counter(bag) for bag in self.prior[f"__values{i}"]], Counter, change,
                                    result if pick else lambda bag: None)
        return bags, folded if pick else None

    def _lists(self, i: int, s: AggSpec, values: pd.Series):
        """COLLECT_LIST's list per group, folded event by event, NULLs included: an add appends its value (while the
        list is shorter than the limit, ``s.param``), a retract takes out the last occurrence of its value (none
        when the limit left it out). (each group's list after the batch, the list at every emitted event)."""
        def change(items: list, j: int) -> list:
            value = _scalar(values.iat[j])
            if self.sign[j] > 0 and (s.param is None or len(items) < s.param):
                items.append(value)
            elif self.sign[j] < 0:
                at = next((k for k in range(len(items) - 1, -1, -1) if items[k] == value), None)
                if at is not None:
                    del items[at]
            return items

        kept = [list(items) if items is not None else [] for items in self.prior[f"__values{i}"]]
        return self._folded(kept, list, change, list)

    def _correlations(self, i: int, values: pd.Series):
        """CORRELATION's running sums per group (x, y, x², y², xy and the count, ksqlDB's ``CorrelationUdaf``),
        folded event by event: an add adds a row's, a retract takes them away (in the same order of operations, so
        what is left matches ksqlDB's); a row whose x or y is NULL counts for nothing. (each group's sums after the
        batch, the coefficient at every emitted event)."""
        def change(sums: tuple, j: int) -> tuple:
            pair = values.iat[j]
            x, y = (_scalar(pair["X"]), _scalar(pair["Y"])) if pair is not None else (None, None)
            if x is None or y is None:
                return sums
            x, y = float(x), float(y)
            return tuple(a + b if self.sign[j] > 0 else a - b for a, b in zip(sums, (x, y, x * x, y * y, x * y, 1)))

        kept = [tuple(sums) if sums is not None else _NO_SUMS for sums in self.prior[f"__values{i}"]]
        return self._folded(kept, lambda: _NO_SUMS, change, _correlation)

    def _attrs(self, i: int, values: pd.Series):
        """ATTR's counted values per group, folded event by event as ksqlDB's ``Attr.Impl`` does: a list of [value,
        count] pairs, NULL a value like any other; an add counts its value up (a new value is appended), a retract
        counts it down, never below 0 (a value not there is left alone). The result is the one value whose count is
        above 0, else NULL. A pair counted down to 0 is dropped: ksqlDB keeps it, but it then acts as no pair at all.
        (each group's pairs after the batch, the result at every emitted event)."""
        def change(pairs: list, j: int) -> list:
            value = _scalar(values.iat[j])
            at = next((k for k, pair in enumerate(pairs) if same_value(pair[0], value)), None)
            if at is not None:
                pairs[at][1] += int(self.sign[j])
                if pairs[at][1] <= 0:
                    del pairs[at]
            elif self.sign[j] > 0:
                pairs.append([value, 1])
            return pairs

        kept = [[list(pair) for pair in pairs] if pairs is not None else [] for pairs in self.prior[f"__values{i}"]]
        return self._folded(kept, list, change, lambda pairs: pairs[0][0] if len(pairs) == 1 else None)

    def _folded(self, kept: list, fresh, change, result):
        """Each group's value (``kept``: its value before the batch, a copy the fold may change in place) folded event
        by event: ``change(value, j)`` gives it after event j, ``result(value)`` what an emitted event writes, and a
        group its last row left starts again from ``fresh()``. (each group's value after the batch, the result at
        every emitted event)."""
        results = []
        for j, g in enumerate(self.codes.tolist()):
            kept[g] = change(kept[g], j)
            if self.emits[j]:
                results.append(result(kept[g]))
            if self.reset[j]:
                kept[g] = fresh()
        folded = np.empty(len(results), dtype=object)
        folded[:] = results
        return kept, folded


_NO_SUMS = (0.0, 0.0, 0.0, 0.0, 0.0, 0)


def _grouped_cumsum(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Running sums of integers per code, in row order (exact: integers)."""
    return pd.Series(values).groupby(codes, sort=False).cumsum().to_numpy()


OPERATOR = TableAggregate()
