"""Operators over data spanning many pages and scan batches: sort order (NULL placement,
DESC, several keys, strings), grouping, hash join = nested loop = index nested loop, LIMIT
stopping early, pushed-down filters vs ordinary ones; every result checked against a
plain-Python computation over the same rows.  After each test no buffer is left pinned."""

from __future__ import annotations

import random

import numpy as np
import pytest

from minidb.exec.chunk import Chunk
from minidb.exec.nodes import factorize, sort_order
from minidb.instance import Instance
from minidb.session import Session
from minidb.sql import Engine

NROWS = 40_000


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    inst = Instance(tmp_path_factory.mktemp("ops") / "data", shared_buffers=512,
                    allow_server_files=True)  # COPY from a file below
    s = Session(inst)
    e = Engine(s)
    rnd = random.Random(7)
    rows = []
    for i in range(NROWS):
        g = rnd.randrange(50) if rnd.random() > 0.05 else None
        v = rnd.randrange(-1000, 1000) if rnd.random() > 0.1 else None
        f = rnd.random() * 100 if rnd.random() > 0.1 else None
        txt = rnd.choice(["alpha", "beta", "gamma", "delta", "", None])
        rows.append((i, g, v, f, txt))
    e.execute("CREATE TABLE big (id int, g int, v int, f double precision, t text)")
    path = tmp_path_factory.mktemp("ops") / "big.csv"
    with open(path, "w") as fh:
        for r in rows:
            fh.write(",".join("" if x is None else ('""' if x == "" else str(x)) for x in r)
                     + "\n")
    e.execute(f"COPY big FROM '{path}' (FORMAT csv)")
    e.execute("CREATE TABLE dim (g int PRIMARY KEY, name text)")
    for g in range(0, 60, 2):
        e.execute("INSERT INTO dim VALUES (?, ?)", [g, f"g{g}"])
    e.execute("ANALYZE")
    yield e, rows, inst
    s.close()
    inst.close()


def _no_pins(inst):
    from tests.conftest import no_pins_problems
    assert not no_pins_problems(inst)


def test_scan_spans_batches(data):
    e, rows, inst = data
    rel = inst.catalog.heap_rel("big")
    assert inst.smgr.nblocks(rel.relfilenode) > 100
    assert e.execute("SELECT count(*) FROM big").rows == [(NROWS,)]
    assert sorted(e.execute("SELECT * FROM big").rows, key=lambda r: r[0]) == rows
    _no_pins(inst)


@pytest.mark.parametrize("cond,pyfn", [
    ("v < 0", lambda r: r[2] is not None and r[2] < 0),
    ("v < 0 AND g IN (1, 2, 3)", lambda r: r[2] is not None and r[2] < 0 and r[1] in (1, 2, 3)),
    ("v IS NULL OR f > 50", lambda r: r[2] is None or (r[3] is not None and r[3] > 50)),
    ("v + 1 > 900", lambda r: r[2] is not None and r[2] + 1 > 900),
    ("t = 'beta'", lambda r: r[4] == "beta"),
    ("NOT (g = 3)", lambda r: r[1] is not None and r[1] != 3),
])
def test_filters(data, cond, pyfn):
    e, rows, inst = data
    want = sorted(r[0] for r in rows if pyfn(r))
    assert sorted(x[0] for x in e.execute(f"SELECT id FROM big WHERE {cond}").rows) == want
    assert e.execute(f"SELECT count(*) FROM big WHERE {cond}").rows == [(len(want),)]


def test_sort_many_keys(data):
    e, rows, inst = data
    got = e.execute("SELECT id FROM big ORDER BY g DESC NULLS LAST, t, v DESC, id").rows

    def key(r):
        g, t, v = r[1], r[4], r[2]
        return ((g is None), -(g or 0), (t is None), t or "", (v is not None), -(v or 0), r[0])
    assert [x[0] for x in got] == [r[0] for r in sorted(rows, key=key)]
    top = e.execute("SELECT id, f FROM big WHERE f IS NOT NULL ORDER BY f DESC LIMIT 5").rows
    assert [x[0] for x in top] == [r[0] for r in sorted((r for r in rows if r[3] is not None),
                                                        key=lambda r: -r[3])[:5]]
    _no_pins(inst)


