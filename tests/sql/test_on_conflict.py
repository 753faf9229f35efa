"""INSERT ... ON CONFLICT (minidb.sql.onconflict, minidb.exec.onconflict): errors, a
hypothesis run against a dict model, and two sessions inserting the same key."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minidb.errors as errors
from minidb.catalog import check_catalog
from minidb.heap.check import check_heap
from minidb.index import check_btree
from tests.txn.txn_steps import Step, wait_blocked


@pytest.fixture
def t(db):
    db.x("CREATE TABLE t (k int PRIMARY KEY, v int, u int UNIQUE)")
    db.x("INSERT INTO t VALUES (1, 10, 100), (2, 20, 200)")
    return db


def test_do_nothing(t):
    assert t.x("INSERT INTO t VALUES (1, 11, 101) ON CONFLICT DO NOTHING").rowcount == 0
    r = t.x("INSERT INTO t VALUES (3, 30, 300), (1, 0, 0), (3, 31, 301) "
            "ON CONFLICT (k) DO NOTHING RETURNING *")
    assert r.rows == [(3, 30, 300)] and r.status == "INSERT 0 1"
    # a conflict in a unique index that is not the arbiter is an error
    with pytest.raises(errors.UniqueViolation, match="t_u_key"):
        t.x("INSERT INTO t VALUES (5, 5, 100) ON CONFLICT (k) DO NOTHING")
    assert t.x("INSERT INTO t VALUES (5, 5, 100) ON CONFLICT ON CONSTRAINT t_u_key "
               "DO NOTHING").rowcount == 0
    assert t.rows("SELECT * FROM t ORDER BY k") == [(1, 10, 100), (2, 20, 200), (3, 30, 300)]


def test_do_update(t):
    r = t.x("INSERT INTO t VALUES (1, 11, 101) ON CONFLICT (k) "
            "DO UPDATE SET v = excluded.v + t.v RETURNING *")
    assert r.rows == [(1, 21, 100)] and r.status == "INSERT 0 1"
    r = t.x("INSERT INTO t VALUES (1, 0, 0) ON CONFLICT (k) DO UPDATE SET v = excluded.v "
            "WHERE t.v > 1000 RETURNING *")
    assert r.rows == [] and r.rowcount == 0
    r = t.x("INSERT INTO t VALUES (9, 1, 200) ON CONFLICT (u) DO UPDATE SET v = 77 "
            "RETURNING k, v")
    assert r.rows == [(2, 77)]
    assert t.rows("INSERT INTO t VALUES (?, ?, ?) ON CONFLICT (k) DO UPDATE "
                  "SET v = excluded.v RETURNING v", 2, 99, 9) == [(99,)]
    # an update that moves the key (a non-HOT update: new index entries)
    t.x("INSERT INTO t VALUES (1, 0, 0) ON CONFLICT (k) DO UPDATE SET k = 50")
    assert t.rows("SELECT * FROM t ORDER BY k") == [(2, 99, 200), (50, 21, 100)]
    # a whole table through ON CONFLICT onto itself
    t.x("INSERT INTO t SELECT k, -v, u FROM t ON CONFLICT (k) DO UPDATE SET v = excluded.v")
    assert t.rows("SELECT k, v FROM t ORDER BY k") == [(2, -99), (50, -21)]


def test_errors(t):
    with pytest.raises(errors.CardinalityViolation) as e:
        t.x("INSERT INTO t VALUES (1, 5, 102), (1, 6, 103) ON CONFLICT (k) "
            "DO UPDATE SET v = excluded.v")
    assert e.value.sqlstate == "21000"
    with pytest.raises(errors.ProgrammingError) as e:
        t.x("INSERT INTO t VALUES (6, 6, 6) ON CONFLICT (v) DO NOTHING")
    assert e.value.sqlstate == "42P10"
    with pytest.raises(errors.SyntaxError_):
        t.x("INSERT INTO t VALUES (6, 6, 6) ON CONFLICT DO UPDATE SET v = 1")
    with pytest.raises(errors.AmbiguousColumn):
        t.x("INSERT INTO t VALUES (6, 6, 6) ON CONFLICT (k) DO UPDATE SET v = v + 1")
    with pytest.raises(errors.UndefinedObject):
        t.x("INSERT INTO t VALUES (6, 6, 6) ON CONFLICT ON CONSTRAINT nope DO NOTHING")
    assert t.rows("SELECT * FROM t ORDER BY k") == [(1, 10, 100), (2, 20, 200)]


def test_serial_with_on_conflict(db):
    db.x("CREATE TABLE s (id serial PRIMARY KEY, name text UNIQUE, n int DEFAULT 1)")
    for name in ["a", "b", "a", "c", "a"]:
        db.x("INSERT INTO s (name) VALUES (?) ON CONFLICT (name) "
             "DO UPDATE SET n = s.n + 1", name)
    # every attempt drew a value (PostgreSQL does too: nextval is not given back)
    assert db.rows("SELECT id, name, n FROM s ORDER BY id") == [(1, "a", 3), (2, "b", 1),
                                                                (4, "c", 1)]


_ops = st.lists(st.tuples(st.sampled_from(["nothing", "update", "update_where"]),
                          st.lists(st.tuples(st.integers(0, 6), st.integers(-5, 5)),
                                   min_size=1, max_size=5)),
                min_size=1, max_size=8)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_against_a_dict_model(db, ops):
    db.x("DROP TABLE IF EXISTS m")
    db.x("CREATE TABLE m (k int PRIMARY KEY, v int)")
    model: dict[int, int] = {}
    for action, rows in ops:
        values = ", ".join(f"({k}, {v})" for k, v in rows)
        sql = f"INSERT INTO m VALUES {values} ON CONFLICT (k) "
        if action == "nothing":
            sql += "DO NOTHING"
        elif action == "update":
            sql += "DO UPDATE SET v = m.v + excluded.v"
        else:
            sql += "DO UPDATE SET v = excluded.v WHERE m.v < excluded.v"
        expect = dict(model)
        affected = 0
        touched = set()      # inserted or updated by this statement
        twice = False
        for k, v in rows:
            if k not in expect:
                expect[k] = v
            elif action == "nothing":
                continue
            elif k in touched:
                twice = True     # 21000: the statement fails as a whole
                break
            elif action == "update":
                expect[k] += v
            elif action == "update_where" and expect[k] < v:
                expect[k] = v
            else:
                continue
            touched.add(k)
            affected += 1
        if twice:
            with pytest.raises(errors.CardinalityViolation):
                db.x(sql)
            continue
        assert db.x(sql).rowcount == affected
        model = expect
    assert dict(db.rows("SELECT k, v FROM m")) == model
    with db.inst.connect() as b:
        check_heap(b, db.inst.catalog.heap_rel("m"))
        check_btree(b, "m_pkey")


@pytest.mark.parametrize("action", ["DO NOTHING", "DO UPDATE SET v = t.v + excluded.v"])
@pytest.mark.parametrize("first_commits", [True, False])
def test_two_sessions_insert_the_same_key(db, db2, action, first_commits):
    db.x("CREATE TABLE t (k int PRIMARY KEY, v int)")
    db.x("BEGIN")
    db.x("INSERT INTO t VALUES (1, 10) ON CONFLICT (k) DO NOTHING")
    xid = db.session.xact.xid
    step = Step(lambda: db2.x(f"INSERT INTO t VALUES (1, 5) ON CONFLICT (k) {action}"))
    wait_blocked(db.inst, db2.session, step, xid)   # the second waits for the first
    db.x("COMMIT" if first_commits else "ROLLBACK")
    res = step.join()
    rows = db.rows("SELECT k, v FROM t")
    if not first_commits:
        assert res.rowcount == 1 and rows == [(1, 5)]     # no conflict after all
    elif action == "DO NOTHING":
        assert res.rowcount == 0 and rows == [(1, 10)]
    else:
        assert res.rowcount == 1 and rows == [(1, 15)]
    with db.inst.connect() as b:
        assert check_catalog(b) == []
        check_heap(b, db.inst.catalog.heap_rel("t"))
        check_btree(b, "t_pkey")


def test_killed_speculative_row_is_dead_to_everyone(db, db2):
    """The race the pre-check cannot see: the key arrives after it.  Simulated by a
    pre-check that finds nothing, so the insert meets the committed row in the index:
    the speculative heap row is killed (dead for every snapshot and for VACUUM) and the
    row starts over, this time finding the conflict."""
    import minidb.exec.indexam as oc
    db.x("CREATE TABLE t (k int PRIMARY KEY, v int)")
    db2.x("INSERT INTO t VALUES (1, 10)")
    real = oc.find_conflict
    calls = []

    def first_blind(backend, index, row):
        calls.append(index)
        return None if len(calls) == 1 else real(backend, index, row)

    oc.find_conflict = first_blind
    try:
        r = db.x("INSERT INTO t VALUES (1, 5) ON CONFLICT (k) DO UPDATE SET v = 99")
    finally:
        oc.find_conflict = real
    assert r.rowcount == 1 and len(calls) == 2
    assert db2.rows("SELECT k, v FROM t") == [(1, 99)]
    db.x("VACUUM t")
    with db.inst.connect() as b:
        check_heap(b, db.inst.catalog.heap_rel("t"))
        check_btree(b, "t_pkey")
