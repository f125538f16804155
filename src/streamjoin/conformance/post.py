"""ksqlDB's ``post`` checks: what the metastore and the broker must hold once a case's statements have run.

ksqlDB's test runner compares, for each ``post.sources`` entry, the named source's kind, its schema (columns in
order, key columns marked ``KEY``, headers ``HEADERS`` / ``HEADER('k')``, types as ksqlDB names them), its key
format (with the window a windowed key carries) and its value format; and no topic may match
``post.topics.blacklist`` (a Java regex, matched whole). Here the same checks read the engine's catalog and
topic store. Two parts name Kafka Streams' own machinery and cannot hold here: ``post.topics.topics`` (internal
repartition and changelog topics) and serde ``keyFeatures``/``valueFeatures``; they are returned as not checked,
and the report counts them.
"""
from __future__ import annotations

import re
from typing import Optional

from ..plan.catalog import SourceInfo

_TYPE_NAMES = {
    "INT": "INTEGER", "INTEGER": "INTEGER", "BIGINT": "BIGINT", "LONG": "BIGINT", "DOUBLE": "DOUBLE", "FLOAT": "DOUBLE",
    "REAL": "DOUBLE", "STRING": "STRING", "VARCHAR": "STRING", "BOOLEAN": "BOOLEAN", "BINARY": "BYTES", "BYTES": "BYTES",
    "TIMESTAMP": "TIMESTAMP", "DATE": "DATE", "TIME": "TIME", "SMALLINT": "INTEGER", "TINYINT": "INTEGER",
}
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|\"(?:[^\"]|\"\")*\"|'(?:[^']|'')*'|\d*[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")
UNCHECKED_PARTS = ("keyFeatures", "valueFeatures", "isSource")


def check_post(post: dict, catalog, topics: list[str]) -> tuple[Optional[str], tuple[str, ...]]:
    """(the first difference, or None; the parts of ``post`` that were not checked)."""
    unchecked: list[str] = []
    for expected in post.get("sources", ()):
        problem = _check_source(expected, catalog.source(expected["name"]) if "name" in expected else None)
        if problem:
            return f"post: {problem}", tuple(unchecked)
        unchecked += [f"sources.{part}" for part in UNCHECKED_PARTS if part in expected]
    checks = post.get("topics") or {}
    if checks.get("blacklist"):
        pattern = re.compile(checks["blacklist"])  # QTT's blacklists read the same in Java and Python
        banned = [t for t in topics if pattern.fullmatch(t)]
        if banned:
            return f"post: topic {banned[0]} exists, but matches the blacklist {checks['blacklist']!r}", tuple(unchecked)
    unchecked += ["topics.topics"] * bool(checks.get("topics"))
    return None, tuple(unchecked)


def _check_source(expected: dict, source: Optional[SourceInfo]) -> Optional[str]:
    name = expected.get("name")
    if source is None:
        return f"no source named {name}"
    kind = str(expected.get("type", "")).upper()
    if kind and kind != source.kind:
        return f"{name} is a {source.kind}, expected a {kind}"
    if expected.get("schema") is not None:
        want, got = parse_schema(expected["schema"]), source_schema(source)
        if want != got:
            return f"{name}'s schema is {_shown(got)}, expected {_shown(want)}"
    key_format = expected.get("keyFormat")
    if key_format is not None:
        fmt = key_format.get("format")
        if fmt is not None and fmt.upper() != effective_key_format(source):
            return f"{name}'s key format is {effective_key_format(source)}, expected {fmt.upper()}"
        window = source.window or (None, None)
        want_type = key_format.get("windowType")
        want_size = key_format.get("windowSize")
        if (want_type or None) != (window[0] and _window_type(window[0])):
            return f"{name}'s key window is {window[0] or 'none'}, expected {want_type or 'none'}"
        got_size = window[1] if window[0] and _window_type(window[0]) != "SESSION" else None
        if (None if want_size is None else int(want_size)) != got_size:
            return f"{name}'s key window size is {got_size}, expected {want_size}"
    value_format, shown = expected.get("valueFormat"), declared_format(source, "value")
    if value_format is not None and str(value_format).upper() != shown:
        return f"{name}'s value format is {shown}, expected {value_format}"
    return None


