"""CHECK constraints: naming, validation at CREATE TABLE / ALTER TABLE, binding for writes.

A constraint is a pg_constraint row (contype 'c', ``minidb.catalog.constraints``) with the
expression's SQL text; ``TableDef.checks`` lists them.  Names follow PostgreSQL: a column
constraint ``<table>_<column>_check``, a table constraint naming one column the same, else
``<table>_check``, a number appended while the name is taken (``t_a_check1``); a given name
already used on the table is 42710.  The expression must be boolean (42804), may not hold
a subquery (0A000) or an aggregate / window function (42803) and reads only the table's
columns (42703 otherwise).

Enforcement: ``bind_checks`` binds the expressions over a write's target entry (INSERT,
UPDATE, and the bulk loads' ``run_insert``), and the executor's ``RowChecker``
(``minidb.exec.checks``) tests each batch of new rows.  ALTER TABLE ... ADD CONSTRAINT ...
CHECK scans the table's rows (this transaction's fresh snapshot, under the ALTER's
AccessExclusiveLock) and fails with 23514 ``check constraint "c" of relation "t" is
violated by some row`` if any is rejected; DROP CONSTRAINT drops it.

Departures: the text is re-bound at each use, so RENAME COLUMN / DROP COLUMN of a column a
check reads leaves a constraint that fails at the next write (PostgreSQL renames it in the
stored tree, or drops the constraint with the column); NOT VALID and NO INHERIT are not
supported.
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.catalog import constraints as catcons
from minidb.sql import ast

__all__ = ["bind_checks", "create_table_checks", "add_check", "drop_check"]


def bind_checks(catalog, entry) -> list:
    """[(name, bound boolean Expr over ``entry``)] of the target table's CHECKs
    (``Binder.check_constraints``)."""
    from minidb.sql.binder import Binder
    from minidb.sql.parser.translate import parse_expression_text
    return Binder(catalog, default_parser=parse_expression_text).check_constraints(entry)


def _validate(catalog, tname: str, text: str) -> None:
    from minidb.sql.binder import Binder, RangeEntry
    from minidb.sql.parser.translate import parse_expression_text
    from minidb.types import parse_type
    node = parse_expression_text(text)
    if _has(node, ast.SubqueryE):
        raise errors.NotSupportedError("cannot use subquery in check constraint")
    if _has(node, ast.WindowE):
        raise errors.GroupingError("cannot use window function in check constraint")
    t = catalog.table(tname)
    entry = RangeEntry(0, t.name, t, [(c.name, parse_type(c.type)) for c in t.columns],
                       [c.not_null for c in t.columns])
    e = Binder(catalog).boolean(node, [entry], "CHECK")
    from minidb.exec.expr import AggCall, walk
    if any(isinstance(n, AggCall) for n in walk(e)):
        raise errors.GroupingError("aggregate functions are not allowed in check constraints")


def _has(node, cls) -> bool:
    import dataclasses
    if isinstance(node, cls):
        return True
    if isinstance(node, (list, tuple)):
        return any(_has(x, cls) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return any(_has(getattr(node, f.name), cls) for f in dataclasses.fields(node))
    return False


def _columns_named(text: str, columns) -> list:
    from minidb.sql.parser.translate import parse_expression_text
    node = parse_expression_text(text)
    found = []

    def visit(n):
        import dataclasses
        if isinstance(n, ast.Name) and n.parts[-1] in columns and n.parts[-1] not in found:
            found.append(n.parts[-1])
        elif isinstance(n, (list, tuple)):
            for x in n:
                visit(x)
        elif dataclasses.is_dataclass(n) and not isinstance(n, type):
            for f in dataclasses.fields(n):
                visit(getattr(n, f.name))
    visit(node)
    return found


def _name_for(tname: str, text: str, column: str | None, columns, taken: set) -> str:
    if column is None:
        cols = _columns_named(text, columns)
        column = cols[0] if len(cols) == 1 else None
    base = f"{tname}_{column}_check" if column else f"{tname}_check"
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}{k}"
    return name


def create_table_checks(engine, st) -> None:
    """After CREATE TABLE made the table: its column and table CHECKs."""
    todo = [(n, text, c.name) for c in st.columns for n, text in c.checks]
    todo += [(n, text, None) for n, text in st.checks]
    if not todo:
        return
    catalog = engine.session.backend.catalog
    columns = [c.name for c in st.columns]
    taken: set = set(catalog.indexes)
    out = []
    for name, text, col in todo:
        _validate(catalog, st.name, text)
        if name is None:
            name = _name_for(st.name, text, col, columns, taken)
        elif name in taken and name in {n for n, _ in out}:
            raise errors.ProgrammingError(
                f'constraint "{name}" for relation "{st.name}" already exists',
                sqlstate="42710")
        taken.add(name)
        out.append((name, text))
    catalog.run_change(catcons.add_checks, st.name, out)


def add_check(engine, tname: str, act, msgs) -> str:
    """ALTER TABLE ... ADD [CONSTRAINT n] CHECK (expr): validated against every row."""
    catalog = engine.session.backend.catalog
    t = catalog.table(tname)
    _validate(catalog, tname, act.expr)
    taken = {c.name for c in t.checks} | set(catalog.indexes)
    name = act.name
    if name is None:
        name = _name_for(tname, act.expr, None, [c.name for c in t.columns], taken)
    elif name in taken:
        raise errors.ProgrammingError(
            f'constraint "{name}" for relation "{tname}" already exists', sqlstate="42710")
    if _violated(engine, tname, act.expr):
        raise errors.CheckViolation(
            f'check constraint "{name}" of relation "{tname}" is violated by some row')
    catalog.run_change(catcons.add_checks, tname, [(name, act.expr)])
    return tname


def _violated(engine, tname: str, text: str) -> bool:
    """Whether some row of ``tname`` this transaction sees fails ``text``."""
    from minidb.exec.nodes import ExecContext
    from minidb.sql.binder import Binder
    from minidb.sql.parser.translate import parse_expression_text
    from minidb.sql.planner import Planner
    session = engine.session
    catalog = session.backend.catalog
    q = ast.SelectStmt(targets=[(ast.Lit(1, "int"), None)], from_=[ast.TableRef(tname)],
                       where=ast.UnOp("not", ast.FuncE("coalesce", (
                           parse_expression_text(text), ast.Lit(True, "bool")))),
                       limit=ast.Lit(1, "int"))
    bound = Binder(catalog, (), default_parser=parse_expression_text).bind(q)
    plan = Planner(catalog, session.settings, engine.instance.smgr).plan(bound)
    xact = session.xact
    snap = xact.procarray.get_snapshot(session.backend.slot, xact.xid, xact.cid)
    ectx = ExecContext(session, snap, [])
    it = plan.root.run(ectx)
    try:
        for chunk in it:
            if chunk.n:
                return True
    finally:
        it.close()
    return False


def drop_check(engine, tname: str, cname: str) -> bool:
    """DROP CONSTRAINT of a CHECK: True if ``cname`` was one of ``tname``'s."""
    catalog = engine.session.backend.catalog
    t = catalog.table(tname)
    if not any(c.name == cname for c in t.checks):
        return False
    catalog.run_change(catcons.drop_check, tname, cname)
    return True
