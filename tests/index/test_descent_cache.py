"""The B-tree descent cache (``search``: decoded internal pages checked by page LSN,
buffer hints through ``read_recent``) and the leaf search that does not build sort keys.

What is proven here:
  * a descent through unchanged internal pages is a cache hit; the first descent through a
    page is a miss; a split below an internal page (a new downlink: a logged change, a new
    LSN) and a root split make the next descent re-decode the page (a refresh), and every
    lookup still finds exactly its keys;
  * an index dropped and created again under the same name starts with an empty cache
    (a new relfilenode: a new ``IndexRel``), so no decode of the old file is used;
  * hypothesis: inserts (ascending, descending, random, duplicates, NULLs) and lookups
    (hits, misses, ranges, both directions) return the same TIDs with the cache on and off,
    visiting the same pages (the same buffer pins), and ``check_btree`` passes;
  * ``binsearch_leaf`` / ``gallop_leaf`` give the offsets a search over the built sort keys
    gives, for bounds equal to, inside, between and beyond the keys.

minidb never deletes B-tree pages (``vacuum.py``: empty leaves stay), so there is no page
deletion to invalidate the cache; VACUUM's changes to leaves do not concern it (leaves are
not cached).
"""

from __future__ import annotations

import bisect
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minidb import index as ix
from minidb.catalog import ColumnDef
from minidb.index import btpage as bt
from minidb.index.rel import open_index
from minidb.index.search import get_root
from minidb.instance import Instance

_names = itertools.count()


@pytest.fixture(scope="module")
def big_pool(tmp_path_factory):
    """An instance whose pool holds every page of these tests' small indexes."""
    inst = Instance(tmp_path_factory.mktemp("descent") / "data", shared_buffers=1024)
    try:
        yield inst
    finally:
        inst.close()


def _counts(be) -> dict:
    c = be.counters()
    return {k: c[k] for k in ("btree_cache_hits", "btree_cache_misses",
                              "btree_cache_refreshes")}


def _delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in before}


def _new_index(inst, be, coltype: str = "text") -> str:
    n = next(_names)
    inst.catalog.create_table(f"t{n}", [ColumnDef("k", coltype)])
    ix.create_index(be, f"t{n}", f"t{n}_k", ["k"])
    return f"t{n}_k"


def _key(i: int) -> str:
    return f"{i:06d}" + "x" * 180  # ~190-byte keys: about 40 items a page


def _lookup(be, name, k):
    return list(ix.index_scan(be, name, (k,), (k,)))  # (None,): IS NULL


