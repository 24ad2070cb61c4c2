"""Quoting values into SQL text, where DuckDB needs literals (zone-map pruning, json paths, type specs)."""

from __future__ import annotations

from collections.abc import Iterable


def sql_string(value: str) -> str:
    """A SQL string literal: single quotes doubled."""
    return "'" + value.replace("'", "''") + "'"


def sql_in_list(values: Iterable[str]) -> str:
    """``('a', 'b')`` for ``x IN ...``: a literal list lets DuckDB skip row groups, a join does not."""
    return "(" + ", ".join(map(sql_string, values)) + ")"