def test_group_by_matches_python(data):
    e, rows, inst = data
    got = e.execute("SELECT g, count(*), count(v), sum(v), min(v), max(f), "
                    "count(DISTINCT t) FROM big GROUP BY g").rows
    ref = {}
    for r in rows:
        d = ref.setdefault(r[1], [0, 0, None, None, None, set()])
        d[0] += 1
        if r[2] is not None:
            d[1] += 1
            d[2] = r[2] if d[2] is None else d[2] + r[2]
            d[3] = r[2] if d[3] is None else min(d[3], r[2])
        if r[3] is not None:
            d[4] = r[3] if d[4] is None else max(d[4], r[3])
        if r[4] is not None:
            d[5].add(r[4])
    assert len(got) == len(ref)
    for g, c, cv, s, mn, mx, cd in got:
        d = ref[g]
        assert (c, cv, s, mn, cd) == (d[0], d[1], d[2], d[3], len(d[5]))
        assert mx == pytest.approx(d[4])
    avg = e.execute("SELECT avg(v) FROM big").rows[0][0]
    vs = [r[2] for r in rows if r[2] is not None]
    assert avg == pytest.approx(sum(vs) / len(vs))


def test_join_methods_agree(data):
    e, rows, inst = data
    q = "SELECT big.id, dim.name FROM big JOIN dim ON big.g = dim.g WHERE big.v > 900"
    want = sorted((r[0], f"g{r[1]}") for r in rows
                  if r[1] is not None and r[1] % 2 == 0 and r[2] is not None and r[2] > 900)
    tops = {}
    for hj, nl in (("on", "on"), ("off", "on"), ("on", "off")):
        e.execute(f"SET enable_hashjoin = {hj}")
        e.execute(f"SET enable_nestloop = {nl}")
        plan = "\n".join(r[0] for r in e.execute("EXPLAIN " + q).rows)
        tops[hj, nl] = plan.splitlines()[0].split("  ")[0]
        assert sorted(e.execute(q).rows) == want, plan
    e.execute("RESET ALL")
    # each setting ran the join method it asked for
    assert tops == {("on", "on"): "Hash Join", ("off", "on"): "Nested Loop",
                    ("on", "off"): "Hash Join"}, tops
    # index nested loop (dim's primary key) from a small outer side
    q2 = "SELECT big.id, dim.name FROM big JOIN dim ON dim.g = big.g WHERE big.id < 30"
    want2 = sorted((r[0], f"g{r[1]}") for r in rows
                   if r[0] < 30 and r[1] is not None and r[1] % 2 == 0)
    assert sorted(e.execute(q2).rows) == want2
    e.execute("SET enable_hashjoin = off")
    e.execute("SET enable_seqscan = off")
    try:
        plan = "\n".join(r[0] for r in e.execute("EXPLAIN " + q2).rows)
        assert "Nested Loop" in plan and "Index Scan using dim_pkey" in plan, plan
        assert sorted(e.execute(q2).rows) == want2
    finally:
        e.execute("RESET ALL")
    _no_pins(inst)


def test_limit_stops_early_and_releases_pins(data):
    e, rows, inst = data
    s = e.session

    def touched(c):
        return c["buffers_hit"] + c["buffers_read"]
    i0, b0 = touched(inst.counters()), touched(s.backend.counters())
    got = e.execute("SELECT id FROM big LIMIT 3").rows
    i1, b1 = touched(inst.counters()), touched(s.backend.counters())
    assert [x[0] for x in got] == [0, 1, 2]
    pages = inst.smgr.nblocks(inst.catalog.table("big").relfilenode)
    # the scan pinned its first batch of pages (as many as one backend may pin at once)
    # and stopped there: not the whole table
    batch = s.backend.bufmgr.max_batch_pins
    assert b1 - b0 == batch < pages
    assert i1 - i0 == b1 - b0       # the instance's totals count the same pages, once
    _no_pins(inst)


def test_sort_order_function():
    vals = np.array([3, 1, 2, 1, 0], dtype=np.int64)
    mask = np.array([False, False, True, False, False])
    chunk = Chunk([(vals, mask)], 5)
    order = sort_order(chunk, [(vals, mask, False, False)])
    assert order.tolist() == [4, 1, 3, 0, 2]               # NULLS LAST, ties stable
    order = sort_order(chunk, [(vals, mask, True, True)])
    assert order.tolist() == [2, 0, 1, 3, 4]               # DESC NULLS FIRST
    s = np.array(["b", "a", "", "a"], dtype=object)
    order = sort_order(None, [(s, None, True, False)])
    assert order.tolist() == [0, 1, 3, 2]


def test_factorize_groups_nulls_together():
    v = np.array([1, 2, 1, 0, 0], dtype=np.int64)
    m = np.array([False, False, False, True, True])
    g, first = factorize([(v, m)])
    assert g[0] == g[2] and g[3] == g[4] and len(first) == 3
    assert g[3] == max(g)                                   # NULL group last
