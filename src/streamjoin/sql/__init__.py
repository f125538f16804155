"""The SQL front end: parses streamjoin's SQL dialects into the syntax tree of ``ast``."""
from .parser import SqlSyntaxError, parse_expression, parse_script, parse_statement, read_script, split_input

__all__ = ["SqlSyntaxError", "parse_expression", "parse_script", "parse_statement", "read_script", "split_input"]
