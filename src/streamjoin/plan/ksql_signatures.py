"""ksqlDB's functions and aggregates as typed signatures, and how ksqlDB picks one for a call (its ``UdfIndex``).

Over inputs declared with ksqlDB's DDL, a call of one of ksqlDB's own functions or aggregates must fit one of its
signatures (an aggregate's as the user wrote it, before planning makes it a call of another form),
or it is refused when planned, in ksqlDB's words. ksqlDB resolves a call so:
- an argument fits a parameter of its own base type (any DECIMAL fits DECIMAL); a NULL literal fits any parameter;
  ARRAY and MAP parameters fit element by element; ANY fits anything;
- a generic parameter (``T``, ``K``, ``V``, ``S``), alone or inside an ARRAY or MAP, takes the exact type of the
  first argument it meets, and every other argument it meets must have that same type (``COALESCE(INT, BIGINT)``
  fits no signature);
- a variadic parameter (``STRING...``) takes any number of arguments of its type, or one ARRAY of them;
- a lambda parameter takes a lambda of that many variables; a time unit parameter (``UNIT``) a bare unit;
- the signatures are tried first as they stand; if none fits, a scalar function's (not an aggregate's) are tried
  again with ksqlDB's implicit casts: a number to a wider number (INTEGER, BIGINT, DECIMAL, DOUBLE), a STRING to a
  DATE, TIME, TIMESTAMP or BYTES;
- of several that fit, the most specific wins: one without a variadic over one with, then the one with more
  parameters, then fewer generic ones; two equally specific ones are ksqlDB's ambiguous call.
A STRING argument that fits a DATE, TIME, TIMESTAMP or BYTES parameter only by that cast is converted as ksqlDB's
``SqlToJavaVisitor.convertArgument`` converts it: it becomes ``CAST(arg AS <parameter type>)`` (``converted``, which the
lowering applies to every call marked ``ksql``): ``GREATEST(date, '2021-03-04')`` compares dates. Number arguments are
left to Spark, which widens them the same way.
A call with an argument whose type the plan does not know is let through (Spark's own typing decides). The
signatures are ksqlDB's built-in functions' and aggregates' (its ``@Udf`` and ``@UdafFactory`` methods, by their
Java parameter types), under the names ksqlDB declares them with, which its messages use.
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..connectors.formats import split_type_args
from ..sql import ast
from .ksql_coercion import NUMBERS, base_type, value_type
from .types import ksql_type_name

# name(s): signature | signature ...; a signature's parameters comma-separated, "()" for none
_DECLARED = """
Abs Ceil Floor: INTEGER | BIGINT | DOUBLE | DECIMAL
acos asin atan cbrt cos cosh cot degrees exp ln radians sin sinh sqrt tan tanh sign: INTEGER | BIGINT | DOUBLE
atan2 power: INTEGER, INTEGER | BIGINT, BIGINT | DOUBLE, DOUBLE
log: INTEGER | BIGINT | DOUBLE | INTEGER, INTEGER | BIGINT, BIGINT | DOUBLE, DOUBLE
Round trunc: BIGINT | INTEGER | DOUBLE | DOUBLE, INTEGER | DECIMAL | DECIMAL, INTEGER
pi random: ()
greatest least: INTEGER, INTEGER... | BIGINT, BIGINT... | DOUBLE, DOUBLE... | DECIMAL, DECIMAL... | STRING, STRING... \
    | BYTES, BYTES... | DATE, DATE... | TIME, TIME... | TIMESTAMP, TIMESTAMP...