def test_split_and_root_split_refresh_the_cached_pages(big_pool):
    with big_pool.connect() as be:
        name = _new_index(big_pool, be)
        tids = {}
        for i in range(0, 4000, 2):  # two levels of internal pages above the leaves
            tids[i] = (1 + i // 100, 1 + i % 100)
            ix.insert_entry(be, name, (_key(i),), tids[i])
        assert ix.check_btree(be, name, heapallindexed=False)["levels"] == 3
        irel = open_index(be, name)
        irel.descent_cache.clear()
        c0 = _counts(be)
        assert _lookup(be, name, _key(1000)) == [tids[1000]]
        d = _delta(c0, _counts(be))
        assert d == {"btree_cache_hits": 0, "btree_cache_misses": 2, "btree_cache_refreshes": 0}
        c0 = _counts(be)
        assert _lookup(be, name, _key(1000)) == [tids[1000]]
        assert _lookup(be, name, _key(1001)) == []
        d = _delta(c0, _counts(be))
        assert d == {"btree_cache_hits": 4, "btree_cache_misses": 0, "btree_cache_refreshes": 0}

        # fill the leaf of 1000 until it splits: its parent gets a downlink (new LSN)
        splits = be.counters()["index_splits"]
        j = 1
        while be.counters()["index_splits"] == splits:
            ix.insert_entry(be, name, (_key(1000)[:6] + f"{j:04d}",), (900, j))
            j += 1
        c0 = _counts(be)
        assert _lookup(be, name, _key(1000)) == [tids[1000]]
        d = _delta(c0, _counts(be))
        assert d["btree_cache_refreshes"] == 1 and d["btree_cache_hits"] == 1
        for i in range(0, 4000, 50):  # every key still found, through the refreshed pages
            assert _lookup(be, name, _key(i)) == [tids[i]]

        # grow until the root splits: the old root is re-decoded, then left for the new one
        root = irel.root_cache[0]
        i = 4000
        while open_index(be, name).root_cache[0] == root:
            ix.insert_entry(be, name, (_key(i),), (2000 + i // 100, 1 + i % 100))
            tids[i] = (2000 + i // 100, 1 + i % 100)
            i += 1
        irel.root_cache = [root, 2]  # as another process would still have it
        c0 = _counts(be)
        assert _lookup(be, name, _key(10)) == [tids[10]]
        d = _delta(c0, _counts(be))
        assert d["btree_cache_refreshes"] >= 1
        assert irel.root_cache[0] != root
        for k in list(tids)[::97]:
            assert _lookup(be, name, _key(k)) == [tids[k]]
        assert ix.check_btree(be, name, heapallindexed=False)["leaf_items"] == len(tids) + j - 1
        be.xact.commit()


def test_a_recreated_index_does_not_use_the_old_decodes(big_pool):
    with big_pool.connect() as be:
        name = _new_index(big_pool, be)
        table = name[:-2]
        for i in range(600):
            ix.insert_entry(be, name, (_key(i),), (1 + i // 100, 1 + i % 100))
        assert _lookup(be, name, _key(7)) == [(1, 8)]
        old = open_index(be, name)
        assert old.descent_cache
        ix.drop_index(be, name)
        ix.create_index(be, table, name, ["k"])  # the table is empty: an empty index
        new = open_index(be, name)
        assert new is not old and new.relfilenode != old.relfilenode
        assert not new.descent_cache
        c0 = _counts(be)
        for i in range(600):
            ix.insert_entry(be, name, (_key(i),), (50 + i // 100, 1 + i % 100))
        assert _lookup(be, name, _key(7)) == [(50, 8)]
        d = _delta(c0, _counts(be))
        assert d["btree_cache_misses"] >= 1 and d["btree_cache_refreshes"] >= 1
        be.xact.commit()


_ops = st.lists(st.one_of(
    st.tuples(st.just("insert"), st.lists(st.one_of(st.none(), st.integers(-60, 60)),
                                           min_size=1, max_size=80)),
    st.tuples(st.just("sorted"), st.integers(-60, 60), st.integers(1, 150),
              st.booleans()),
    st.tuples(st.just("lookup"), st.lists(st.one_of(st.none(), st.integers(-70, 70)),
                                           min_size=1, max_size=20)),
    st.tuples(st.just("range"), st.integers(-70, 70), st.integers(-70, 70), st.booleans(),
              st.booleans(), st.sampled_from(["forward", "backward"]))),
    min_size=1, max_size=8)


_HC = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@settings(max_examples=12, deadline=None, suppress_health_check=_HC)
@given(ops=_ops)
def test_lookups_through_the_cache_equal_lookups_without_it(big_pool, ops):
    _cache_on_equals_off(big_pool, ops)


@pytest.mark.long
@settings(max_examples=150, deadline=None, suppress_health_check=_HC)
@given(ops=_ops)
def test_lookups_through_the_cache_equal_lookups_without_it_long(big_pool, ops):
    _cache_on_equals_off(big_pool, ops)


def _cache_on_equals_off(big_pool, ops):
    on = big_pool.connect()
    off = big_pool.connect(btree_descent_cache=False)
    try:
        name = _new_index(big_pool, on, "integer")
        on.xact.commit()  # CREATE INDEX's lock on the table ends: both may write now
        tid = itertools.count()
        model = []

        def both(fn):
            get_root(on.bufmgr, open_index(on, name))  # the shared root cache: filled
            c_on, c_off = on.counters(), off.counters()
            r_on, r_off = fn(on), fn(off)
            assert r_on == r_off
            pins_on = sum(on.counters()[k] - c_on[k] for k in ("buffers_hit", "buffers_read"))
            pins_off = sum(off.counters()[k] - c_off[k]
                           for k in ("buffers_hit", "buffers_read"))
            assert pins_on == pins_off  # the same pages visited
            return r_on

        for op in ops:
            if op[0] in ("insert", "sorted"):
                if op[0] == "insert":
                    keys = op[1]
                else:
                    _, start, n, desc = op
                    keys = list(range(start, start + n))[::-1 if desc else 1]
                for k in keys:
                    t = next(tid)
                    w = on if t % 2 else off  # writers descend both ways too
                    ix.insert_entry(w, name, (k,), (1 + t // 200, 1 + t % 200))
                    model.append((k, (1 + t // 200, 1 + t % 200)))
            elif op[0] == "lookup":
                for k in op[1]:
                    got = both(lambda be: _lookup(be, name, k))
                    assert sorted(got) == sorted(t for kk, t in model if kk == k)
            else:
                _, lo, hi, lo_inc, hi_inc, direction = op
                got = both(lambda be: list(ix.index_scan(
                    be, name, lo, hi, low_inclusive=lo_inc, high_inclusive=hi_inc,
                    direction=direction)))
                want = [t for k, t in model if k is not None
                        and (lo < k or (lo_inc and lo == k)) and (k < hi or (hi_inc and k == hi))]
                assert sorted(got) == sorted(want)
        full = both(lambda be: list(ix.index_scan(be, name)))
        assert sorted(full) == sorted(t for _k, t in model)
        ix.check_btree(on, name, heapallindexed=False)
        on.xact.commit()
        off.xact.commit()
    finally:
        on.close()
        off.close()


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.binary(min_size=0, max_size=5), min_size=1, max_size=60),
       bound_key=st.binary(max_size=6), bound_tail=st.binary(max_size=8))
def test_leaf_search_equals_a_search_over_built_sort_keys(keys, bound_key, bound_tail):
    """The probe that compares the key, then the TID only when the bound extends the key,
    orders exactly as key + TID bytes do (keys here need not be prefix-free)."""
    import numpy as np
    page = np.zeros(bt.BLCKSZ, np.uint8)
    bt.init_page(page, 0, bt.BTP_LEAF)
    items = sorted((k, i) for i, k in enumerate(keys))
    sortkeys = sorted(k + bt.tid_bytes(1 + i // 100, 1 + i % 100) for k, i in items)
    for sk in sortkeys:
        bt.pg.add_item(page, bt.ITUP.pack(*bt.TID_BE.unpack(sk[-6:]), 8 + len(sk) - 6)
                       + sk[:-6], heap=False)
    data = page.tobytes()
    n = len(sortkeys)
    for bound in {bound_key, bound_key + bound_tail, *(sk[:-6] for sk in sortkeys[:3]),
                  *(sk[:-6] + bound_tail for sk in sortkeys[:3]), sortkeys[0], b"\xff"}:
        want = 1 + bisect.bisect_left(sortkeys, bound)
        assert bt.binsearch_leaf(data, bound, 1, n) == want
        for lo in range(1, min(want, n) + 1):  # gallop from any start at or before it
            assert bt.gallop_leaf(data, bound, lo, n) == want
