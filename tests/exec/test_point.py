"""The point path (minidb.exec.point) against the plan nodes: the same rows, row counts,
errors and counters, with ``enable_fast_path`` on in one instance and off in another that
runs the same operations (random keys, misses, NULLs, HOT chains, deletes whose index
items get killed, a second connection's uncommitted and committed updates, READ
COMMITTED and REPEATABLE READ, casts in an INSERT under changing time zones,
``CURRENT_TIMESTAMP`` into a timestamp column), and the EvalPlanQual re-check of a keyed
UPDATE that waited for a concurrent one."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from minidb import errors
from minidb.instance import Instance
from minidb.session import Session
from minidb.shmem import C
from minidb.sql import Engine

NKEYS = 24
COUNTED = ("buffers_hit", "buffers_read", "index_heap_fetches", "index_items_killed",
           "index_items_read", "btree_cache_hits", "btree_cache_misses",
           "btree_cache_refreshes", "index_items_deleted", "index_splits")
# the table's pg_stat counters an operation moves (published at its transaction's end)
OP_STATS = ("seq_scan", "idx_scan", "idx_tup_fetch", "n_tup_ins", "n_tup_upd",
            "n_tup_hot_upd", "n_tup_del")
TABLE_STATS = ("idx_scan", "idx_tup_fetch", "n_tup_ins", "n_tup_upd", "n_tup_hot_upd",
               "n_tup_del", "n_live_tup", "n_dead_tup")


class Side:
    """One instance, a session A (under test) and a session B (the other connection)."""

    def __init__(self, path, fast: bool, **settings):
        self.inst = Instance(path, shared_buffers=64)
        self.a = Session(self.inst, enable_fast_path=fast, **settings)
        self.b = Session(self.inst, enable_fast_path=fast, **settings)
        self.ea, self.eb = Engine(self.a), Engine(self.b)
        self.eb.execute("CREATE TABLE t (k integer PRIMARY KEY, v integer, s text, "
                        "big bigint, ts timestamp, mt timestamp)")
        for k in range(0, NKEYS, 2):          # odd keys are misses until inserted
            self.eb.execute("INSERT INTO t VALUES (?, ?, ?, ?)",
                            [k, None if k % 6 == 0 else k * 10, f"r{k}", k * 1000])
        self.oid = self.a.backend.catalog.table("t").oid
        self.prep = {
            "select": self.ea.prepare("SELECT v, s, big FROM t WHERE k = ?"),
            "update": self.ea.prepare("UPDATE t SET v = v + ? WHERE k = ?"),
            "delete": self.ea.prepare("DELETE FROM t WHERE k = ?"),
            "insert": self.ea.prepare("INSERT INTO t (k, v, s) VALUES (?, ?, ?)"),
            # integer -> bigint, timestamptz -> timestamp in the session's TimeZone
            "insert_cast": self.ea.prepare(
                "INSERT INTO t (k, v, s, big, ts) VALUES (?, ?, ?, CAST(? AS integer), "
                "TIMESTAMPTZ '2026-06-01 12:00:00+05')"),
            # TPC-B's history row: now()::timestamp
            "insert_now": self.ea.prepare(
                "INSERT INTO t (k, s, mt) VALUES (?, ?, CURRENT_TIMESTAMP)"),
            "select_ts": self.ea.prepare("SELECT k, ts FROM t WHERE k = ?"),
        }

    def counters(self):
        """A's buffer and index counters, and what its ended transactions published (and
        the current one counted so far) of the table's statistics."""
        s = self.a.backend.bufmgr.stats
        stats = self.a.table_stats("t")
        pending = self.a.backend.pgstat.pending.get(self.oid, {})
        return (tuple(int(s[C[n]]) for n in COUNTED)
                + tuple(stats[n] + pending.get(n.replace("n_tup_", ""), 0)
                        for n in OP_STATS))

    def op(self, o):
        """Run one operation; (what it returned, A's counter deltas)."""
        before = self.counters()
        kind = o[0]
        try:
            if kind == "select":
                r = self.prep["select"].execute([o[1]]).rows
            elif kind == "select_simple":
                r = self.ea.execute(f"SELECT v, s FROM t WHERE k = {o[1]}").rows
            elif kind == "update":
                r = self.prep["update"].execute([o[2], o[1]]).rowcount
            elif kind == "update_simple":
                r = self.ea.execute(f"UPDATE t SET v = v + {o[2]} WHERE k = {o[1]}").rowcount
            elif kind == "delete":
                r = self.prep["delete"].execute([o[1]]).rowcount
            elif kind == "insert":
                r = self.prep["insert"].execute([o[1], o[2], f"n{o[1]}"]).rowcount
            elif kind == "insert_cast":
                r = self.prep["insert_cast"].execute([o[1], o[2], f"c{o[1]}",
                                                      o[2]]).rowcount
            elif kind == "insert_now":
                # the inserted mtime is the general path's LOCALTIMESTAMP of the transaction
                own = not self.a.xact.in_block
                if own:
                    self.ea.execute("BEGIN")
                n = self.prep["insert_now"].execute([o[1], f"h{o[1]}"]).rowcount
                same = self.ea.execute("SELECT k FROM t WHERE k = ? AND mt = LOCALTIMESTAMP",
                                       [o[1]]).rows
                if own:
                    self.ea.execute("COMMIT")
                r = (n, same)
            elif kind == "select_ts":
                r = self.prep["select_ts"].execute([o[1]]).rows
            elif kind == "a_tz":
                r = self.ea.execute(f"SET TimeZone = '{o[1]}'").status
            elif kind == "b_update":     # B changes a row and keeps it uncommitted
                self.eb.execute("BEGIN")
                r = self.eb.execute("UPDATE t SET v = 7 WHERE k = ?", [o[1]]).rowcount
            elif kind == "b_end":
                r = self.eb.execute("COMMIT" if o[1] else "ROLLBACK").status
            elif kind == "a_begin":
                r = self.ea.execute("BEGIN ISOLATION LEVEL " + o[1]).status
            elif kind == "a_end":
                r = self.ea.execute("COMMIT").status
            else:
                raise AssertionError(kind)
        except errors.Error as e:
            r = ("error", e.sqlstate)
            if self.a.xact.in_block:
                self.ea.execute("ROLLBACK")
        after = self.counters()
        return r, tuple(x - y for x, y in zip(after, before))

    def finish(self):
        for e in (self.eb, self.ea):
            if e.session.xact.in_block:
                e.execute("ROLLBACK")
        rows = self.ea.execute("SELECT k, v, s, big, ts, mt IS NULL FROM t ORDER BY k").rows
        stats = self.a.table_stats("t")
        fast_used = self.ea.counters["fast_path"]
        self.a.close()
        self.b.close()
        self.inst.close()
        return rows, {k: stats.get(k) for k in TABLE_STATS}, fast_used


