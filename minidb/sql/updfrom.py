"""UPDATE ... FROM and DELETE ... USING: the target joined with other relations.

The binder binds the target and the FROM / USING items as one FROM list (the target
first: its alias and the others' must differ, 42712), so SET expressions and WHERE read
any of them; the statement carries that join as a ``BoundSelect`` (``join``: every
relation, the WHERE and JOIN conditions, the target's columns and the SET expressions as
its outputs, ``for_update`` so the target's TIDs come up through the joins), and the
planner plans it as it plans a SELECT's FROM list - hash, merge-free nested loop or index
joins chosen by cost - under the Update / Delete node.

RETURNING may read every FROM item (``*`` is all their columns, as PostgreSQL): its
expressions are outputs of the join too, and the node returns the target's new (or
deleted) row with the other items' columns of the joined row that changed it
(``minidb.exec.returning``'s ``extra_keys``).

A target row that joins several rows is changed once, by the first joined row the plan
returns (the later ones find it already changed by this command and skip it:
``TM_SELF_MODIFIED``), as PostgreSQL does; which of the joined rows wins is unspecified
in both.

Departure: when a target row was changed by a concurrent transaction that committed
(READ COMMITTED), PostgreSQL re-runs the join for the row's newest version
(EvalPlanQual with the other relations' rows); minidb raises 40001 (could not serialize
access due to concurrent update) for such a row instead.
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.sql import ast

__all__ = ["bind_from", "concurrent_update"]


def bind_from(binder, bound_select, table: str, alias: str | None, items: list):
    """(target entry, scope, join ``bound_select``: the binder's BoundSelect) of a write
    whose target is joined with ``items``."""
    tree, quals, scope = binder._from_list([ast.TableRef(table, alias)] + list(items))
    entry = scope[0]
    if entry.kind != "table":
        raise errors.WrongObjectType(f'"{table}" is not a table')
    join = bound_select(rtable=list(scope), quals=quals, targets=[], for_update=True)
    join.from_items = tree
    return entry, scope, join


def finish(join, entry, quals, exprs) -> None:
    """The join's conditions and outputs: WHERE's conjuncts, the target's columns and the
    expressions the write computes from the row."""
    join.quals.extend(quals)
    join.targets = [(n, entry.colref(a)) for a, (n, _) in enumerate(entry.columns)]
    join.targets += [("?column?", e) for e in exprs]


def concurrent_update(row):
    raise errors.SerializationFailure("could not serialize access due to concurrent update")