geo_distance: DOUBLE, DOUBLE, DOUBLE, DOUBLE | DOUBLE, DOUBLE, DOUBLE, DOUBLE, STRING
Chr: INTEGER | STRING
concat concat_ws: STRING... | BYTES...
elt: INTEGER, STRING...
field: STRING, STRING...
encode: STRING, STRING, STRING
from_bytes: BYTES, STRING
to_bytes: STRING, STRING
initcap lcase ucase trim md5: STRING
instr: STRING, STRING | STRING, STRING, INTEGER | STRING, STRING, INTEGER, INTEGER
len: STRING | BYTES
LPad RPad: STRING, INTEGER, STRING | BYTES, INTEGER, BYTES
mask: STRING | STRING, STRING, STRING, STRING, STRING
mask_left mask_right mask_keep_left mask_keep_right: STRING, INTEGER | STRING, INTEGER, STRING, STRING, STRING, STRING
regexp_extract regexp_extract_all: STRING, STRING | STRING, STRING, INTEGER
regexp_replace replace split_to_map: STRING, STRING, STRING
regexp_split_to_array extractjsonfield: STRING, STRING
split: STRING, STRING | BYTES, BYTES
substring: STRING, INTEGER | STRING, INTEGER, INTEGER | BYTES, INTEGER | BYTES, INTEGER, INTEGER
UUID: () | BYTES
url_decode_param url_encode_param url_extract_fragment url_extract_host url_extract_path url_extract_port: STRING
url_extract_protocol url_extract_query: STRING
url_extract_parameter: STRING, STRING
IS_JSON_STRING JSON_ARRAY_LENGTH JSON_ITEMS JSON_KEYS JSON_RECORDS: STRING
JSON_ARRAY_CONTAINS: STRING, T
JSON_CONCAT: STRING...
TO_JSON_STRING: T
bigint_from_bytes double_from_bytes int_from_bytes: BYTES | BYTES, STRING
convert_tz: TIMESTAMP, STRING, STRING
dateadd datesub: UNIT, INTEGER, DATE
timeadd timesub: UNIT, INTEGER, TIME
timestampadd timestampsub: UNIT, INTEGER, TIMESTAMP
datetostring: INTEGER, STRING
format_date: DATE, STRING
format_time: TIME, STRING
format_timestamp: TIMESTAMP, STRING | TIMESTAMP, STRING, STRING
from_days: INTEGER
from_unixtime: BIGINT
parse_date parse_time stringtodate: STRING, STRING
parse_timestamp stringtotimestamp: STRING, STRING | STRING, STRING, STRING
timestamptostring: BIGINT, STRING | BIGINT, STRING, STRING
unix_date: () | DATE
unix_timestamp: () | TIMESTAMP
array_concat array_except array_intersect array_union: ARRAY<T>, ARRAY<T>
ARRAY_CONTAINS array_remove: ARRAY<T>, T
array_distinct ARRAY_LENGTH array_max array_min: ARRAY<T>
ARRAY_JOIN array_sort: ARRAY<T> | ARRAY<T>, STRING
slice: ARRAY<T>, INTEGER, INTEGER
GENERATE_SERIES: INTEGER, INTEGER | INTEGER, INTEGER, INTEGER | BIGINT, BIGINT | BIGINT, BIGINT, INTEGER
ENTRIES: MAP<STRING, INTEGER>, BOOLEAN | MAP<STRING, BIGINT>, BOOLEAN | MAP<STRING, DOUBLE>, BOOLEAN \
    | MAP<STRING, BOOLEAN>, BOOLEAN | MAP<STRING, STRING>, BOOLEAN
map_keys: MAP<STRING, T>
map_values: MAP<STRING, T>
map_union: MAP<STRING, T>, MAP<STRING, T>
AS_MAP: ARRAY<STRING>, ARRAY<T>
filter: ARRAY<T>, LAMBDA1 | MAP<K, V>, LAMBDA2
transform: ARRAY<T>, LAMBDA1 | MAP<K, V>, LAMBDA2, LAMBDA2
reduce: ARRAY<T>, S, LAMBDA2 | MAP<K, V>, S, LAMBDA3
COALESCE: T, T...
IFNULL NULLIF: T, T
AS_VALUE: T
"""
# ksqlDB's aggregates (its ``@UdafFactory`` methods: the column arguments, then the literal ones), taken without casts
_AGGREGATES = """
COUNT collect_list collect_set COUNT_DISTINCT ATTR: T
SUM: DECIMAL | DOUBLE | BIGINT | INTEGER
avg STDDEV_SAMP STDDEV_SAMPLE: BIGINT | INTEGER | DOUBLE
MAX MIN: INTEGER | BIGINT | DOUBLE | DECIMAL | DATE | TIME | TIMESTAMP | STRING | BYTES
correlation: DOUBLE, DOUBLE | INTEGER, INTEGER | BIGINT, BIGINT
histogram: STRING
sum_list: ARRAY<DOUBLE> | ARRAY<INTEGER> | ARRAY<BIGINT>
EARLIEST_BY_OFFSET LATEST_BY_OFFSET: T | T, BOOLEAN | T, INTEGER | T, INTEGER, BOOLEAN
TOPK: INTEGER, ANY..., INTEGER | BIGINT, ANY..., INTEGER | DOUBLE, ANY..., INTEGER | STRING, ANY..., INTEGER
TOPKDISTINCT: INTEGER, INTEGER | BIGINT, INTEGER | DOUBLE, INTEGER | STRING, INTEGER | DECIMAL, INTEGER \
    | DATE, INTEGER | TIME, INTEGER | TIMESTAMP, INTEGER | BYTES, INTEGER