key = st.integers(min_value=-1, max_value=NKEYS + 1)
delta = st.integers(min_value=-50, max_value=50)
ops = st.lists(st.one_of(
    st.tuples(st.just("select"), key),
    st.tuples(st.just("select_simple"), key),
    st.tuples(st.just("update"), key, delta),
    st.tuples(st.just("update_simple"), key, delta),
    st.tuples(st.just("delete"), key),
    st.tuples(st.just("insert"), key, st.one_of(st.none(), delta)),
    st.tuples(st.just("insert_cast"), key, st.one_of(st.none(), delta)),
    st.tuples(st.just("insert_now"), key),
    st.tuples(st.just("select_ts"), key),
    st.tuples(st.just("a_tz"), st.sampled_from(["UTC", "Asia/Kolkata", "America/New_York"])),
    st.tuples(st.just("b_update"), key),
    st.tuples(st.just("b_end"), st.booleans()),
    st.tuples(st.just("a_begin"), st.sampled_from(["READ COMMITTED", "REPEATABLE READ"])),
    st.tuples(st.just("a_end")),
), min_size=1, max_size=30)


def _sanitize(seq):
    """Drop what would block the single test thread: B's second BEGIN, and A's writes to a
    row B holds (those are tested with a thread below)."""
    out, b_open, held = [], False, set()
    for o in seq:
        if o[0] == "b_update":
            if b_open:
                continue
            b_open, held = True, {o[1]}
        elif o[0] == "b_end":
            if not b_open:
                continue
            b_open, held = False, set()
        elif o[0] in ("update", "update_simple", "delete", "insert", "insert_cast",
                      "insert_now") and o[1] in held:
            continue
        out.append(o)
    return out


