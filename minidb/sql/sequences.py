"""Sequences at the SQL level: CREATE / ALTER / DROP SEQUENCE, serial and identity columns,
and the functions ``nextval`` / ``currval`` / ``setval`` / ``lastval``.

The sequence itself (its page, its logging, why nextval is not transactional) is
``minidb.catalog.sequence``.  Here:

* ``HANDLERS``: the utility statements (parsed by ``minidb.sql.parser.sequence``), each a
  statement of the session's transaction like the other DDL;
* ``serial_columns(engine, st, defs)`` / ``create_owned(engine, table, plan)``: CREATE
  TABLE's ``serial`` / ``bigserial`` / ``smallserial`` and ``GENERATED { ALWAYS | BY
  DEFAULT } AS IDENTITY [(options)]`` columns: the column becomes integer / bigint /
  smallint NOT NULL with the DEFAULT ``nextval('T_C_seq')``, and a sequence of that name
  (the first free one) is created after the table, owned by the column (dropped with the
  table: ``drop_owned``);
* the binder's rules for identity columns are ``minidb.sql.identity`` (428C9 for a value
  given to a GENERATED ALWAYS column, OVERRIDING SYSTEM / USER VALUE);
* the four functions are per row in Python with the execution context, beside the catalog
  functions (``minidb.exec.catfuncs``; their argument types in ``minidb.sql.functions``).

Departure: an identity column's kind is kept after its default's text in pg_attribute
(``minidb.catalog.bootstrap.IDENTITY_MARK``), as minidb's pg_attribute has no attidentity
column; the virtual pg_attribute shows it in ``attidentity``.
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.catalog import sequence as seq
from minidb.sql import ast
from minidb.sql.parser.sequence import AlterSequenceStmt, CreateSequenceStmt, DropSequenceStmt
from minidb.sql.result import Result

__all__ = ["HANDLERS", "serial_columns", "create_owned", "drop_owned", "SERIAL_TYPES"]

SERIAL_TYPES = ast.SERIAL_TYPES  # (the parser's: it reads serial as its integer type)


def _result(status, messages=None):
    return Result(None, [], -1, status, messages or [])


def _ddl(engine, body):
    return engine._statement(lambda snap: (body(), True))


def _taken(catalog, name: str) -> bool:
    return (name in catalog.tables or name in catalog.indexes or name in catalog.sequences
            or name in catalog.system_tables)


def _free_name(catalog, name: str) -> str:
    if not _taken(catalog, name):
        return name
    for i in range(1, 10000):
        if not _taken(catalog, f"{name}{i}"):
            return f"{name}{i}"
    raise errors.DuplicateTable(f'relation "{name}" already exists')


def _owner(catalog, owned_by):
    """(table oid, attnum) of OWNED BY t.c (None: OWNED BY NONE)."""
    if owned_by is None:
        return 0, 0
    tname, cname = owned_by
    t = catalog.tables.get(tname)
    if t is None:
        raise errors.UndefinedTable(f'relation "{tname}" does not exist')
    a = t.column_index(cname)
    if a < 0:
        raise errors.UndefinedColumn(f'column "{cname}" of relation "{tname}" does not exist')
    return t.oid, a + 1


# -- CREATE / ALTER / DROP SEQUENCE ------------------------------------------------------------
def _create(engine, st: CreateSequenceStmt):
    return _ddl(engine, lambda: _create_body(engine, st))


def _create_body(engine, st: CreateSequenceStmt):
    catalog = engine.session.backend.catalog
    if _taken(catalog, st.name):
        if st.if_not_exists:
            return _result("CREATE SEQUENCE", [
                f'NOTICE:  relation "{st.name}" already exists, skipping'])
        raise errors.DuplicateTable(f'relation "{st.name}" already exists')
    opts = dict(st.options)
    owned = opts.pop("owned_by", None)
    params = seq.sequence_params(opts)
    params.owner_rel, params.owner_att = _owner(catalog, owned)
    seq.create_sequence(catalog, st.name, params)
    return _result("CREATE SEQUENCE")


def _alter(engine, st: AlterSequenceStmt):
    return _ddl(engine, lambda: _alter_body(engine, st))


def _alter_body(engine, st: AlterSequenceStmt):
    backend = engine.session.backend
    catalog = backend.catalog
    sdef = catalog.sequences.get(st.name)
    if sdef is None:
        if st.if_exists:
            return _result("ALTER SEQUENCE", [
                f'NOTICE:  relation "{st.name}" does not exist, skipping'])
        if st.name in catalog.tables or st.name in catalog.indexes:
            raise errors.WrongObjectType(f'"{st.name}" is not a sequence')
        raise errors.UndefinedTable(f'relation "{st.name}" does not exist')
    opts = dict(st.options)
    if "owned_by" in opts:
        owner = _owner(catalog, opts.pop("owned_by"))
        seq.alter_sequence(backend, sdef, opts)
        seq._update(backend, sdef, lambda p: _set_owner(p, owner))
    else:
        seq.alter_sequence(backend, sdef, opts)
    return _result("ALTER SEQUENCE")


def _set_owner(p, owner):
    p.owner_rel, p.owner_att = owner
    return p


def _drop(engine, st: DropSequenceStmt):
    return _ddl(engine, lambda: _drop_body(engine, st))


def _drop_body(engine, st: DropSequenceStmt):
    from minidb.sql.locking import lock_oid
    from minidb.txn.lmgr import AccessExclusiveLock
    backend = engine.session.backend
    catalog = backend.catalog
    msgs = []
    for name in st.names:
        sdef = catalog.sequences.get(name)
        if sdef is None:
            if name in catalog.tables or name in catalog.indexes:
                raise errors.WrongObjectType(f'"{name}" is not a sequence')
            if st.if_exists:
                msgs.append(f'NOTICE:  sequence "{name}" does not exist, skipping')
                continue
            raise errors.UndefinedTable(f'sequence "{name}" does not exist')
        lock_oid(engine, sdef.oid, AccessExclusiveLock)
        seq.drop_sequence(catalog, sdef)
    return _result("DROP SEQUENCE", msgs)


HANDLERS = {CreateSequenceStmt: _create, AlterSequenceStmt: _alter, DropSequenceStmt: _drop}


# -- serial and identity columns -------------------------------------------------------------
def serial_columns(engine, st, defs) -> list:
    """Before CREATE TABLE: give each serial / identity column of ``st`` its type, NOT NULL
    and DEFAULT ``nextval(...)`` in ``defs`` (the ColumnDefs); returns what
    ``create_owned`` needs after the table exists."""
    catalog = engine.session.backend.catalog
    plan = []
    names = set()
    for i, c in enumerate(st.columns):
        kind = getattr(c, "identity", "")
        if not kind:
            continue
        d = defs[i]
        if c.default is not None:
            raise errors.ProgrammingError(
                f'multiple default values specified for column "{c.name}" of table '
                f'"{st.name}"', sqlstate="42601")
        name = f"{st.name}_{c.name}_seq"
        while _taken(catalog, name) or name in names:
            name = _free_name(catalog, name) if name not in names else name + "1"
        names.add(name)
        d.not_null = True
        d.default = f"nextval('{name}')"
        d.identity = kind if kind in ("a", "d") else ""
        plan.append((name, i + 1, d.type, d.identity, dict(getattr(c, "seq_options", None)
                                                            or {})))
    return plan


def create_owned(engine, table: str, plan: list) -> None:
    """After CREATE TABLE: the sequences ``serial_columns`` named, owned by their columns."""
    if not plan:
        return
    catalog = engine.session.backend.catalog
    t = catalog.table(table)
    for name, attnum, type_name, identity, opts in plan:
        opts.setdefault("as", type_name if type_name in seq.TYPE_LIMITS else "bigint")
        opts.pop("owned_by", None)
        params = seq.sequence_params(opts)
        params.owner_rel, params.owner_att, params.identity = t.oid, attnum, identity
        seq.create_sequence(catalog, name, params)


def drop_owned(engine, table_oid: int) -> None:
    """DROP TABLE: the sequences its columns own go with it."""
    backend = engine.session.backend
    for sdef in seq.owned_sequences(backend, table_oid):
        seq.drop_sequence(backend.catalog, sdef)
