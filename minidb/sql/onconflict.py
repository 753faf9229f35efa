"""INSERT ... ON CONFLICT, bound: the arbiter indexes and the DO UPDATE expressions.

``bind_on_conflict(binder, stmt, entry)`` returns an ``OnConflict`` for the executor
(``minidb.exec.onconflict``, which runs the speculative insertion):

* the **arbiter indexes**: ``ON CONSTRAINT name`` names one (a unique index of the table:
  minidb's constraints are their indexes); ``(cols and (exprs)) [WHERE pred]`` infers every
  unique index whose plain columns are exactly those columns and whose expression columns
  are exactly those expressions, in any order (compared bound), and, for a partial index,
  whose predicate the inference's WHERE implies (without a WHERE no partial index is
  inferred) - PostgreSQL's infer_arbiter_indexes, which runs in the planner as here
  (``minidb.sql.planner.arbiters``; the binder leaves an ``Inference``); no target (DO
  NOTHING only) means every unique index of the table.  None found: 42P10; DO UPDATE
  without a target: 42601.  A partial arbiter index sees a conflict only for a proposed
  row its predicate accepts (``minidb.index.conflict``);
* DO UPDATE's ``SET`` and ``WHERE``: bound over two range entries, the target table (its
  name) and ``excluded`` (the row proposed for insertion, with its defaults); an
  unqualified column that both have is ambiguous (42702), as in PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import minidb.errors as errors
from minidb.exec.expr import SubLink, SubPlan, conjuncts, walk
from minidb.sql import ast

__all__ = ["OnConflict", "Inference", "bind_on_conflict"]


@dataclass
class Inference:
    """ON CONFLICT (cols and (exprs)) [WHERE pred], bound over the target table."""
    columns: set                      # attnos
    exprs: list                       # bound expressions
    where: list                       # bound conjuncts of the WHERE


@dataclass
class OnConflict:
    action: str                       # "nothing" / "update"
    arbiters: list                    # unique index names (the planner fills an inference's)
    excluded_index: int = -1          # the range-table index of EXCLUDED
    assignments: list = field(default_factory=list)   # [(attno, Expr over both rows)]
    where: object = None              # Expr over both rows, or None
    inference: object = None          # Inference, for the planner to match


def _arbiters(b, entry, oc: ast.OnConflictClause) -> list:
    catalog, table = b.catalog, entry.table
    uniques = [catalog.indexes[n] for n in table.indexes
               if n in catalog.indexes and catalog.indexes[n].unique]
    if oc.constraint is not None:
        idx = catalog.indexes.get(oc.constraint)
        if idx is None or idx.table != table.name:
            raise errors.UndefinedObject(
                f'constraint "{oc.constraint}" for table "{table.name}" does not exist')
        if not idx.unique:
            raise errors.ProgrammingError(
                "ON CONFLICT DO UPDATE not supported with exclusion constraints",
                sqlstate="42P10")
        return [idx.name]
    if oc.columns is not None:
        for c in oc.columns:
            if table.column_index(c) < 0:
                raise errors.UndefinedColumn(f'column "{c}" does not exist')
        where = conjuncts(b.boolean(oc.index_where, [entry], "WHERE")) \
            if oc.index_where is not None else []
        # the planner matches it against the indexes (minidb.sql.planner.arbiters)
        return Inference({entry.attno(c) for c in oc.columns},
                         [b.expr(x, [entry]) for x in oc.exprs], where)
    if oc.action == "update":
        err = errors.SyntaxError_(
            "ON CONFLICT DO UPDATE requires inference specification or constraint name")
        err.hint = "For example, ON CONFLICT (column_name)."
        raise err
    return [i.name for i in uniques]


def bind_on_conflict(b, stmt, entry) -> OnConflict:
    oc = stmt.on_conflict
    table = entry.table
    arb = _arbiters(b, entry, oc)
    out = OnConflict(oc.action, [] if isinstance(arb, Inference) else arb)
    if isinstance(arb, Inference):
        out.inference = arb
    if oc.action != "update":
        return out
    ex = b._entry(0, table.name, "excluded")
    out.excluded_index = ex.index
    scope = [entry, ex]
    out.assignments.extend(b.set_list(entry, oc.assignments, scope, table.name))
    if oc.where is not None:
        out.where = b.boolean(oc.where, scope, "WHERE")
    for e in [x for _, x in out.assignments] + ([out.where] if out.where is not None else []):
        if any(isinstance(n, (SubLink, SubPlan)) for n in walk(e)):
            raise errors.NotSupportedError("subqueries in ON CONFLICT DO UPDATE are not "
                                           "supported")
    return out
