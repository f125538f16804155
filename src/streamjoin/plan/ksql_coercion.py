"""ksqlDB's coercion of a list of values to one type (``CoercionUtil.coerceUserList``), as ``x IN (a, b, ...)`` uses
it: the values, the tested one first, are folded into a common type one after another; each is then converted to it
(a literal as a value of that type, an expression by a cast) and compared with the others by equality.

Folding a value into the type of those before it:
- a NULL literal leaves the type as it is;
- a constructed ARRAY, MAP or STRUCT (``ARRAY[1, '2']``, ``STRUCT(A := 1)``) folds element by element into the
  type's element, key, value or field types; a STRUCT's fields are the union of both sides' (by exact name);
- a string literal beside a number takes the number type its text has (``'4.000'`` is a DECIMAL(4, 3),
  ``'2147483648'`` a BIGINT) and widens with it; beside a BOOLEAN it must be a prefix of TRUE, FALSE, YES or NO;
- otherwise one type must coerce to the other (``DefaultSqlValueCoercer.canCoerce``): numbers widen (INTEGER,
  BIGINT, DECIMAL, DOUBLE; two DECIMALs to one holding both), a STRING becomes a TIMESTAMP, TIME, DATE or BYTES, and a
  literal (never an expression) may also become a STRING or be read from one.

Types are Spark DDL type strings (``decimal(4,2)``, ``struct<`A`:bigint>``) as ``plan.expressions.static_type`` gives
them. Refusals raise ``NotCoercible`` or ``BadLiteral``; ``validate.rules`` words them as ksqlDB does.
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Optional

from ..connectors.formats import split_type_args, struct_fields
from ..sql import ast
from . import expressions as ex
from .types import ksql_type_name

NUMBERS = ("INTEGER", "BIGINT", "DECIMAL", "DOUBLE")  # ksqlDB's number base types, narrowest first
BASE_TYPES = NUMBERS + ("STRING", "BOOLEAN", "ARRAY", "MAP", "STRUCT", "DATE", "TIMESTAMP", "TIME", "BYTES")
_CONSTRUCTED = {ast.ArrayLiteral: "ARRAY", ast.MapLiteral: "MAP", ast.StructLiteral: "STRUCT"}
_TO_STRING = ("BOOLEAN", "INTEGER", "BIGINT", "DECIMAL", "DOUBLE", "TIMESTAMP", "TIME", "DATE")


class NotCoercible(Exception):
    """``item`` (of type ``source``) cannot join a list whose type so far is ``target``."""

    def __init__(self, item, source: str, target: str):
        super().__init__(item, source, target)
        self.item, self.source, self.target = item, source, target


class BadLiteral(Exception):
    """A string literal that is not a value of ``base`` (a number or BOOLEAN base type); its text is ksqlDB's words."""

    def __init__(self, text: str, base: str):
        super().__init__(f'invalid input syntax for type {base}: "{text}".')
        self.text, self.base = text, base


def base_type(spark_type: str) -> str:
    """ksqlDB's base type of a Spark type (INTEGER, BIGINT, DOUBLE, DECIMAL, STRING, ARRAY, ...); "" if unknown."""
    name = ksql_type_name(spark_type).split("<")[0].split("(")[0]
    name = "DOUBLE" if name == "FLOAT" else name
    return name if name in BASE_TYPES else ""


def value_type(e) -> str:
    """``e``'s type, with a decimal literal typed as ksqlDB types it (``literal_decimal_type``)."""
    if isinstance(e, ast.Literal) and e.kind == "decimal":
        return literal_decimal_type(str(e.value))
    return ex.static_type(e)


def literal_decimal_type(text: str) -> str:
    """The DECIMAL(precision, scale) of a decimal's text (``DecimalUtil.fromValue``: no negative scale; a value
    between -1 and 1 has one digit more than its scale)."""
    value = Decimal(text.strip())
    exponent = value.as_tuple().exponent
    if exponent > 0:
        value = value.quantize(Decimal(1))
    digits, scale = len(value.as_tuple().digits), max(-value.as_tuple().exponent, 0)
    precision = scale + 1 if abs(value) < 1 else max(digits, scale)
    return f"decimal({precision},{scale})"


