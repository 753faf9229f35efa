"""The SQL engine of one session: text in, ``Result`` out (PostgreSQL's postgres.c and
utility.c, small).

``Engine(session).execute(sql, params)`` runs exactly one statement:

  1. **plan cache** - statements are kept by their SQL text (an LRU of
     ``PLAN_CACHE_SIZE``): a repeated text is not parsed again, and a repeated text with
     parameters of the same Python types is not planned again either.  A cached plan is
     re-planned when the catalog changed since (any DDL, ANALYZE or VACUUM bumps its
     generation), when a setting a plan depends on changed (``minidb.config.PLAN_SETTINGS``, the
     settings marked ``plan=True``), or
     when a table it reads has grown or shrunk by more than half (its row estimates, and so
     the plan's choices, were made for another size; looked at every ``SIZE_CHECK_EVERY``
     uses).  ``prepare(sql)`` returns a handle
     that skips even the cache lookup.  A text without parameters whose literals can be
     parameters (``minidb.sql.normalize``: the simple protocol's texts) is looked up by its
     normalized shape and runs that shape's statement with the literals as parameters;
     a new shape is parsed and bound once and kept if its parameters get the types its
     literals had, else the text is parsed as it is;
  2. **parse** (``minidb.sql.parser``) -> **bind** (``binder``) -> **lock** (``locking``:
     the statement's relation locks, taken inside the transaction after binding and
     before planning, since the planner opens the relations' files; a cached plan's are
     taken before its validity is checked) -> **plan** (``planner``);
  3. **execute** under the transaction rules of ``minidb.session``: a statement outside a
     BEGIN block is its own transaction, committed when it ends; inside a block, an error
     fails the block (every later statement gets 25P02 until ROLLBACK).  Any error - a
     syntax error included, as in PostgreSQL - leaves the database as it was: the
     statement's writes belong to a transaction that is rolled back.  A cached plan of a
     point statement (a lookup, UPDATE or DELETE by an index equality, a one-row INSERT
     ... VALUES) runs as the closure ``minidb.exec.point.compile_point`` made of it once
     (kept on the plan, so it goes with the plan; ``enable_fast_path`` off: the plan
     nodes), inside the same statement bracket.

Utility statements (transaction control, SET / SHOW / RESET, VACUUM, ANALYZE, COPY,
CHECKPOINT) and DDL (``commands``) run here too.  DDL is transactional, as in PostgreSQL:
the catalog is heap tables (``minidb.catalog``), so a ROLLBACK undoes CREATE, DROP,
TRUNCATE and CREATE / DROP INDEX; and every statement takes PostgreSQL's relation locks
(``minidb.sql.locking``), so DROP and TRUNCATE wait for the transactions that use the table.

Every error raised is a ``minidb.errors`` class; an unexpected Python exception is wrapped
in InternalError (its traceback chained).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Sequence

import minidb.errors as errors
from minidb.types import session_timezone, set_timezone
from minidb.exec.chunk import chunk_to_rows
from minidb.exec.datatypes import type_name
from minidb.exec.nodes import ExecContext
from minidb.exec.point import compile_point
from minidb.sql import ast
from minidb.sql.binder import Binder
from minidb.sql.explain import explain_json, explain_lines
from minidb.sql.locking import statement_lock_reqs
from minidb.sql.indexpred import has_partial_index
from minidb.sql.normalize import normalize, param_type_ok
from minidb.sql.parser import parse, parse_script
from minidb.sql.parser.lexer import split_statements as _split
from minidb.sql.parser.translate import parse_expression_text
from minidb.sql.planner import Planner
from minidb.sql.result import Result
from minidb.txn.xact import FAILED, IDLE

__all__ = ["Engine", "Prepared"]

PLAN_CACHE_SIZE = 256
_BULK_VALUES_MIN_CHARS = 256  # shorter INSERTs are not worth the many-row VALUES check
SIZE_CHECK_EVERY = 16
_UNSET = object()
_DML = (ast.SelectStmt, ast.SetOpStmt, ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt)


class _Entry:
    """A cached statement: its parse, and its plans by parameter types."""
    __slots__ = ("sql", "stmt", "plans", "dml", "ends_failed")

    def __init__(self, sql, stmt):
        self.sql = sql
        self.stmt = stmt
        self.plans: dict = {}     # param type signature -> (Plan, catalog gen, settings sig)
        # what _run asks of every execution, decided once
        self.dml = isinstance(stmt, _DML)
        self.ends_failed = isinstance(stmt, (ast.CommitStmt, ast.RollbackStmt,
                                             ast.RollbackToStmt))


class Prepared:
    """A statement parsed once; ``execute(params)`` plans it on first use (and again only
    when the plan cache's rules say so)."""

    def __init__(self, engine: "Engine", entry: _Entry):
        self.engine = engine
        self._entry = entry

    @property
    def sql(self) -> str:
        return self._entry.sql

    @property
    def nparams(self) -> int:
        return self._entry.stmt.nparams

    def execute(self, params: Sequence | None = None) -> Result:
        return self.engine._run(self._entry, list(params) if params is not None else [])


class Engine:
    """SQL for one ``minidb.session.Session``."""

    def __init__(self, session):
        self.session = session
        self.instance = session.instance
        self.copy_stream = None  # COPY FROM STDIN / TO STDOUT's text stream (minidb.sql.copy)
        self._cache: OrderedDict = OrderedDict()
        # normalized text + literal classes -> _Entry, or the catalog version in which
        # the shape was found not parameterizable (minidb.sql.normalize)
        self._shapes: OrderedDict = OrderedDict()
        self._ssig = (None, -1, ())   # (settings object, its .changes, plan signature)
        self._tzname = self._tz = None  # the TimeZone setting last set, and its zone
        self.counters = {"parses": 0, "plans": 0, "plan_cache_hits": 0, "replans": 0,
                         "statements": 0, "fast_path": 0, "parameterized": 0}

    # -- public interface ----------------------------------------------------------------------
    @staticmethod
    def split_statements(text: str) -> tuple[list[str], str]:
        return _split(text)

    def execute(self, sql: str, params: Sequence | None = None) -> Result:
        if not isinstance(sql, str):
            raise errors.ProgrammingError(f"SQL must be a str, not {type(sql).__name__}")
        entry = self._cache.get(sql)
        if entry is None:
            if len(sql) >= _BULK_VALUES_MIN_CHARS and sql.lstrip()[:6].lower() == "insert":
                from minidb.sql import bulkload   # many-row literal VALUES: no generic parse
                result = self._bulk(lambda: bulkload.try_values(self, sql))
                if result is not None:
                    return result
            if not params:
                shape = self._shape(sql)     # literals as parameters (simple protocol)
                if shape is not None:
                    return self._run(shape[0], shape[1])
            try:
                entry = self._parse_entry(sql)
            except BaseException as e:
                self._fail_block()
                raise _as_minidb_error(e) from (None if isinstance(e, errors.Error) else e)
        else:
            self._cache.move_to_end(sql)
        return self._run(entry, list(params) if params is not None else [])

    def executemany(self, sql: str, seq_of_params) -> Result | None:
        """An ``INSERT ... VALUES (?, ...)`` for every parameter tuple of the list
        ``seq_of_params``, as one bulk statement (``minidb.sql.bulkload.executemany``);
        None when the statement or its rows need one execution per row (the caller's loop:
        nothing has been done then)."""
        from minidb.sql import bulkload
        return self._bulk(lambda: bulkload.executemany(self, sql, seq_of_params))

    def _bulk(self, fn):
        """``fn()`` (a bulk load, or None to decline) under ``_run``'s rules: interrupts,
        the failed-block check (declined: the general path raises it), an error fails the
        block and is a minidb error."""
        if self.session.xact.state == FAILED:
            return None
        self.session.instance.check_interrupts()
        try:
            result = fn()
        except BaseException as e:
            self._fail_block()
            if isinstance(e, errors.Error) or isinstance(
                    e, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                raise
            raise _as_minidb_error(e) from e
        if result is not None:
            self.counters["statements"] += 1
        return result

    def prepare(self, sql: str) -> Prepared:
        entry = self._cache.get(sql)
        if entry is None:
            try:
                entry = self._parse_entry(sql)
            except BaseException as e:
                self._fail_block()
                raise _as_minidb_error(e) from (None if isinstance(e, errors.Error) else e)
        return Prepared(self, entry)

    def describe(self, prepared: Prepared) -> tuple[dict, list | None, list | None]:
        """(parameter type names by index, output column names, output type names) of a
        prepared statement, for the protocol's Describe: a query is planned now (cached as
        ``execute`` would) with every parameter untyped, so each takes the type its context
        gives, as PostgreSQL infers ``$n``; names and types are None for a statement that
        returns no rows."""
        entry = prepared._entry
        stmt = entry.stmt
        if isinstance(stmt, ast.ExplainStmt):
            return {}, ["QUERY PLAN"], ["text"]
        if not isinstance(stmt, _DML):
            return {}, None, None
        params = [""] * stmt.nparams
        try:
            plan = self._statement(lambda snap: (self.plan_for(entry, params), False))
        except BaseException as e:
            self._fail_block()
            raise _as_minidb_error(e) from (None if isinstance(e, errors.Error) else e)
        ptypes = {i: type_name(t) for i, t in plan.param_types.items()}
        if plan.kind != "select" and not plan.names:   # (RETURNING has names)
            return ptypes, None, None
        return ptypes, list(plan.names), [type_name(t) for t in plan.types]

    def execute_script(self, sql: str) -> list[Result]:
        """Every statement of ``sql`` in order; stops at the first error (raised)."""
        out = []
        for text, stmt in parse_script(sql):
            if isinstance(stmt, Exception):
                self._fail_block()
                raise stmt
            out.append(self._run(_Entry(text, stmt), []))
        return out

    def plan_cache_stats(self) -> dict:
        shapes = sum(1 for e in self._shapes.values() if type(e) is _Entry)
        return dict(self.counters, cached_statements=len(self._cache) + shapes)

    # -- simple parameterization (minidb.sql.normalize) ------------------------------------------
    def _shape(self, sql: str):
        """(entry, values) when ``sql``'s literals can be parameters of a statement shape
        already parsed (or parsed now and found to mean the same); None: parse ``sql``."""
        if not self.session.settings.enable_fast_path:
            return None
        got = normalize(sql)
        if got is None:
            return None
        key, text, values = got
        shapes = self._shapes
        hit = shapes.get(key)
        if hit is not None:
            if type(hit) is _Entry:
                shapes.move_to_end(key)
                self.counters["parameterized"] += 1
                return hit, values
            if hit == self._catalog_gen():
                return None          # known not to be parameterizable (in this catalog)
        entry = self._new_shape(key, text, values)
        if entry is None:
            shapes[key] = self._catalog_gen()
        else:
            shapes[key] = entry
            self.counters["parameterized"] += 1
        if len(shapes) > PLAN_CACHE_SIZE:
            shapes.popitem(last=False)
        return None if entry is None else (entry, values)

    def _new_shape(self, key: str, text: str, values: list):
        """The parsed shape if binding it gives each parameter a type its literal had."""
        classes = key[key.rindex("\x00") + 1:]
        try:
            stmt = parse(text)
            if not isinstance(stmt, _DML) or stmt.nparams != len(values):
                return None
            sig = tuple(type(v) for v in values)
            bound = Binder(self.session.backend.catalog, sig,
                           default_parser=parse_expression_text).bind(stmt)
        except Exception:        # the text's own parse will report it
            return None
        types = getattr(bound, "param_types", None) or {}
        if not all(param_type_ok(c, types.get(i)) for i, c in enumerate(classes)):
            return None
        if has_partial_index(self.session.backend.catalog, bound):
            return None              # a parameter would prove no index predicate
        self.counters["parses"] += 1
        return _Entry(text, stmt)

    # -- running ---------------------------------------------------------------------------------
    def _parse_entry(self, sql: str) -> _Entry:
        stmt = parse(sql)
        self.counters["parses"] += 1
        entry = _Entry(sql, stmt)
        self._cache[sql] = entry
        if len(self._cache) > PLAN_CACHE_SIZE:
            self._cache.popitem(last=False)
        return entry

    def _fail_block(self) -> None:
        xact = self.session.xact
        if xact.state != IDLE:
            xact.fail()

    def _run(self, entry: _Entry, params: list) -> Result:
        stmt = entry.stmt
        self.counters["statements"] += 1
        session = self.session
        backend = session.backend
        tz = backend.settings.timezone    # casts of timestamptz read it: set for this thread
        if tz != self._tzname or session_timezone() is not self._tz:
            set_timezone(tz)
            self._tzname, self._tz = tz, session_timezone()
        session.instance.check_interrupts(backend)  # 57P01 / 57P02 (minidb.instance)
        xact = backend.xact
        if xact.state == FAILED and not entry.ends_failed:
            raise errors.InFailedSqlTransaction(
                "current transaction is aborted, commands ignored until end of transaction block")
        if len(params) != stmt.nparams:
            self._fail_block()
            raise errors.InvalidParameterCount(
                f"the statement has {stmt.nparams} parameter(s) but {len(params)} were given")
        try:
            if entry.dml:
                return self._dml(entry, params)
            if isinstance(stmt, ast.ExplainStmt):
                return self._explain(stmt, params)
            return _run_utility()(self, stmt)
        except BaseException as e:
            self._fail_block()
            if isinstance(e, errors.Error):
                raise
            if isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                raise
            raise _as_minidb_error(e) from e

    def _settings_sig(self) -> tuple:
        """``Settings.plan_signature()``, recomputed only after a SET (17 lookups are
        ~10 us: a prepared point select's budget is ~100)."""
        settings = self.session.settings
        obj, changes, sig = self._ssig
        if obj is not settings or changes != settings.changes:
            sig = settings.plan_signature()
            self._ssig = (settings, settings.changes, sig)
        return sig

    def _catalog_gen(self):
        """The catalog version this backend sees (its own uncommitted DDL included)."""
        return self.session.backend.catalog.version()

    def plan_for(self, entry: _Entry, params: list):
        """The plan of a DML statement for these parameters' types (cached), with its
        relation locks taken (``minidb.sql.locking``): a cached plan's locks are taken
        before its validity is checked, so a statement that waited for a DROP or
        TRUNCATE to commit plans again against the catalog that committed; a new plan is
        made with its locks held (``_plan``)."""
        # (one parameter, the usual prepared point statement: its 1-tuple directly)
        sig = (type(params[0]),) if len(params) == 1 else tuple(map(type, params))
        backend = self.session.backend
        xact = backend.xact
        if xact.state == IDLE:
            xact.start_implicit()   # the locks belong to the transaction
        got = entry.plans.get(sig)
        if got is not None:
            plan, pgen, pssig, uses = got
            backend.lockmgr.lock_prepared(plan.lock_reqs)
            gen = backend.catalog.version()     # (_catalog_gen)
            settings = backend.settings
            obj, changes, ssig = self._ssig      # (_settings_sig, inline)
            if obj is not settings or changes != settings.changes:
                ssig = self._settings_sig()
            # table sizes are looked at every SIZE_CHECK_EVERY uses (an fstat per table)
            if pgen == gen and pssig == ssig and (uses % SIZE_CHECK_EVERY
                                                  or self._sizes_ok(plan)):
                got[3] = uses + 1
                self.counters["plan_cache_hits"] += 1
                return plan
            self.counters["replans"] += 1
        ssig = self._settings_sig()
        plan, gen = self._plan(entry.stmt, sig)
        entry.plans[sig] = [plan, gen, ssig, 1]
        return plan

    def _sizes_ok(self, plan) -> bool:
        smgr = self.instance.smgr
        for rfn, pages in plan.rel_pages.items():
            try:
                cur = smgr.nblocks(rfn)
            except OSError:
                return False
            a, b = max(cur, 10), max(pages, 10)
            if a > 2 * b or b > 2 * a:
                return False
        return True

    def _plan(self, stmt, sig):
        """Bind ``stmt``, take its relation locks, then plan it: returns (plan, the
        catalog version it was bound against).

        The locks come before the planner, as PostgreSQL takes them during parse
        analysis: the planner opens the relations' files (their sizes), and only the
        locks keep a DROP or TRUNCATE from committing and removing them meanwhile.  A
        binding whose catalog version moved while the locks were taken (a DDL committed
        in between: the names may now mean other relations or files) is made again."""
        catalog = self.session.backend.catalog
        lockmgr = self.session.backend.lockmgr
        self.session.xact.start_implicit()   # the locks belong to the transaction
        for _ in range(100):
            gen = self._catalog_gen()
            bound = Binder(catalog, sig, default_parser=parse_expression_text).bind(stmt)
            reqs = statement_lock_reqs(bound, catalog)
            lockmgr.lock_prepared(reqs)
            if self._catalog_gen() == gen:
                break   # nothing changed while the locks were taken
        else:
            raise errors.InternalError("the catalog keeps changing while a statement is "
                                       "being locked")
        plan = Planner(catalog, self.session.settings, self.instance.smgr).plan(bound)
        plan.lock_reqs = reqs
        self.counters["plans"] += 1
        return plan, gen

    def _statement(self, body):
        """Run ``body(snapshot) -> (result, wrote)`` as one statement (Session's rules)."""
        return self.session.statement(body)

    def _dml(self, entry: _Entry, params: list) -> Result:
        plan = self.plan_for(entry, params)
        session = self.session
        fast = plan.__dict__.get("point", _UNSET)
        if fast is _UNSET:
            # compiled once per plan, so a re-plan drops it with the plan; the setting is
            # a plan setting (a SET makes the next use plan again)
            # (RETURNING and ON CONFLICT: the plan nodes)
            fast = plan.point = (compile_point(plan) if session.settings.enable_fast_path
                                 and (plan.kind == "select" or not plan.names)
                                 and getattr(plan.root, "on_conflict", None) is None
                                 and not getattr(getattr(plan.root, "entry", None), "checks",
                                                 None) and not getattr(plan.root, "joined",
                                                                       False)
                                 else None)       # CHECKs, UPDATE ... FROM: the nodes
        if fast is not None:
            self.counters["fast_path"] += 1
            out = session.statement(fast, params)
            if plan.kind == "select":
                desc = plan.__dict__.get("_description")
                return Result(list(desc) if desc is not None else _description(plan), out,
                              len(out), f"SELECT {len(out)}")
            return Result(None, [], out, f"{_TAGS[plan.kind]} {out}")

        def body(snap):
            ectx = ExecContext(session, snap, params)
            if plan.kind == "select":
                rows = []
                types = plan.types
                it = plan.root.run(ectx)
                try:
                    for chunk in it:
                        rows.extend(chunk_to_rows(chunk, types))
                finally:
                    it.close()
                return rows, ectx.wrote
            if plan.names:   # INSERT / UPDATE / DELETE ... RETURNING
                rows = []
                for chunk in plan.root.run(ectx):
                    rows.extend(chunk_to_rows(chunk, plan.types))
                return (ectx.rows_affected, rows), ectx.rows_affected > 0
            for _ in plan.root.run(ectx):
                pass
            return ectx.rows_affected, ectx.rows_affected > 0

        out = self._statement(body)
        if plan.kind == "select":
            return Result(_description(plan), out, len(out), f"SELECT {len(out)}")
        if plan.names:
            n, rows = out
            return Result(_description(plan), rows, n, f"{_TAGS[plan.kind]} {n}")
        return Result(None, [], out, f"{_TAGS[plan.kind]} {out}")

    def _explain(self, stmt: ast.ExplainStmt, params: list) -> Result:
        t0 = time.perf_counter()
        xact = self.session.xact
        implicit = xact.state == IDLE
        plan, _ = self._plan(stmt.stmt, tuple(type(p) for p in params))   # locks taken
        planning = time.perf_counter() - t0
        lines: list[str]
        if stmt.format == "json":
            return self._explain_json(stmt, params, plan, planning, implicit)
        if not stmt.analyze:
            lines = explain_lines(plan.root, qualify=plan.qualify, costs=stmt.costs)
            if stmt.summary:
                lines.append(f"Planning Time: {planning * 1000:.3f} ms")
            if implicit and xact.state != IDLE and not xact.explicit:
                xact.commit()   # the implicit transaction that held the locks
        else:
            ectx, execution = self._run_analyzed(stmt, params, plan)
            lines = explain_lines(plan.root, qualify=plan.qualify, costs=stmt.costs,
                                  analyze=True, buffers=stmt.buffers, wal=stmt.wal,
                                  timing=stmt.timing,
                                  instr=ectx.instr)
            if stmt.summary is not False:
                lines.append(f"Planning Time: {planning * 1000:.3f} ms")
                lines.append(f"Execution Time: {execution * 1000:.3f} ms")
        return Result([("QUERY PLAN", "text", None, None, None, None, None)],
                      [(ln,) for ln in lines], len(lines), "EXPLAIN")

    def _run_analyzed(self, stmt, params, plan):
        """EXPLAIN ANALYZE's run of the plan: (its ExecContext with the nodes' Instr, seconds)."""
        session = self.session

        def body(snap):
            ectx = ExecContext(session, snap, params, analyze=True, timing=stmt.timing)
            t1 = time.perf_counter()
            it = plan.root.run(ectx)
            try:
                for _ in it:
                    pass
            finally:
                it.close()
            return (ectx, time.perf_counter() - t1), (ectx.rows_affected > 0 or ectx.wrote)

        return self._statement(body)

    def _explain_json(self, stmt, params, plan, planning, implicit) -> Result:
        """EXPLAIN (FORMAT JSON): one row holding the document (``explain.explain_json``)."""
        xact = self.session.xact
        opts = dict(qualify=plan.qualify, costs=stmt.costs)
        if not stmt.analyze:
            doc = explain_json(plan.root, planning=planning if stmt.summary else None, **opts)
            if implicit and xact.state != IDLE and not xact.explicit:
                xact.commit()
        else:
            ectx, execution = self._run_analyzed(stmt, params, plan)
            summary = stmt.summary is not False
            doc = explain_json(plan.root, analyze=True, buffers=stmt.buffers, wal=stmt.wal,
                               timing=stmt.timing, instr=ectx.instr,
                               planning=planning if summary else None,
                               execution=execution if summary else None, **opts)
        return Result([("QUERY PLAN", "json", None, None, None, None, None)],
                      [(doc,)], 1, "EXPLAIN")


_TAGS = {"insert": "INSERT 0", "update": "UPDATE", "delete": "DELETE"}
_UTILITY: list = []


def _run_utility():
    """``minidb.sql.commands.run_utility`` (imported at first use: commands imports this
    module's neighbours; an import statement per BEGIN / END cost ~0.5 us)."""
    if not _UTILITY:
        from minidb.sql import commands
        _UTILITY.append(commands.run_utility)
    return _UTILITY[0]


def _description(plan) -> list:
    """The DB-API description of a SELECT plan's result (made once per plan; each result
    gets its own list)."""
    desc = plan.__dict__.get("_description")
    if desc is None:
        desc = plan._description = [(n, type_name(t), None, None, None, None, None)
                                    for n, t in zip(plan.names, plan.types)]
    return list(desc)


def _as_minidb_error(e: BaseException) -> BaseException:
    if isinstance(e, errors.Error) or not isinstance(e, Exception):
        return e
    if isinstance(e, RecursionError):
        return errors.ProgramLimitExceeded("statement too deeply nested")
    if isinstance(e, MemoryError):
        return errors.InsufficientResources("out of memory")
    return errors.InternalError(f"internal error: {type(e).__name__}: {e}")