"""

GENERICS = ("T", "K", "V", "S")
NO_CAST, CAST = False, True  # whether a fit may use ksqlDB's implicit casts
VARIADIC = "..."
CONVERTED = ("DATE", "TIME", "TIMESTAMP", "BYTES")  # parameter types a STRING argument is converted to


def _signatures() -> dict[str, tuple[str, list[tuple[str, ...]], bool]]:
    """Upper-cased name -> (the name as ksqlDB declares it, its signatures as tuples of parameter types, whether
    ksqlDB tries its implicit casts: for scalar functions, not for aggregates)."""
    table = {}
    for text, casts in ((_DECLARED, True), (_AGGREGATES, False)):
        for line in text.strip().splitlines():
            names, signatures = line.split(":", 1)
            parsed = [tuple(split_type_args(s.strip())) if s.strip() != "()" else () for s in signatures.split("|")]
            for name in names.split():
                table[name.upper()] = (name, parsed, casts)
    return table


SIGNATURES = _signatures()


def is_scalar(name: str) -> bool:
    """Whether ``name`` (as the user called it) is one of ksqlDB's scalar functions."""
    entry = SIGNATURES.get(name.upper())
    return entry is not None and entry[2]


def call_problem(name: str, args: Sequence) -> Optional[str]:
    """ksqlDB's refusal of a call of its function ``name`` (as the user called it) with ``args``, in its words;
    None when a signature fits, when ``name`` is none of ``SIGNATURES``, or when an argument's type is unknown."""
    return _resolved(name, args)[1]


def converted(name: str, args: Sequence) -> tuple:
    """``args`` of a call of ksqlDB's scalar function ``name`` as the signature ksqlDB picks takes them: each STRING
    argument where that signature has a DATE, TIME, TIMESTAMP or BYTES parameter cast to that type (ksqlDB's
    ``CastEvaluator`` then parses it, trimmed: a partial date or timestamp, a time, base64 bytes); the rest as they
    are."""
    signature, problem = _resolved(name, args)
    if signature is None or problem is not None:
        return tuple(args)
    types = [_argument_type(a) for a in args]
    return tuple(ast.Cast(a, ast.TypeName(p), pos=getattr(a, "pos", ast.NOWHERE), ksql=True)
                 if p in CONVERTED and t and base_type(t) == "STRING" else a
                 for a, t, p in zip(args, types, _parameters(signature, args, types)))


def _resolved(name: str, args: Sequence) -> tuple[Optional[tuple], Optional[str]]:
    """The signature of ksqlDB's function ``name`` that a call with ``args`` takes, and ksqlDB's refusal of the call;
    (None, None) when ``name`` is none of ``SIGNATURES`` or an argument's type is unknown."""
    if name.upper() not in SIGNATURES:
        return None, None
    declared, signatures, casts = SIGNATURES[name.upper()]
    types = [_argument_type(a) for a in args]
    if any(t == "" for t in types):
        return None, None
    shown = ", ".join(_shown(a, t) for a, t in zip(args, types))
    for cast in (NO_CAST, CAST) if casts else (NO_CAST,):
        fitting = [s for s in signatures if _fits(s, args, types, cast)]
        if fitting:
            ranked = sorted(fitting, key=_specificity, reverse=True)
            if len(ranked) > 1 and _specificity(ranked[0]) == _specificity(ranked[1]):
                return None, f"Function '{declared}' cannot be resolved due to ambiguous method parameters ({shown})."
            return ranked[0], None
    return None, f"Function '{declared}' does not accept parameters ({shown})."


def _argument_type(arg) -> Optional[str]:
    """An argument's Spark type; None for what fits by its kind (a NULL literal, a lambda, a time unit); "" if
    unknown."""
    if isinstance(arg, (ast.Lambda, ast.TimeUnit)) or isinstance(arg, ast.Literal) and arg.kind == "null":
        return None
    type_ = value_type(arg)
    return type_ if base_type(type_) else ""