def common_type(values) -> str:
    """The type ``values`` fold into ("" when all are NULL literals or of unknown type), or NotCoercible/BadLiteral."""
    common = ""
    for value in values:
        common = _fold(value, common)
    return common


def constructed_type(e) -> str:
    """The type of ksqlDB's ARRAY[...] or MAP(k := v, ...): ARRAY of the type its elements fold into, MAP of its keys'
    and values' ("" where they are all NULL)."""
    if isinstance(e, ast.ArrayLiteral):
        element = common_type(e.items)
        return f"array<{element}>" if element else ""
    key, value = common_type([k for k, _ in e.entries]), common_type([v for _, v in e.entries])
    return f"map<{key},{value}>" if key and value else ""


def _fold(item, target: str) -> str:
    kind = _CONSTRUCTED.get(type(item))
    source = value_type(item)
    if isinstance(item, ast.Literal) and item.kind == "null" or not target:
        return target or source
    if kind:
        if base_type(target) != kind:
            raise NotCoercible(item, source, target)
        try:
            return _fold_constructed(item, target)
        except NotCoercible:
            raise NotCoercible(item, source, target) from None
    if not source:
        return target
    if isinstance(item, ast.Literal) and item.kind == "string":
        if base_type(target) in NUMBERS:
            return _with_number_text(str(item.value), target)
        if base_type(target) == "BOOLEAN":
            parse_boolean(str(item.value))
            return target
    literal = isinstance(item, ast.Literal)
    common = coerce_type(source, target, literal) or coerce_type(target, source, literal)
    if not common:
        raise NotCoercible(item, source, target)
    return common


def _fold_constructed(item, target: str) -> str:
    if isinstance(item, ast.ArrayLiteral):
        (element,) = split_type_args(target[target.index("<") + 1:-1])
        return f"array<{_fold_all(item.items, element)}>"
    if isinstance(item, ast.MapLiteral):
        key, value = split_type_args(target[target.index("<") + 1:-1])
        return (f"map<{_fold_all([k for k, _ in item.entries], key)},"
                f"{_fold_all([v for _, v in item.entries], value)}>")
    given = {ex.field_name(name): value for name, value in item.fields}
    wanted = dict(struct_fields(target))
    fields = []
    for name in dict.fromkeys([*given, *wanted]):
        if name not in wanted:
            fields.append((name, value_type(given[name]) or "string"))
        elif name not in given:
            fields.append((name, wanted[name]))
        else:
            fields.append((name, _fold(given[name], wanted[name])))
    return struct_type(fields)


def _fold_all(values, target: str) -> str:
    for value in values:
        target = _fold(value, target)
    return target


def struct_type(fields) -> str:
    return "struct<" + ",".join(f"`{name}`:{type_}" for name, type_ in fields) + ">"


