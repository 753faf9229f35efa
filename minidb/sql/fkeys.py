"""FOREIGN KEY constraints: the DDL (PostgreSQL's ``tablecmds.c`` for foreign keys).

Syntax: a column's ``REFERENCES t [(col)] [ON DELETE a] [ON UPDATE a]``, a table's
``[CONSTRAINT n] FOREIGN KEY (cols) REFERENCES t [(cols)] ...``, and ``ALTER TABLE t ADD
[CONSTRAINT n] FOREIGN KEY ...``; actions NO ACTION (the default), RESTRICT, CASCADE,
SET NULL, SET DEFAULT.  ``REFERENCES t`` alone means t's primary key (42830 when it has
none).  The referenced columns must be exactly the columns of a unique index of t
(42830 'there is no unique constraint matching given keys for referenced table "t"'),
the two column lists equally long (42830), and each pair of columns of comparable types
(42804).  The default name is PostgreSQL's ``<table>_<cols>_fkey``.

* CREATE TABLE makes its constraints after the table and its own unique indexes (so a
  table may reference itself).
* ALTER TABLE ... ADD takes Share Row Exclusive on both tables (PostgreSQL's lock for it)
  and checks the existing rows, as PostgreSQL's RI_Initial_Check does with one query: a
  referencing row whose key (no NULL in it) is absent from the referenced table fails
  with 23503 naming it.
* DROP TABLE of a table another table references is 2BP01 ('cannot drop table p because
  other objects depend on it', DETAIL 'constraint c_pid_fkey on table c depends on table
  p', HINT 'Use DROP ... CASCADE ...'); with CASCADE the constraints go (NOTICE 'drop
  cascades to constraint ...'), the referencing tables stay.  Dropping a table drops its
  own constraints.  ALTER TABLE ... DROP CONSTRAINT drops a foreign key by name.
* RENAME of a table or column that takes part in a foreign key, and DROP COLUMN of one of
  its columns, are refused (0A000): the stored definition names them
  (``minidb.catalog.fkeys``).  TRUNCATE of a referenced table is 0A000 as in PostgreSQL
  unless the referencing tables are truncated in the same command or CASCADE adds them.

The checks and actions at run time are ``minidb.exec.ri``'s.
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.catalog.defs import FK_SET_DEFAULT, FKeyDef
from minidb.sql.parser.fkeyspec import FKeySpec

__all__ = ["FKeySpec", "create_fkeys", "add_fkey",
           "drop_dependents", "drop_fkey_named", "refuse_if_involved", "truncate_targets",
           "drop_index_dependents"]

# ---------------------------------------------------------------------------------------------
def _type_group(t: str) -> str:
    from minidb.types import parse_type
    n = parse_type(t).name
    if n in ("smallint", "integer", "bigint", "numeric", "real", "double precision"):
        return "number"
    if n in ("text", "varchar", "char"):
        return "string"
    return n


def _existing_names(catalog) -> set:
    return {fk.name for t in catalog.tables.values() for fk in t.foreign_keys}


def _resolve(engine, table, spec: FKeySpec, pending_names: set) -> FKeyDef:
    catalog = engine.session.backend.catalog
    t = catalog.table(table)
    for c in spec.columns:
        if t.column_index(c) < 0:
            raise errors.UndefinedColumn(
                f'column "{c}" referenced in foreign key constraint does not exist')
    ref = catalog.table(spec.ref_table)
    ref_cols = spec.ref_columns
    if ref_cols is None:
        pk = [catalog.indexes[i] for i in ref.indexes
              if i in catalog.indexes and catalog.indexes[i].primary]
        if not pk:
            raise errors.InvalidForeignKey(
                f'there is no primary key for referenced table "{ref.name}"')
        ref_cols = list(pk[0].columns)
    for c in ref_cols:
        if ref.column_index(c) < 0:
            raise errors.UndefinedColumn(
                f'column "{c}" referenced in foreign key constraint does not exist')
    if len(ref_cols) != len(spec.columns):
        raise errors.InvalidForeignKey(
            "number of referencing and referenced columns for foreign key disagree")
    if not any(catalog.indexes[i].unique and sorted(catalog.indexes[i].columns)
               == sorted(ref_cols) for i in ref.indexes if i in catalog.indexes):
        raise errors.InvalidForeignKey(
            f'there is no unique constraint matching given keys for referenced table '
            f'"{ref.name}"')
    name = spec.name
    taken = _existing_names(catalog) | pending_names
    if name is None:
        base = f"{table}_{'_'.join(spec.columns)}_fkey"
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}{k}"
    elif name in {fk.name for fk in t.foreign_keys} | pending_names:
        raise errors.ProgrammingError(
            f'constraint "{name}" for relation "{table}" already exists', sqlstate="42710")
    for c, rc in zip(spec.columns, ref_cols):
        a, b = t.columns[t.column_index(c)].type, ref.columns[ref.column_index(rc)].type
        if _type_group(a) != _type_group(b):
            raise errors.DatatypeMismatch(
                f'foreign key constraint "{name}" cannot be implemented\nDETAIL:  Key '
                f'columns "{c}" and "{rc}" are of incompatible types: {a} and {b}.')
    if FK_SET_DEFAULT in (spec.on_delete, spec.on_update):
        from minidb.exec.ri import constant_default
        for c in spec.columns:
            constant_default(t.columns[t.column_index(c)])   # refuses a non-constant one
    return FKeyDef(0, name, table, list(spec.columns), ref.name, list(ref_cols),
                   spec.on_update, spec.on_delete, t.oid, ref.oid)


def _insert(engine, fk: FKeyDef) -> None:
    from minidb.catalog.fkeys import insert_fkey
    engine.session.backend.catalog.run_change(insert_fkey, fk)


def create_fkeys(engine, table: str, specs) -> None:
    """CREATE TABLE's constraints (the table and its unique indexes exist already)."""
    pending: set = set()
    fks = []
    for s in specs:
        fk = _resolve(engine, table, s, pending)
        pending.add(fk.name)
        fks.append(fk)
    for fk in fks:
        _insert(engine, fk)


