"""CREATE TABLE ... AS and SELECT ... INTO (PostgreSQL's ``createas.c``).

Both are one statement of the session's transaction: the query is bound first (its
output names and types become the new table's columns: PostgreSQL's rule, an unnamed
expression's column is ``?column?``, an untyped literal's type text), the table is
created (its catalog rows and file, removed again if the transaction aborts), and unless
``WITH NO DATA`` the query's rows are inserted by the same plan an ``INSERT INTO t
SELECT ...`` would have, in the same statement, so an error anywhere leaves nothing.
The command tag is PostgreSQL's ``SELECT n``.

Column names given after the table name (``CREATE TABLE t (a, b) AS ...``) rename the
query's first columns, as PostgreSQL does; more names than columns is 42601.  The new
table has no constraints, defaults or indexes (PostgreSQL's neither).
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.catalog import ColumnDef
from minidb.exec.nodes import ExecContext
from minidb.sql import ast
from minidb.sql.binder import Binder
from minidb.sql.locking import statement_lock_reqs
from minidb.sql.parser.translate import parse_expression_text
from minidb.sql.result import Result

__all__ = ["create_table_as", "query_columns"]


def query_columns(engine, query, names=None,
                  too_many="too many column names were specified") -> list[tuple[str, object]]:
    """(name, SqlType) of each output column of ``query`` (bound against the session's
    catalog), renamed by ``names`` as a column-name list after a table or view name is."""
    catalog = engine.session.backend.catalog
    bound = Binder(catalog, (), default_parser=parse_expression_text).bind(query)
    cols = list(zip(bound.names, bound.types))
    if names:
        if len(names) > len(cols):
            raise errors.SyntaxError_(too_many)
        cols = [(names[i] if i < len(names) else n, t) for i, (n, t) in enumerate(cols)]
    seen = set()
    for n, _ in cols:
        if n in seen:
            raise errors.DuplicateColumn(f'column "{n}" specified more than once')
        seen.add(n)
    return cols


def _column_type(t) -> str:
    from minidb.exec.datatypes import type_name
    s = str(t)
    if s in ("unknown", "null"):            # an untyped literal: text, as PostgreSQL 10+
        return "text"
    return s if s else type_name(t)


def create_table_as(engine, st: ast.CreateTableAsStmt) -> Result:
    session = engine.session
    if st.nparams:
        raise errors.NotSupportedError("parameters in CREATE TABLE ... AS / SELECT ... INTO "
                                       "are not supported")

    def body(snap):
        backend = session.backend
        catalog = backend.catalog
        taken = (dict.__contains__(catalog.tables, catalog.temp_prefix + st.name) if st.temp
                 else st.name in catalog.tables or st.name in catalog.indexes
                 or _is_other(engine, st.name))
        if taken:
            if st.if_not_exists:
                return Result(None, [], -1, "CREATE TABLE AS", [
                    f'NOTICE:  relation "{st.name}" already exists, skipping']), False
            raise errors.DuplicateTable(f'relation "{st.name}" already exists')
        cols = query_columns(engine, st.query, st.columns)
        defs = [ColumnDef(n, _column_type(t)) for n, t in cols]
        if st.temp:
            from minidb.sql.temp import create_temp_table
            create_temp_table(engine, st.name, defs, st.on_commit)
        else:
            catalog.create_table(st.name, defs)
        n = 0
        if st.with_data:
            n = _insert_rows(engine, st, snap)
        return Result(None, [], n, f"SELECT {n}"), True
    return engine._statement(body)


def _is_other(engine, name: str) -> bool:
    """A view (or another relation kind) of that name."""
    views = getattr(engine.session.backend.catalog, "views", None)
    return bool(views) and name in views


def _insert_rows(engine, st, snap) -> int:
    from minidb.sql.planner import Planner
    session = engine.session
    catalog = session.backend.catalog
    ins = ast.InsertStmt(st.name, None, select=st.query)
    bound = Binder(catalog, (), default_parser=parse_expression_text).bind(ins)
    session.backend.lockmgr.lock_prepared(statement_lock_reqs(bound, catalog))
    plan = Planner(catalog, session.settings, engine.instance.smgr).plan(bound)
    ectx = ExecContext(session, snap, [])
    it = plan.root.run(ectx)
    try:
        for _ in it:
            pass
    finally:
        it.close()
    return ectx.rows_affected