def _with_number_text(text: str, target: str) -> str:
    """The common type of a number type and a string literal holding a number (``resolveCommonNumericTypeFromStringLiteral``)."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite():
        raise BadLiteral(text, base_type(target))
    if any(mark in text for mark in ".eE"):
        source = literal_decimal_type(text)
    else:
        source = "int" if -2**31 < value < 2**31 - 1 else "bigint" if -2**63 < value < 2**63 - 1 else (
            literal_decimal_type(text))
    if "DOUBLE" in (base_type(source), base_type(target)):
        return "double"
    if "DECIMAL" in (base_type(source), base_type(target)):
        return wider_decimal(source, target)
    return target if NUMBERS.index(base_type(source)) <= NUMBERS.index(base_type(target)) else source


def wider_number(a: str, b: str) -> str:
    """The number type that holds the values of number types ``a`` and ``b``, as ksqlDB's GREATEST and LEAST (and
    Spark's) widen their arguments: DOUBLE beside any other number, a DECIMAL holding both beside an integer or a
    DECIMAL (``wider_decimal``), else the wider integer."""
    if a == b:
        return a
    bases = {base_type(a), base_type(b)}
    if "DOUBLE" in bases:
        return "double"
    if "DECIMAL" in bases:
        return wider_decimal(a, b)
    return max(a, b, key=_INTEGERS.index) if a in _INTEGERS and b in _INTEGERS else a


_INTEGERS = ("tinyint", "smallint", "int", "bigint")


def wider_decimal(a: str, b: str) -> str:
    """A DECIMAL holding both number types (an INTEGER is a DECIMAL(10, 0), a BIGINT a DECIMAL(19, 0):
    ``DecimalUtil.widen``)."""
    def digits(t: str) -> tuple[int, int]:
        base = base_type(t)
        if base != "DECIMAL":
            return (10, 0) if base == "INTEGER" else (19, 0)
        precision, scale = t[t.index("(") + 1:-1].split(",")
        return int(precision), int(scale)

    (p1, s1), (p2, s2) = digits(a), digits(b)
    scale = max(s1, s2)
    return f"decimal({max(p1 - s1, p2 - s2) + scale},{scale})"


def coerce_type(source: str, target: str, literal: bool) -> Optional[str]:
    """The type a ``source`` value takes to stand beside ``target`` ones, or None (``DefaultSqlValueCoercer.canCoerce``:
    STRICT for expressions, LAX for literals)."""
    s, t = base_type(source), base_type(target)
    if s in NUMBERS and t in NUMBERS:
        if NUMBERS.index(s) > NUMBERS.index(t):
            return None
        return wider_decimal(source, target) if t == "DECIMAL" else target
    if s in ("ARRAY", "MAP") and s == t:
        inner = [coerce_type(a, b, literal) for a, b in zip(*(split_type_args(x[x.index("<") + 1:-1])
                                                              for x in (source, target)))]
        if not all(inner):
            return None
        return f"array<{inner[0]}>" if s == "ARRAY" else f"map<{inner[0]},{inner[1]}>"
    if s == t == "STRUCT":
        have, want = dict(struct_fields(source)), dict(struct_fields(target))
        fields = []
        for name in dict.fromkeys([*have, *want]):
            field = (coerce_type(have[name], want[name], literal) if name in have and name in want
                     else have.get(name) or want[name])
            if not field:
                return None
            fields.append((name, field))
        return struct_type(fields)
    if s and s == t or s == "STRING" and t in ("TIMESTAMP", "TIME", "DATE", "BYTES"):
        return target
    if literal and (t == "STRING" and s in _TO_STRING or s == "STRING" and t in NUMBERS + ("BOOLEAN",)):
        return target
    return None


def parse_boolean(text: str) -> bool:
    """A BOOLEAN from text as ksqlDB reads one (``SqlBooleans.parseBooleanExact``): any prefix of TRUE or YES, or of
    FALSE or NO, in any case; anything else is a BadLiteral."""
    word = text.strip().lower()
    for value, names in ((True, ("true", "yes")), (False, ("false", "no"))):
        if word and any(name.startswith(word) for name in names):
            return value
    raise BadLiteral(text, "BOOLEAN")


def literal_value(literal: ast.Literal, target: str):
    """A literal's value as one of ``target``'s type (a Python value Spark's cast to ``target`` keeps exactly)."""
    base = base_type(target)
    if literal.kind == "string" and base == "BOOLEAN":
        return parse_boolean(str(literal.value))
    if literal.kind == "string" and base in NUMBERS:
        number = Decimal(str(literal.value).strip())
        return float(number) if base == "DOUBLE" else number if base == "DECIMAL" else int(number)
    if base == "STRING" and literal.kind == "boolean":
        return "true" if literal.value else "false"
    if base == "STRING" and literal.kind != "string":
        return str(literal.value)  # an INTEGER's digits, a DECIMAL's as written (BigDecimal.toPlainString)
    if literal.kind == "decimal":
        return Decimal(str(literal.value))
    return literal.value
