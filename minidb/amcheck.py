"""Checking a whole data directory for users: ``minidb check DATADIR`` and the shell's
``\\check [TABLE]`` (PostgreSQL's pg_amcheck over amcheck's functions).

``check_instance(instance, tables=None)`` runs, on an open instance, for every table (or
the ones named) and every index of those tables:

* the catalog checks: the table's relation file exists; each index names an existing table
  and existing columns and has its own file; no two relations share a relfilenode;
* the heap checker (``minidb.heap.check.check_heap``: page headers, line pointers, tuple
  headers against the layout, t_ctid rules);
* the B-tree checker (``minidb.index.check.check_btree`` with ``heapallindexed``:
  amcheck's ``bt_index_check(heapallindexed => true)``: structure, order, parent/child
  and sibling links, and every live heap tuple found in the index).

A checker stops at the first problem of its relation (it raises ``DataCorrupted`` naming
block and offset); ``check_instance`` catches it, records it and goes on with the next
relation, so one damaged table does not hide another.  Any other minidb error while
reading a relation (a file that cannot be read, a short read) is recorded the same way.

``format_report`` prints pg_amcheck's shape: one paragraph per problem, the relation
first (``heap table "t":`` / ``btree index "t_pkey":``) and the message indented, then a
summary line.  The CLI exits 0 when nothing was found and 2 when something was (pg_amcheck's
"corruption found" status).  The checks read under share locks and assume a quiet
database (the B-tree's heap part reports an insert caught between its heap tuple and its
index entry); the CLI opens the data directory itself, so nothing else writes meanwhile.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import minidb.errors as errors
from minidb.heap.check import check_heap
from minidb.index.check import check_btree

__all__ = ["Problem", "Report", "check_instance", "format_report"]


@dataclass
class Problem:
    kind: str        # "heap table", "btree index", "catalog"
    relation: str
    message: str


@dataclass
class Report:
    tables: int = 0
    indexes: int = 0
    tuples: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_instance(instance, tables: list[str] | None = None) -> Report:
    """Check the catalog, heaps and B-trees of ``instance`` (see the module docstring)."""
    cat = instance.catalog
    cat.refresh()
    report = Report()
    names = sorted(cat.tables) if tables is None else list(tables)
    for name in names:
        if name not in cat.tables:
            raise errors.UndefinedTable(f'relation "{name}" does not exist')
    _check_catalog(instance, names, report)
    with instance.connect() as backend:
        for name in names:
            report.tables += 1
            try:
                report.tuples += check_heap(backend, cat.heap_rel(name))
            except errors.Error as e:
                report.problems.append(Problem("heap table", name, str(e)))
                backend.bufmgr.release_all()
            for idx in sorted((i for i in cat.indexes.values() if i.table == name),
                              key=lambda i: i.name):
                report.indexes += 1
                try:
                    check_btree(backend, idx.name, heapallindexed=True)
                except errors.Error as e:
                    report.problems.append(Problem("btree index", idx.name, str(e)))
                    backend.bufmgr.release_all()
    return report


def _check_catalog(instance, names: list[str], report: Report) -> None:
    cat, smgr = instance.catalog, instance.smgr
    owners: dict[int, str] = {}

    def relation_file(kind: str, name: str, rfn: int) -> None:
        if rfn in owners:
            report.problems.append(Problem("catalog", name, f"{kind} {name!r} shares "
                                           f"relfilenode {rfn} with {owners[rfn]!r}"))
        owners[rfn] = name
        path = smgr.path(rfn)
        if not os.path.exists(path):
            report.problems.append(Problem("catalog", name, f'could not open file "{path}" '
                                           f"of {kind} {name!r}: No such file or directory"))
    for name in sorted(cat.tables):
        relation_file("table", name, cat.tables[name].relfilenode)
    for idx in sorted(cat.indexes.values(), key=lambda i: i.name):
        if idx.table not in cat.tables:
            report.problems.append(Problem("catalog", idx.name, f"index {idx.name!r} belongs "
                                           f"to table {idx.table!r}, which does not exist"))
            continue
        cols = {c.name for c in cat.tables[idx.table].columns}
        missing = [c for c in idx.columns if c not in cols]
        if missing:
            report.problems.append(Problem("catalog", idx.name, f"index {idx.name!r} names "
                                           f"column(s) {missing} missing from {idx.table!r}"))
        relation_file("index", idx.name, idx.relfilenode)
    report.problems[:] = [p for p in report.problems
                          if p.kind != "catalog" or p.relation in names
                          or any(i.name == p.relation and i.table in names
                                 for i in cat.indexes.values())]


def format_report(report: Report) -> str:
    """pg_amcheck-like text (see the module docstring)."""
    out = []
    for p in report.problems:
        out.append(f'{p.kind} "{p.relation}":\n    {p.message}\n')
    status = ("no corruption found" if report.ok else
              f"{len(report.problems)} problem{'s' if len(report.problems) > 1 else ''} found")
    out.append(f"checked {report.tables} table{'s' if report.tables != 1 else ''} "
               f"({report.tuples} tuples) and {report.indexes} "
               f"index{'es' if report.indexes != 1 else ''}: {status}\n")
    return "".join(out)
