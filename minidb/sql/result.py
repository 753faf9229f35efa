"""``Result``: what one statement returns to the DB-API cursor and the REPL.

``description`` is the DB-API description of a SELECT's columns (7-tuples: name, type
name, then five Nones) or None; ``rows`` the result rows as tuples; ``rowcount`` the rows
returned or affected (-1 when the statement has none); ``status`` PostgreSQL's command
tag (``SELECT 3``, ``INSERT 0 1``, ``BEGIN`` ...); ``messages`` the notices and warnings
the statement raised (VACUUM VERBOSE's report, "there is already a transaction in
progress" ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Result"]


@dataclass
class Result:
    """One statement's outcome."""
    description: list | None
    rows: list
    rowcount: int
    status: str
    messages: list = field(default_factory=list)