def _shown(arg, type_: Optional[str]) -> str:
    """An argument as ksqlDB lists it in a message (``_argument_type`` gave a NULL literal no type)."""
    if isinstance(arg, ast.TimeUnit):
        return arg.unit
    if isinstance(arg, ast.Lambda):
        return "LAMBDA"
    return "null" if type_ is None else ksql_type_name(type_)


def _specificity(signature: tuple) -> tuple:
    variadic = next((i for i, p in enumerate(signature) if p.endswith(VARIADIC)), -1)
    generic = sum(any(g in _words(p) for g in GENERICS) for p in signature)
    return variadic < 0, len(signature), -generic, variadic


def _words(param: str) -> set:
    return set(param.replace("<", " ").replace(">", " ").replace(",", " ").replace(VARIADIC, " ").split())


def _fits(signature: tuple, args: Sequence, types: list, cast: bool) -> bool:
    """Whether ``args`` (of ``types``) fit ``signature``, with ksqlDB's implicit casts if ``cast``."""
    params = _parameters(signature, args, types)
    bound: dict = {}
    return params is not None and all(_fits_one(p, a, t, bound, cast) for p, a, t in zip(params, args, types))


def _parameters(signature: tuple, args: Sequence, types: list) -> Optional[list]:
    """The parameter each of ``args`` (of ``types``) meets in ``signature`` (a variadic one repeated, or taken as
    one ARRAY), or None when their count cannot fit."""
    variadic = next((i for i, p in enumerate(signature) if p.endswith(VARIADIC)), None)
    if variadic is None:
        return list(signature) if len(args) == len(signature) else None
    extra = len(args) - (len(signature) - 1)
    if extra < 0:
        return None
    element = signature[variadic][:-len(VARIADIC)]
    if extra == 1 and _is_array_of(types[variadic], element):  # the variadic arguments given as one ARRAY
        element = f"ARRAY<{element}>"
    return list(signature[:variadic]) + [element] * extra + list(signature[variadic + 1:])


def _is_array_of(type_: Optional[str], element: str) -> bool:
    return bool(type_) and base_type(type_) == "ARRAY" and element not in GENERICS


def _fits_one(param: str, arg, type_: Optional[str], bound: dict, cast: bool) -> bool:
    if param.startswith("LAMBDA"):
        return isinstance(arg, ast.Lambda) and len(arg.params) == int(param[len("LAMBDA"):])
    if param == "UNIT" or isinstance(arg, (ast.Lambda, ast.TimeUnit)):
        return param == "UNIT" and isinstance(arg, ast.TimeUnit)
    if type_ is None:  # a NULL literal
        return True
    return _type_fits(param, type_, bound, cast)


def _type_fits(param: str, type_: str, bound: dict, cast: bool) -> bool:
    """Whether a value of Spark type ``type_`` fits parameter type ``param``; generics bind in ``bound``."""
    if param == "ANY":
        return True
    if param in GENERICS:
        exact = "".join(type_.lower().replace("`", "").split())  # one spelling of a type
        return bound.setdefault(param, exact) == exact
    base = base_type(type_)
    kind = param.split("<")[0]
    if kind in ("ARRAY", "MAP"):
        if base != kind or not type_.endswith(">"):
            return False
        inner, parts = split_type_args(type_[type_.index("<") + 1:-1]), split_type_args(param[len(kind) + 1:-1])
        if kind == "MAP" and parts[0] not in GENERICS:  # a MAP's key is matched as it is (ksqlDB's ``matches``)
            return base_type(inner[0]) == parts[0] and _type_fits(parts[1], inner[1], bound, cast)
        return len(inner) == len(parts) and all(_type_fits(p, t, bound, cast) for p, t in zip(parts, inner))
    return base == param or cast and _casts(base, param)


def _casts(source: str, target: str) -> bool:
    """ksqlDB's implicit casts (``SqlBaseType.canImplicitlyCast``): a number to a wider one, a STRING to a DATE, TIME,
    TIMESTAMP or BYTES."""
    if source in NUMBERS and target in NUMBERS:
        return NUMBERS.index(source) <= NUMBERS.index(target)
    return source == "STRING" and target in CONVERTED