def add_fkey(engine, table: str, spec: FKeySpec) -> None:
    """ALTER TABLE ... ADD [CONSTRAINT n] FOREIGN KEY ...: lock both tables, check the
    rows there are, add the constraint."""
    from minidb.sql.locking import lock_table
    from minidb.txn.lmgr import SQL_MODES
    mode = SQL_MODES["SHARE ROW EXCLUSIVE"]
    lock_table(engine, table, mode)
    if spec.ref_table != table:
        lock_table(engine, spec.ref_table, mode)
    fk = _resolve(engine, table, spec, set())
    _validate(engine, fk)
    _insert(engine, fk)


def _validate(engine, fk: FKeyDef) -> None:
    """RI_Initial_Check: every referencing key of the table is present."""
    from minidb.exec.ri import key_text, referencing_key
    backend = engine.session.backend
    catalog = backend.catalog
    t = catalog.table(fk.table)
    ref = catalog.table(fk.ref_table)
    snap = backend.xact.current_snapshot()
    present = {tuple(r[ref.column_index(c)] for c in fk.ref_columns)
               for r in _all_rows(backend, ref, snap)}
    for r in _all_rows(backend, t, snap):
        k = referencing_key(t, fk, r)
        if k is not None and k not in present:
            raise errors.ForeignKeyViolation(
                f'insert or update on table "{fk.table}" violates foreign key constraint '
                f'"{fk.name}"\nDETAIL:  Key {key_text(fk.columns, k)} is not present in '
                f'table "{fk.ref_table}".')


def _all_rows(backend, tdef, snap):
    from minidb.exec.chunk import column_to_list
    from minidb.heap import mvcc
    from minidb.types import parse_type
    rel = backend.catalog.heap_rel(tdef.name)
    types = [parse_type(c.type) for c in tdef.columns]
    scan = mvcc.seq_scan(backend, rel, list(range(len(types))), snap)
    try:
        for batch in scan:
            cols = [column_to_list(v, m, ty) for (v, m), ty in zip(batch.columns, types)]
            yield from zip(*cols)
    finally:
        scan.close()


def drop_dependents(engine, names, cascade: bool, msgs: list, notice) -> None:
    """DROP TABLE ``names``: their own foreign keys go with them; a foreign key of another
    table that references one of them is 2BP01, or dropped with CASCADE."""
    from minidb.catalog.fkeys import delete_fkey
    catalog = engine.session.backend.catalog
    dropping = set(names)
    outside = []
    for n in names:
        t = catalog.tables.get(n)
        if t is None:
            continue
        outside.extend(fk for fk in t.referenced_by if fk.table not in dropping)
    if outside and not cascade:
        fk = outside[0]
        detail = "\n".join(f"constraint {f.name} on table {f.table} depends on table "
                           f"{f.ref_table}" for f in outside)
        raise errors.ProgrammingError(
            f"cannot drop table {fk.ref_table} because other objects depend on it\n"
            f"DETAIL:  {detail}\nHINT:  Use DROP ... CASCADE to drop the dependent objects "
            f"too.", sqlstate="2BP01")
    for fk in outside:
        msgs.append(notice(f"drop cascades to constraint {fk.name} on table {fk.table}"))
    seen = set()
    for n in names:
        t = catalog.tables.get(n)
        if t is None:
            continue
        for fk in list(t.foreign_keys) + [f for f in t.referenced_by if f.table not in dropping]:
            if fk.oid not in seen:
                seen.add(fk.oid)
                catalog.run_change(delete_fkey, _fresh(catalog, fk))


