"""Views: CREATE [OR REPLACE] VIEW, DROP VIEW, and their expansion at bind time.

A view is its query's SQL text in the catalog (``minidb.catalog.views``: pg_class relkind
'v' without a file, pg_attribute rows for its columns, pg_rewrite for the text and the
relations it reads).  Where a query names it in FROM, the binder reads the text again and
binds it as a subquery with the view's name as its alias (``rewrite.expand``) - PostgreSQL's
rewriter does the same with the stored parse tree.  So the plan of a query over a view is
the plan of the same query written with the subquery, its tables are locked and read as
any subquery's, and a cached plan goes when the view is replaced or dropped (the catalog
version moves).

CREATE VIEW binds the query once (its names and types are the view's columns; a column
list renames the first ones; a duplicate name is 42701) and records the tables and views it
reads.  OR REPLACE keeps the old columns' names and types in order (another name or type is
42P16, fewer columns 42P16: PostgreSQL's "cannot drop columns from view"), new columns may
follow.  DROP VIEW of a table is 42809; DROP VIEW / DROP TABLE of a relation that a view
reads is 2BP01 with PostgreSQL's DETAIL and HINT, unless CASCADE, which drops those views
(and the views that read them) first, with a NOTICE per view.

Departures: the text is re-bound at each planning, so renaming or dropping a column a view
reads (ALTER TABLE) is not refused as PostgreSQL refuses it: the view fails when next used
(42703).  Views cannot be written (INSERT / UPDATE / DELETE on one is 42809: PostgreSQL's
automatically updatable views are not implemented); a view takes no lock of its own (its
tables' locks are taken when a query over it is planned).
"""

from __future__ import annotations

import dataclasses

import minidb.errors as errors
from minidb.catalog import ColumnDef
from minidb.catalog import views as catviews
from minidb.sql import ast
from minidb.sql.result import Result
from minidb.sql.rewrite import check_not_view

__all__ = ["create_view", "drop_view", "dependents", "drop_dependents", "check_not_view"]


def _names_in(node, out: set) -> None:
    """The relation names a query's FROM lists name (TableRef), CTE names included."""
    if isinstance(node, ast.TableRef):
        out.add(node.name)
    elif isinstance(node, (list, tuple)):
        for x in node:
            _names_in(x, out)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            _names_in(getattr(node, f.name), out)


def create_view(engine, st: ast.CreateViewStmt) -> Result:
    from minidb.sql.ctas import _column_type, query_columns
    session = engine.session

    def body(snap):
        catalog = session.backend.catalog
        cols = query_columns(engine, st.query, st.columns,
                             "CREATE VIEW specifies more column names than columns")
        defs = [ColumnDef(n, _column_type(t)) for n, t in cols]
        named: set = set()
        _names_in(st.query, named)
        deps = set()                          # the relations it names itself
        for n in named:
            rel = catalog.view(n) or catalog.tables.get(n)
            if rel is not None:
                if rel.name != n and rel.name.startswith(catalog.temp_prefix):
                    raise errors.NotSupportedError(
                        f'views over temporary tables ("{n}") are not supported '
                        "(PostgreSQL makes such a view temporary)")
                deps.add(rel.oid)
        old = catalog.view(st.name)
        if old is not None and st.replace:
            _check_replace(old, defs)
            catalog.run_change(catviews.replace_view, st.name, defs, st.text, sorted(deps))
        else:
            if old is not None or st.name in catalog.tables or st.name in catalog.indexes:
                raise errors.DuplicateTable(f'relation "{st.name}" already exists')
            catalog.run_change(catviews.create_view, st.name, defs, st.text, sorted(deps))
        return Result(None, [], -1, "CREATE VIEW"), True
    return engine._statement(body)


def _check_replace(old, defs) -> None:
    if len(defs) < len(old.columns):
        raise errors.InvalidTableDefinition("cannot drop columns from view")
    for a, b in zip(old.columns, defs):
        if a.name != b.name:
            raise errors.InvalidTableDefinition(
                f'cannot change name of view column "{a.name}" to "{b.name}"')
        if a.type != b.type:
            raise errors.InvalidTableDefinition(
                f'cannot change data type of view column "{a.name}" from {a.type} to '
                f"{b.type}")


def dependents(catalog, kind: str, name: str, oid: int) -> list:
    """The views that read relation ``oid``, directly or through other views, as
    (view, what it depends on: "table t" / "view v"), each after the relation it reads."""
    out, seen = [], set()

    def visit(o, what):
        for v in sorted(catalog.views.values(), key=lambda v: v.oid):
            if o in v.deps and v.oid not in seen:
                seen.add(v.oid)
                out.append((v, what))
                visit(v.oid, f"view {v.name}")
    visit(oid, f"{kind} {name}")
    return out


def drop_dependents(engine, kind: str, name: str, oid: int, cascade: bool,
                    msgs: list) -> None:
    """Before DROP of relation ``name`` (``kind``: table or view): 2BP01 if views read it,
    or with CASCADE drop them (NOTICEs in ``msgs``)."""
    catalog = engine.session.backend.catalog
    deps = dependents(catalog, kind, name, oid)
    if not deps:
        return
    if not cascade:
        detail = "\n".join(f"view {v.name} depends on {what}" for v, what in deps)
        raise errors.DependentObjectsStillExist(
            f"cannot drop {kind} {name} because other objects depend on it\nDETAIL:  "
            f"{detail}\nHINT:  Use DROP ... CASCADE to drop the dependent objects too.")
    if len(deps) == 1:
        msgs.append(f"NOTICE:  drop cascades to view {deps[0][0].name}")
    else:
        msgs.append(f"NOTICE:  drop cascades to {len(deps)} other objects\nDETAIL:  "
                    + "\n".join(f"drop cascades to view {v.name}" for v, _ in deps))
    for v, _ in reversed(deps):               # the views that read a view go first
        if catalog.view(v.name) is not None:
            catalog.run_change(catviews.drop_view, v.name)


def drop_view(engine, st: ast.DropViewStmt) -> Result:
    session = engine.session

    def body(snap):
        catalog = session.backend.catalog
        msgs: list = []
        todo = []
        for name in st.names:
            v = catalog.view(name)
            if v is None:
                if name in catalog.tables or name in catalog.system_tables:
                    raise errors.WrongObjectType(
                        f'"{name}" is not a view\nHINT:  Use DROP TABLE to remove a table.')
                if st.if_exists:
                    msgs.append(f'NOTICE:  view "{name}" does not exist, skipping')
                    continue
                raise errors.UndefinedTable(f'view "{name}" does not exist')
            todo.append(name)
        for name in todo:
            v = catalog.view(name)
            if v is None:
                continue                      # dropped by an earlier CASCADE
            drop_dependents(engine, "view", name, v.oid, st.cascade, msgs)
            catalog.run_change(catviews.drop_view, name)
        return Result(None, [], -1, "DROP VIEW", msgs), True
    return engine._statement(body)