def effective_key_format(source: SourceInfo) -> str:
    """ksqlDB's key format of a source: NONE when it has no key columns."""
    if not any(c.origin == "key" for c in source.columns):
        return "NONE"
    return declared_format(source, "key")


def declared_format(source: SourceInfo, part: str) -> str:
    """A source's key or value format by the name ksqlDB gives it: JSON_SR where it was declared (read as JSON)."""
    if source.registry_framed(part):
        return "JSON_SR"
    return (source.key_format if part == "key" else source.value_format).upper()


def _window_type(kind: str) -> str:
    return {"TUMBLE": "TUMBLING", "HOP": "HOPPING"}.get(kind.upper(), kind.upper())


def source_schema(source: SourceInfo) -> tuple:
    """(name, ksqlDB type, namespace) of each column, key columns first, as ksqlDB's metastore lists them."""
    keys, others = [], []
    for c in source.columns:
        if c.origin == "key":
            keys.append((c.name, ksql_type(c.type), "KEY"))
        elif c.origin == "metadata" and c.metadata == "headers":
            others.append((c.name, ksql_type(c.type), "HEADERS"))
        elif c.origin == "metadata" and (c.metadata or "").startswith("header:"):
            others.append((c.name, ksql_type(c.type), f"HEADER('{c.metadata[len('header:'):]}')"))
        elif c.origin == "value":
            others.append((c.name, ksql_type(c.type), ""))
    return tuple(keys + others)


def parse_schema(text: str) -> tuple:
    """A QTT schema (``ID INT KEY, `v` STRING, H BYTES HEADER('k')``) as ``source_schema`` gives one: unquoted
    names upper-cased, types in ksqlDB's names."""
    tokens = _tokens(text)
    columns = []
    while tokens:
        name = _identifier(tokens.pop(0))
        type_, tokens = _type(tokens)
        namespace = ""
        while tokens and tokens[0] != ",":
            word = tokens.pop(0)
            if word.upper() == "HEADER" and tokens[:1] == ["("]:
                namespace = f"HEADER('{tokens[1][1:-1]}')"
                tokens = tokens[3:]
            elif word.upper() in ("KEY", "HEADERS"):
                namespace = word.upper()
        tokens = tokens[1:]
        columns.append((name, type_, namespace))
    return tuple(c for c in columns if c[2] == "KEY") + tuple(c for c in columns if c[2] != "KEY")


def ksql_type(spark_type: str) -> str:
    """A Spark DDL type (``struct<`a`:int>``) in ksqlDB's names (``STRUCT<`a` INTEGER>``)."""
    text, rest = _type(_tokens(spark_type))
    return text


def _tokens(text: str) -> list[str]:
    return [m.group(1) for m in _TOKEN.finditer(text)]


def _identifier(token: str) -> str:
    if token[0] in "`\"":
        return token[1:-1].replace(token[0] * 2, token[0])
    return token.upper()


def _type(tokens: list[str]) -> tuple[str, list[str]]:
    """One type from the front of ``tokens`` (Spark's or ksqlDB's spelling) and the tokens after it."""
    name, tokens = tokens[0].upper(), tokens[1:]
    if name in ("DECIMAL", "NUMERIC", "DEC") and tokens[:1] == ["("]:
        return f"DECIMAL({tokens[1]}, {tokens[3]})", tokens[5:]
    if name in ("ARRAY", "MAP", "STRUCT") and tokens[:1] == ["<"]:
        tokens, parts = tokens[1:], []
        while tokens[0] != ">":
            if name == "STRUCT":
                field = _identifier(tokens[0])
                tokens = tokens[2:] if tokens[1] == ":" else tokens[1:]
                inner, tokens = _type(tokens)
                parts.append(f"`{field}` {inner}")
            else:
                inner, tokens = _type(tokens)
                parts.append(inner)
            if tokens[0] == ",":
                tokens = tokens[1:]
        return f"{name}<{', '.join(parts)}>", tokens[1:]
    if name in ("VARCHAR", "CHAR") and tokens[:1] == ["("]:
        tokens = tokens[3:]
    return _TYPE_NAMES.get(name, name), tokens


def _shown(schema: tuple) -> str:
    return ", ".join(" ".join(p for p in (f"`{n}`", t, ns) if p) for n, t, ns in schema)