def _fresh(catalog, fk):
    """The catalog's current entry of ``fk`` (its row moves when another one is dropped:
    the TIDs are of the state the backend reads now)."""
    t = catalog.tables.get(fk.table)
    for f in (t.foreign_keys if t is not None else []):
        if f.oid == fk.oid:
            return f
    return fk


def drop_fkey_named(engine, table: str, name: str) -> bool:
    """ALTER TABLE ... DROP CONSTRAINT name for a foreign key; False if none is so named."""
    from minidb.catalog.fkeys import delete_fkey
    catalog = engine.session.backend.catalog
    t = catalog.tables.get(table)
    for fk in (t.foreign_keys if t is not None else []):
        if fk.name == name:
            catalog.run_change(delete_fkey, fk)
            return True
    return False


def refuse_if_involved(catalog, table: str, what: str, column: str | None = None) -> None:
    """RENAME / DROP COLUMN of a table or column a foreign key names (0A000)."""
    t = catalog.tables.get(table)
    if t is None:
        return
    for fk in t.foreign_keys + t.referenced_by:
        cols = (fk.columns if fk.table == table else []) + \
            (fk.ref_columns if fk.ref_table == table else [])
        if column is None or column in cols:
            raise errors.NotSupportedError(
                f'{what} of {"column " + repr(column) if column else "table " + table} '
                f'is not supported while foreign key constraint "{fk.name}" names it; '
                f"drop the constraint first")



def truncate_targets(catalog, names, cascade: bool, msgs: list, notice) -> list:
    """TRUNCATE: a table referenced from a table not truncated with it is 0A000; with
    CASCADE the referencing tables join the command (NOTICE 'truncate cascades to table
    "c"'), recursively."""
    out = list(names)
    i = 0
    while i < len(out):
        t = catalog.tables.get(out[i])
        for fk in (t.referenced_by if t is not None else []):
            if fk.table in out:
                continue
            if not cascade:
                raise errors.NotSupportedError(
                    f"cannot truncate a table referenced in a foreign key constraint\n"
                    f'DETAIL:  Table "{fk.table}" references "{out[i]}".\nHINT:  Truncate '
                    f'table "{fk.table}" at the same time, or use TRUNCATE ... CASCADE.')
            msgs.append(notice(f'truncate cascades to table "{fk.table}"'))
            out.append(fk.table)
        i += 1
    return out


def drop_index_dependents(engine, idef, cascade: bool, msgs: list, notice, what: str) -> None:
    """Dropping the unique index ``idef`` (DROP INDEX, or DROP CONSTRAINT of a primary key
    or unique constraint): the foreign keys that need it (no other unique index of their
    table has their referenced columns) are 2BP01, or dropped with CASCADE."""
    from minidb.catalog.fkeys import delete_fkey
    catalog = engine.session.backend.catalog
    t = catalog.tables.get(idef.table)
    if t is None or not idef.unique:
        return
    others = [catalog.indexes[i] for i in t.indexes
              if i in catalog.indexes and i != idef.name and catalog.indexes[i].unique]
    need = [fk for fk in t.referenced_by
            if sorted(fk.ref_columns) == sorted(idef.columns)
            and not any(sorted(o.columns) == sorted(fk.ref_columns) for o in others)]
    if not need:
        return
    if not cascade:
        detail = "\n".join(f"constraint {fk.name} on table {fk.table} depends on index "
                           f"{idef.name}" for fk in need)
        raise errors.ProgrammingError(
            f"cannot drop {what} because other objects depend on it\nDETAIL:  {detail}\n"
            f"HINT:  Use DROP ... CASCADE to drop the dependent objects too.",
            sqlstate="2BP01")
    for fk in need:
        msgs.append(notice(f"drop cascades to constraint {fk.name} on table {fk.table}"))
        catalog.run_change(delete_fkey, _fresh(catalog, fk))
