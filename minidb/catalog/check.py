"""The catalog checker: the catalog tables are sound, and they and the files agree.

``check_catalog(backend)`` returns a list of problems (empty: all is well):

* every catalog heap passes ``heap.check.check_heap`` (page and tuple structure);
* the committed catalog rows agree with each other: every pg_attribute, pg_index and
  pg_statistic row names a relation pg_class has, every table has one pg_attribute row per
  column (1..relnatts), every index has its pg_index row and its table, every
  pg_constraint row names a relation pg_class has and a foreign key's definition reads
  back and names a referenced table pg_class has;
* the rows and the files agree: every relation named has its file in ``base/``, and every
  file in ``base/`` belongs to a relation named (no orphan files) - except the files of
  transactions still running, which the caller lists in ``in_progress`` if there are any
  (run it when the database is quiet).
"""

from __future__ import annotations

import os

from minidb.catalog.bootstrap import (CATALOGS, PG_ATTRIBUTE, PG_CLASS, PG_CONSTRAINT, PG_INDEX,
                                      PG_STATISTIC, RELKIND_INDEX, RELKIND_TABLE, RELKIND_VIEW)
from minidb.catalog.cache import _catalog_snapshot, _rows
from minidb.catalog.fkeys import parse_definition
from minidb.errors import DataCorrupted
from minidb.heap.check import check_heap


def check_catalog(backend, in_progress=()) -> list[str]:
    problems = []
    for d in CATALOGS:
        try:
            check_heap(backend, d.rel)
        except DataCorrupted as e:
            problems.append(f"{d.name}: {e}")
    if problems:
        return problems
    snap, clear = _catalog_snapshot(backend, own=False)
    try:
        rows = {d.oid: [r for _, r in _rows(backend, d, snap)] for d in CATALOGS}
    finally:
        if clear:
            backend.xact.procarray.clear_xmin(backend.slot)
    classes = {r[0]: r for r in rows[PG_CLASS.oid]}
    if len(classes) != len(rows[PG_CLASS.oid]):
        problems.append("pg_class: an OID appears twice")
    names = [r[1] for r in rows[PG_CLASS.oid]]
    for n in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f'pg_class: two relations are called "{n}"')
    attnums: dict[int, list[int]] = {}
    for r in rows[PG_ATTRIBUTE.oid]:
        if r[0] not in classes:
            problems.append(f"pg_attribute: row for relation {r[0]} which pg_class lacks")
        attnums.setdefault(r[0], []).append(r[4])
    index_of = {}
    for r in rows[PG_INDEX.oid]:
        index_of[r[0]] = r
        if r[0] not in classes or classes[r[0]][3] != RELKIND_INDEX:
            problems.append(f"pg_index: row for index {r[0]} which pg_class lacks")
        if r[1] not in classes or classes[r[1]][3] != RELKIND_TABLE:
            problems.append(f"pg_index: index {r[0]} on table {r[1]} which pg_class lacks")
    for r in rows[PG_STATISTIC.oid]:
        if r[0] not in classes:
            problems.append(f"pg_statistic: row for relation {r[0]} which pg_class lacks")
    by_name = {r[1]: r for r in classes.values()}
    for r in rows[PG_CONSTRAINT.oid]:
        if r[2] not in classes:
            problems.append(f'pg_constraint: constraint "{r[1]}" of relation {r[2]} which '
                            f"pg_class lacks")
        elif r[3] == "f":
            fk = parse_definition(r[0], r[1], classes[r[2]][1], r[4])
            if fk is None:
                problems.append(f'pg_constraint: foreign key "{r[1]}" has an unreadable '
                                f"definition {r[4]!r}")
            elif fk.ref_table not in by_name:
                problems.append(f'pg_constraint: foreign key "{r[1]}" references '
                                f'"{fk.ref_table}" which pg_class lacks')
    smgr = backend.instance.smgr
    named = set()
    for oid, r in classes.items():
        kind, rfn, natts = r[3], r[4], r[7]
        named.add(rfn)
        if kind == RELKIND_TABLE and sorted(attnums.get(oid, [])) != list(range(1, natts + 1)):
            problems.append(f'pg_attribute: table "{r[1]}" has attnums '
                            f"{sorted(attnums.get(oid, []))}, expected 1..{natts}")
        if kind == RELKIND_INDEX and oid not in index_of:
            problems.append(f'pg_index: index "{r[1]}" has no row')
        if kind != RELKIND_VIEW and not smgr.exists(rfn):
            problems.append(f'relation "{r[1]}" has no file (base/{rfn})')
    skip = set(in_progress)
    for fname in sorted(os.listdir(smgr.base)):
        head = fname.split("_")[0]
        if head.isdigit() and int(head) not in named and int(head) not in skip:
            problems.append(f"orphan relation file base/{fname} (no catalog entry names it)")
    return problems


def relation_files(backend, forks: bool = False) -> set[int]:
    """The relfilenodes that have a main-fork file in ``base/`` (with ``forks``: a file of
    any fork)."""
    names = os.listdir(backend.instance.smgr.base)
    if forks:
        names = [f.split("_")[0] for f in names]
    return {int(f) for f in names if f.isdigit()}


def named_relfilenodes(backend) -> set[int]:
    """The relfilenodes the committed pg_class rows name."""
    snap, clear = _catalog_snapshot(backend, own=False)
    try:
        return {r[4] for _, r in _rows(backend, PG_CLASS, snap)}
    finally:
        if clear:
            backend.xact.procarray.clear_xmin(backend.slot)
