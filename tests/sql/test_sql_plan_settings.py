"""The settings a cached plan depends on: ``minidb.config.PLAN_SETTINGS`` (the settings
marked ``plan=True``) is exactly what planning reads, and SETting any of them replans.

The set is derived, never listed here, so a planner knob added later is covered as soon
as it is marked - and ``test_planning_reads_exactly_the_plan_settings`` fails until it is.
"""

from __future__ import annotations

import pytest

from minidb import config
from minidb.config import SETTINGS
from minidb.exec.gather import FinalizeAggNode
from minidb.sql.binder import Binder
from minidb.sql.parser import parse
from minidb.sql.parser.translate import parse_expression_text
from minidb.sql.planner import Planner


def _plans_made(db, q) -> int:
    p0 = db.engine.counters["plans"]
    db.rows(q)
    return db.engine.counters["plans"] - p0


def _cached_plan(db, q):
    """The plan the engine would run for ``q`` now (from its cache when still valid)."""
    return db.engine.plan_for(db.engine.prepare(q)._entry, [])


def _other_value(s: config.Setting, current):
    """A valid value of setting ``s`` different from ``current``."""
    if s.type is bool:
        return not current
    if s.choices is not None:
        return next(c for c in s.choices if c != current)
    if s.type is str:                   # timezone: any name zoneinfo knows
        return "Europe/Paris" if current != "Europe/Paris" else "UTC"
    up = current * 2 + 1
    if s.max is not None and up > s.max:
        up = current - 1 if s.type is int else current / 2
    return s.type(up)


def _literal(v) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return f"'{v}'" if isinstance(v, str) else repr(v)


def test_plan_settings_are_derived_from_config():
    assert config.PLAN_SETTINGS == tuple(n for n, s in SETTINGS.items() if s.plan)
    assert {"parallel_setup_cost", "parallel_tuple_cost", "enable_seqscan"} <= set(
        config.PLAN_SETTINGS)
    assert all(SETTINGS[n].context == "session" for n in config.PLAN_SETTINGS)


@pytest.mark.parametrize("name", config.PLAN_SETTINGS)
def test_setting_every_plan_setting_replans(db, name):
    db.x("CREATE TABLE t (a int PRIMARY KEY, b int)")
    db.x("INSERT INTO t VALUES (1, 2)")
    q = "SELECT count(*) FROM t WHERE a > 0"
    assert _plans_made(db, q) == 1
    assert _plans_made(db, q) == 0
    current = db.session.settings.get(name)
    new = _other_value(SETTINGS[name], current)
    assert new != current
    db.x(f"SET {name} = {_literal(new)}")
    assert db.session.settings.get(name) == new
    r0 = db.engine.counters["replans"]
    assert _plans_made(db, q) == 1, f"SET {name} did not replan the cached statement"
    assert db.engine.counters["replans"] == r0 + 1
    assert _plans_made(db, q) == 0
    db.x(f"RESET {name}")
    assert _plans_made(db, q) == 1


class _Recorder:
    """A settings object that notes every setting read through it."""

    def __init__(self, settings):
        self._settings = settings
        self.read: set = set()

    def __getattr__(self, name):
        self.read.add(name)
        return getattr(self._settings, name)

    def get(self, name):
        self.read.add(name)
        return self._settings.get(name)


PLANNED = [
    "SELECT b FROM t WHERE a = 5",
    "SELECT b FROM t WHERE b < 10 ORDER BY a LIMIT 3",
    "SELECT count(*), sum(b) FROM t",
    "SELECT t.a, u.y FROM t JOIN u ON t.a = u.x WHERE u.y > 3",
    "SELECT t.a FROM t, u WHERE t.b < u.y",
    "SELECT DISTINCT b FROM t ORDER BY b",
    "SELECT 1 WHERE 1 = 1",
    "INSERT INTO u VALUES (1, 2)",
    "UPDATE t SET b = b + 1 WHERE a = 3",
    "DELETE FROM u WHERE y = 4",
]


def test_planning_reads_exactly_the_plan_settings(db):
    """Plans a spread of statements (every access path, joins, a parallel aggregate, stale
    statistics) through a recording settings object: every setting read must be marked
    ``plan=True`` (else a cached plan would outlive a SET of it), and every marked setting
    is read by some plan (no mark is stale)."""
    db.x("CREATE TABLE t (a int PRIMARY KEY, b int)")
    db.x("CREATE TABLE u (x int, y int)")
    db.x("CREATE INDEX u_x ON u (x)")
    db.x("INSERT INTO t SELECT 1, 1")
    for k in range(8):
        db.x(f"INSERT INTO t SELECT a + {1 << k}, b + 1 FROM t")
    db.x("INSERT INTO u SELECT a, b FROM t")
    db.x("ANALYZE")
    catalog = db.inst.catalog
    read: set = set()
    for overrides in ({}, {"min_parallel_table_scan_size": 0, "parallel_setup_cost": 0,
                           "planner_trusts_stale_stats": True}):
        settings = db.session.settings.copy()
        for n, v in overrides.items():
            settings.set(n, v)
        for q in PLANNED:
            rec = _Recorder(settings)
            catalog.refresh()
            bound = Binder(catalog, (), default_parser=parse_expression_text).bind(parse(q))
            Planner(catalog, rec, db.inst.smgr).plan(bound)
            read |= rec.read
    unmarked = read - set(config.PLAN_SETTINGS)
    assert not unmarked, f"planning reads settings not marked plan=True: {sorted(unmarked)}"
    unread = set(config.PLAN_SETTINGS) - read
    assert not unread, f"settings marked plan=True that no plan read: {sorted(unread)}"


def test_cached_plan_follows_parallel_costs(db):
    """The bug: the parallel costs were missing from the cache key, so after
    ``SET parallel_setup_cost = 0`` EXPLAIN showed the Gather plan while the cached plan of
    the same SELECT kept running the serial aggregate (and the same for
    ``parallel_tuple_cost``)."""
    db.x("SET min_parallel_table_scan_size = 1")
    db.x("CREATE TABLE t (a int, b int)")
    db.x("INSERT INTO t SELECT 1, 1")
    for k in range(12):                                  # 4096 rows, several pages
        db.x(f"INSERT INTO t SELECT a + {1 << k}, b FROM t")
    q = "SELECT count(*), sum(a) FROM t"
    assert db.rows(q) == [(4096, 4096 * 4097 // 2)]
    assert "Gather" not in db.plan(q)                    # setup cost 1000: serial is cheaper
    assert not isinstance(_cached_plan(db, q).root.children[0], FinalizeAggNode)

    db.x("SET parallel_setup_cost = 0")
    assert "Gather" in db.plan(q)
    replans = db.engine.counters["replans"]
    assert isinstance(_cached_plan(db, q).root.children[0], FinalizeAggNode)
    assert db.engine.counters["replans"] == replans + 1

    db.x("SET parallel_tuple_cost = 1e6")               # passing rows up costs too much
    assert "Gather" not in db.plan(q)
    assert not isinstance(_cached_plan(db, q).root.children[0], FinalizeAggNode)
    db.x("SET parallel_tuple_cost = 0")
    assert "Gather" in db.plan(q)
    assert isinstance(_cached_plan(db, q).root.children[0], FinalizeAggNode)
    assert db.rows(q) == [(4096, 4096 * 4097 // 2)]     # the Gather plan runs, same answer