_HYP = dict(deadline=None, phases=[Phase.explicit, Phase.generate],
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@settings(max_examples=6, **_HYP)
@given(seq=ops)
def test_fast_path_agrees_with_the_plan_nodes(tmp_path_factory, seq):
    _compare(tmp_path_factory, seq)


@pytest.mark.long
@settings(max_examples=60, **_HYP)
@given(seq=ops)
def test_fast_path_agrees_with_the_plan_nodes_long(tmp_path_factory, seq):
    _compare(tmp_path_factory, seq)


def _compare(tmp_path_factory, seq):
    seq = _sanitize(seq)
    got = {}
    for fast in (True, False):
        side = Side(tmp_path_factory.mktemp("fast" if fast else "slow") / "data", fast)
        results = [side.op(o) for o in seq]
        got[fast] = (results, *side.finish())
    (r1, rows1, st1, used1), (r0, rows0, st0, used0) = got[True], got[False]
    for o, x, y in zip(seq, r1, r0):
        assert x == y, (o, x, y)
    assert rows1 == rows0
    assert st1 == st0
    assert used0 == 0
    point_ops = sum(1 for o in seq if o[0] in ("select", "update", "delete", "insert",
                                               "select_simple", "update_simple",
                                               "insert_cast", "insert_now", "select_ts"))
    assert used1 >= (1 if point_ops else 0)


@pytest.mark.parametrize("fast", [True, False])
def test_hot_chain_and_killed_items_same_counters(tmp_path, fast):
    """Many updates of one row make a HOT chain (and, when the page is full, non-HOT
    versions with index entries); after they are dead to everyone, a lookup kills the dead
    items on both paths alike."""
    side = Side(tmp_path / "data", fast)
    outs = [side.op(("update", 4, 1)) for _ in range(60)]
    outs += [side.op(("delete", 8)), side.op(("select", 8)), side.op(("select", 8)),
             side.op(("select", 4))]
    rows, stats, used = side.finish()
    assert all(r == 1 for r, _ in outs[:61])
    assert outs[61][0] == [] and outs[62][0] == []
    assert outs[63][0] == [(40 + 60, "r4", 4000)]
    if fast:
        assert used >= 63
    killed = sum(d[COUNTED.index("index_items_killed")] for _, d in outs)
    assert killed >= 1          # the deleted row's item, killed by the first lookup
    assert outs[62][1][COUNTED.index("index_heap_fetches")] == 0   # skipped after
    test_hot_chain_and_killed_items_same_counters.seen[fast] = (outs, rows, stats)
    if len(test_hot_chain_and_killed_items_same_counters.seen) == 2:
        a, b = test_hot_chain_and_killed_items_same_counters.seen.values()
        assert a == b


test_hot_chain_and_killed_items_same_counters.seen = {}


def test_no_killing_when_off(tmp_path):
    """kill_index_tuples off: neither path kills, and the point path reads the items a
    killing scan would have skipped, as the nodes do (the same counters)."""
    got = {}
    for fast in (True, False):
        side = Side(tmp_path / ("f" if fast else "s"), fast, kill_index_tuples=False)
        outs = [side.op(("update", 4, 1)) for _ in range(30)]
        outs += [side.op(("delete", 8)), side.op(("select", 8)), side.op(("select", 8)),
                 side.op(("select", 4))]
        got[fast] = (outs, *side.finish())
    assert got[True][:3] == got[False][:3]
    outs = got[True][0]
    assert sum(d[COUNTED.index("index_items_killed")] for _, d in outs) == 0
    assert outs[-2][1][COUNTED.index("index_heap_fetches")] >= 1   # not skipped
    assert got[True][3] >= 33


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("iso", ["READ COMMITTED", "REPEATABLE READ"])
def test_keyed_update_waits_and_rechecks(tmp_path, fast, iso):
    """A's keyed UPDATE waits for B's uncommitted update of the row; when B commits, READ
    COMMITTED applies A's change to B's version (EvalPlanQual), REPEATABLE READ fails with
    40001 - on the point path as on the plan nodes."""
    side = Side(tmp_path / "data", fast)
    side.ea.execute("BEGIN ISOLATION LEVEL " + iso)
    side.ea.execute("SELECT 1")                   # A's snapshot (RR: the transaction's)
    side.eb.execute("BEGIN")
    side.eb.execute("UPDATE t SET v = v + 5 WHERE k = 2")
    t, box = _in_thread(lambda: side.prep["update"].execute([100, 2]).rowcount)
    deadline = time.time() + 10
    while time.time() < deadline and not (side.inst.seg.proc_wait_xid != 0).any():
        time.sleep(0.01)
    side.eb.execute("COMMIT")
    t.join(30)
    assert not t.is_alive()
    if iso == "READ COMMITTED":
        assert box.get("result") == 1, box
        side.ea.execute("COMMIT")
        assert side.eb.execute("SELECT v FROM t WHERE k = 2").rows == [(20 + 5 + 100,)]
    else:
        assert isinstance(box.get("error"), errors.SerializationFailure), box
        side.ea.execute("ROLLBACK")
        assert side.eb.execute("SELECT v FROM t WHERE k = 2").rows == [(25,)]
    assert side.ea.counters["fast_path"] >= (1 if fast else 0)
    side.finish()


def test_fast_path_off_and_explain(tmp_path):
    """The setting is a plan setting: SET replans and the nodes run; EXPLAIN shows the
    index scan the closure runs, also for a one-page table (a unique key's equality)."""
    side = Side(tmp_path / "data", True)
    e = side.ea
    e.execute("ANALYZE t")          # one page, twelve rows: a seq scan costs less
    assert e.execute("SELECT v FROM t WHERE k = ?", [2]).rows == [(20,)]
    n = e.counters["fast_path"]
    assert n >= 1
    plan = "\n".join(r[0] for r in e.execute("EXPLAIN UPDATE t SET v = 1 WHERE k = 3").rows)
    assert "Index Scan using" in plan, plan
    e.execute("SET enable_fast_path = off")
    assert e.execute("SELECT v FROM t WHERE k = ?", [2]).rows == [(20,)]
    assert e.counters["fast_path"] == n
    plan = "\n".join(r[0] for r in e.execute("EXPLAIN UPDATE t SET v = 1 WHERE k = 3").rows)
    assert "Seq Scan on t" in plan, plan
    e.execute("SET enable_fast_path = on")
    assert e.execute("SELECT v FROM t WHERE k = ?", [2]).rows == [(20,)]
    assert e.counters["fast_path"] == n + 1
    side.finish()


def test_errors_match(tmp_path):
    """Out-of-range arithmetic, NOT NULL and unique violations, a key too big for the
    column: the same errors on both paths, and the transaction left as the nodes leave it."""
    outs = {}
    for fast in (True, False):
        side = Side(tmp_path / ("f" if fast else "s"), fast)
        e = side.ea
        r = []
        for sql, params in [("UPDATE t SET v = v + ? WHERE k = ?", [2**31 - 1, 2]),
                            ("INSERT INTO t (k, v, s) VALUES (?, ?, ?)", [2, 1, "dup"]),
                            ("INSERT INTO t (k, v, s) VALUES (?, ?, ?)", [None, 1, "x"]),
                            ("SELECT v FROM t WHERE k = ?", [2**40]),
                            ("UPDATE t SET v = v + ? WHERE k = ?", [1, 2**40]),
                            ("UPDATE t SET big = big * ? WHERE k = ?", [2**62, 4])]:
            try:
                res = e.execute(sql, params)
                r.append((res.rowcount, res.rows))
            except errors.Error as ex:
                r.append(ex.sqlstate)
        outs[fast] = (r, side.finish()[:2])
    assert outs[True] == outs[False]
    assert outs[True][0][0] == "22003" and outs[True][0][1] == "23505"


def test_backward_index_order_stays_with_the_nodes(tmp_path):
    """An equality on a prefix of a two-column index read backward (ORDER BY ... DESC):
    the nodes' order, not the closure's forward one."""
    inst = Instance(tmp_path / "data", shared_buffers=64)
    s = Session(inst)
    e = Engine(s)
    e.execute("CREATE TABLE p (a integer, b integer)")
    e.execute("CREATE INDEX p_ab ON p (a, b)")
    for i in range(30):
        e.execute("INSERT INTO p VALUES (?, ?)", [i % 3, i])
    e.execute("ANALYZE p")
    e.execute("SET enable_seqscan = off")
    q = "SELECT b FROM p WHERE a = ? ORDER BY a DESC, b DESC"
    plan = "\n".join(r[0] for r in e.execute("EXPLAIN " + q, [1]).rows)
    assert "Index Scan Backward using p_ab" in plan, plan
    n = e.counters["fast_path"]
    assert e.execute(q, [1]).rows == [(b,) for b in range(28, 0, -3)]
    assert e.counters["fast_path"] == n
    assert e.execute("SELECT b FROM p WHERE a = ?", [1]).rows == \
        [(b,) for b in range(1, 30, 3)]
    assert e.counters["fast_path"] == n + 1
    s.close()
    inst.close()


def test_duplicates_past_one_leaf(tmp_path):
    """A non-unique key whose items fill more than one leaf: the point path's lookup goes
    on to the right sibling as the scan does - the same rows, counters and killing (a
    deleted half's items) as the plan nodes."""
    got = {}
    for fast in (True, False):
        inst = Instance(tmp_path / ("f" if fast else "s"), shared_buffers=64)
        s = Session(inst, enable_fast_path=fast)
        e = Engine(s)
        e.execute("CREATE TABLE d (a integer, b integer, pad text)")
        e.execute("CREATE INDEX d_a ON d (a)")
        for i in range(900):
            e.execute("INSERT INTO d VALUES (?, ?, ?)", [i % 3 if i < 300 else 1, i, "x" * 20])
        e.execute("ANALYZE d")
        e.execute("SET enable_seqscan = off")
        e.execute("DELETE FROM d WHERE b % 4 = 0")
        q = e.prepare("SELECT b FROM d WHERE a = ?")
        outs = []
        for k in (1, 1, 0, 5):
            c0 = [int(x) for x in s.backend.bufmgr.stats]
            rows = sorted(q.execute([k]).rows)
            c1 = [int(x) for x in s.backend.bufmgr.stats]
            outs.append((rows, tuple(c1[C[n]] - c0[C[n]] for n in COUNTED)))
        got[fast] = (outs, s.table_stats("d"), e.counters["fast_path"])
        s.close()
        inst.close()
    (o1, st1, used1), (o0, st0, used0) = got[True], got[False]
    assert o1 == o0 and st1 == st0
    assert used1 >= 4 and used0 == 0
    assert len(o1[0][0]) == 700 - 175
    assert o1[0][1][COUNTED.index("index_items_killed")] > 0


def test_insert_casts_take_the_point_path(tmp_path):
    """TPC-B's history INSERT (``CURRENT_TIMESTAMP`` into a timestamp column) and an integer
    into a bigint column run as closures, with the general path's values: a timestamptz
    constant cast in the session's TimeZone (changed between executions), the transaction's
    now() for every row of a transaction; ``random()`` stays with the nodes."""
    got = {}
    for fast in (True, False):
        side = Side(tmp_path / ("f" if fast else "s"), fast)
        e = side.ea
        n0 = e.counters["fast_path"]
        outs = [side.op(("insert_cast", 1, 5)), side.op(("a_tz", "Asia/Kolkata")),
                side.op(("insert_cast", 3, None)), side.op(("select_ts", 3)),
                side.op(("a_tz", "America/New_York")), side.op(("insert_cast", 5, 2**20))]
        e.execute("BEGIN")
        for k in (7, 9):
            outs.append(side.op(("insert_now", k)))
        time.sleep(0.01)
        outs.append(side.op(("insert_now", 11)))
        e.execute("COMMIT")
        outs.append(e.execute("SELECT count(DISTINCT mt) FROM t WHERE k IN (7, 9, 11)").rows)
        used = e.counters["fast_path"] - n0
        e.execute("CREATE TABLE rnd (k integer, f double precision)")
        n1 = e.counters["fast_path"]
        e.execute("INSERT INTO rnd VALUES (?, random())", [1])
        assert e.counters["fast_path"] == n1
        got[fast] = (outs, used, side.finish()[:2])
    assert got[True][0] == got[False][0] and got[True][2] == got[False][2]
    outs = got[True][0]
    assert [r for r, _ in outs[6:9]] == [(1, [(7,)]), (1, [(9,)]), (1, [(11,)])]
    assert outs[9] == [(1,)]           # one transaction: one now()
    assert outs[3][0][0][1].hour == 12 and outs[3][0][0][1].minute == 30   # 12:00+05 in IST
    assert got[True][1] >= 7 and got[False][1] == 0


@settings(max_examples=200, deadline=None)
@given(start=st.datetimes(min_value=__import__("datetime").datetime(1990, 1, 1),
                          max_value=__import__("datetime").datetime(2060, 1, 1)),
       zone=st.sampled_from(["UTC", "Asia/Kolkata", "America/New_York", "Europe/Helsinki",
                             "Australia/Lord_Howe", "+05:45", "-03:30"]))
def test_local_now_is_the_general_paths_value(start, zone):
    """``now()::timestamp`` and LOCALTIMESTAMP on the point path (``local_now``) equal what
    the general path's ``compile_expr`` folds them to, DST folds and gaps included."""
    from minidb.exec import datatypes as dt
    from minidb.exec import expr as X
    from minidb.exec.compile import compile_expr
    from minidb.exec.point import local_now
    from minidb.types import session_timezone, set_timezone
    set_timezone(zone)
    try:
        now = X.Func("now", (), dt.TIMESTAMPTZ)
        for e in (X.Cast(now, dt.TIMESTAMP), X.Func("now", (), dt.TIMESTAMP)):
            want = dt.from_repr(compile_expr(e, {}, (), start).value, dt.TIMESTAMP)
            got = local_now(start, session_timezone())
            assert got == want and got.fold == want.fold == 0, (e, got, want)
    finally:
        set_timezone("UTC")


class _NoCache(dict):
    """A chain cache that never remembers: every HOT chain walk goes from the root."""

    def __setitem__(self, key, value):
        pass


@pytest.mark.parametrize("fast", [True, False])
@settings(max_examples=4, **_HYP)
@given(seq=ops)
def test_chain_cache_changes_no_answer(tmp_path_factory, fast, seq):
    """The backend's HOT chain dead-run cache (heap/mvcc.py) against walks from the root,
    on the point path and on the plan nodes' index scans: the same results, counters,
    killed items and statistics."""
    # key 4 deleted and inserted again first, so that it exists whatever the drawn prefix
    # did to it (a prefix that deleted it left the twelve updates nothing to update, and no
    # chain to remember)
    seq = _sanitize(seq + [("a_end",), ("b_end", True), ("delete", 4), ("insert", 4, 0)]
                    + [("update", 4, 1)] * 12
                    + [("select", 4), ("delete", 4), ("select", 4), ("select", 4)])
    got = {}
    for cached in (True, False):
        side = Side(tmp_path_factory.mktemp("cache" if cached else "nocache") / "data", fast)
        if not cached:
            side.a.backend.chain_cache = _NoCache()
        results = [side.op(o) for o in seq]
        used = len(side.a.backend.chain_cache)
        got[cached] = (results, *side.finish()[:2], used)
    (r1, rows1, st1, used1), (r0, rows0, st0, used0) = got[True], got[False]
    for o, x, y in zip(seq, r1, r0):
        assert x == y, (o, x, y)
    assert rows1 == rows0 and st1 == st0
    assert used0 == 0 and used1 >= 1       # the chain of key 4 was remembered
