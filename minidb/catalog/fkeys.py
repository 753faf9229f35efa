"""FOREIGN KEY constraints in the catalog: their pg_constraint rows (contype 'f').

PostgreSQL's pg_constraint row of a foreign key names the referencing table (conrelid) and
columns (conkey), the referenced table (confrelid) and columns (confkey), the unique index
that backs the referenced side (conindid) and the actions (confupdtype, confdeltype).
minidb's pg_constraint (``bootstrap.PG_CONSTRAINT``) keeps conrelid and, in ``consrc``,
the constraint's definition as ``pg_get_constraintdef`` prints it::

    FOREIGN KEY (a, b) REFERENCES p(x, y) ON UPDATE CASCADE ON DELETE SET NULL

(NO ACTION, the default, is not printed).  ``attach`` reads those rows back when the
catalog cache is built and hangs each ``FKeyDef`` on its table (``TableDef.foreign_keys``)
and on the referenced table (``TableDef.referenced_by``), so the executor's checks
(``minidb.exec.ri``) find both directions with one attribute read.

Departure: names, not OIDs / attnums, say what is referenced, so RENAME of a table or a
column that takes part in a foreign key is refused (``minidb.sql.fkeys``) instead of
followed, as PostgreSQL's OID references are.
"""

from __future__ import annotations

import re

from minidb.catalog.bootstrap import PG_CONSTRAINT
from minidb.catalog.defs import (FK_CASCADE, FK_NO_ACTION, FK_RESTRICT, FK_SET_DEFAULT,
                                 FK_SET_NULL, FKeyDef)

__all__ = ["ACTION_WORDS", "definition", "parse_definition", "attach", "insert_fkey",
           "delete_fkey", "CONTYPE_FOREIGN"]

CONTYPE_FOREIGN = "f"
ACTION_WORDS = {FK_NO_ACTION: "NO ACTION", FK_RESTRICT: "RESTRICT", FK_CASCADE: "CASCADE",
                FK_SET_NULL: "SET NULL", FK_SET_DEFAULT: "SET DEFAULT"}
_ACTION_OF = {v: k for k, v in ACTION_WORDS.items()}
_PLAIN = re.compile(r"[a-z_][a-z0-9_$]*\Z")
_IDENT = re.compile(r'"((?:[^"]|"")*)"|([^\s,()"]+)')
_DEF = re.compile(r'FOREIGN KEY \((?P<cols>.*?)\) REFERENCES (?P<ref>"(?:[^"]|"")*"|[^\s(]+)'
                  r'\((?P<rcols>.*?)\)(?: ON UPDATE (?P<upd>NO ACTION|RESTRICT|CASCADE|SET NULL'
                  r'|SET DEFAULT))?(?: ON DELETE (?P<del>NO ACTION|RESTRICT|CASCADE|SET NULL'
                  r'|SET DEFAULT))?\Z', re.S)


def quote_ident(name: str) -> str:
    """PostgreSQL's quote_ident: plain lower-case names as they are, others in quotes."""
    return name if _PLAIN.match(name) else '"' + name.replace('"', '""') + '"'


def definition(fk: FKeyDef) -> str:
    """``pg_get_constraintdef`` of a foreign key (see the module docstring)."""
    s = (f"FOREIGN KEY ({', '.join(quote_ident(c) for c in fk.columns)}) REFERENCES "
         f"{quote_ident(fk.ref_table)}({', '.join(quote_ident(c) for c in fk.ref_columns)})")
    if fk.on_update != FK_NO_ACTION:
        s += f" ON UPDATE {ACTION_WORDS[fk.on_update]}"
    if fk.on_delete != FK_NO_ACTION:
        s += f" ON DELETE {ACTION_WORDS[fk.on_delete]}"
    return s


def _idents(text: str) -> list[str]:
    return [m.group(1).replace('""', '"') if m.group(1) is not None else m.group(2)
            for m in _IDENT.finditer(text)]


def parse_definition(oid: int, name: str, table: str, src: str) -> FKeyDef | None:
    """The ``FKeyDef`` a stored definition describes (None: not a foreign key's text)."""
    m = _DEF.match(src)
    if m is None:
        return None
    return FKeyDef(oid, name, table, _idents(m["cols"]), _idents(m["ref"])[0],
                   _idents(m["rcols"]), _ACTION_OF[m["upd"] or "NO ACTION"],
                   _ACTION_OF[m["del"] or "NO ACTION"])


def attach(tables_by_oid: dict, rows) -> int:
    """Hang the foreign keys of the pg_constraint ``rows`` ((tid, row) pairs) on their
    tables (both directions); returns the largest constraint OID seen."""
    top = 0
    by_name = {t.name: t for t in tables_by_oid.values()}
    for tid, r in rows:
        top = max(top, r[0])
        if r[3] != CONTYPE_FOREIGN:
            continue
        t = tables_by_oid.get(r[2])
        if t is None:
            continue  # the checker reports a constraint without its table
        fk = parse_definition(r[0], r[1], t.name, r[4])
        if fk is None:
            continue
        fk.tid, fk.table_oid = tid, t.oid
        t.foreign_keys.append(fk)
        ref = by_name.get(fk.ref_table)
        if ref is not None:
            fk.ref_oid = ref.oid
            ref.referenced_by.append(fk)
    for t in tables_by_oid.values():
        t.foreign_keys.sort(key=lambda f: f.name)
        t.referenced_by.sort(key=lambda f: (f.table, f.name))
    return top


def insert_fkey(catalog, b, fk: FKeyDef) -> None:
    """Insert ``fk``'s pg_constraint row (``Catalog.run_change`` calls this with the
    catalog and the backend; the OID comes from the shared counter)."""
    t = catalog._state().tables[fk.table]
    with catalog._cache.lock:
        oid = catalog._cache.new_oid()
    catalog._insert(b, PG_CONSTRAINT, (oid, fk.name, t.oid, CONTYPE_FOREIGN, definition(fk)))
    catalog._changed(b)


def delete_fkey(catalog, b, fk: FKeyDef) -> None:
    """Delete ``fk``'s pg_constraint row (through ``Catalog.run_change``)."""
    catalog._write(b, PG_CONSTRAINT, fk.tid)
    catalog._changed(b)
