"""Index tuple killing (LP_DEAD hints), simple deletion, and index scan = sequential scan.

The killing tests assert on the per-backend counters ``index_items_killed``,
``index_heap_fetches``, ``index_items_read``, ``index_items_deleted`` and
``index_splits``.  What they do not prove: that killing is safe under every
interleaving of processes; they pin down the rule's cases one by one (old snapshot,
in-progress deleter, page changed under the scan, TID recycled by VACUUM)."""

from __future__ import annotations

import random

import pytest

from minidb import index as ix
from minidb.heap.vacuum import vacuum_table
from minidb.session import Session

from tests.index.helpers import Table, make_table


def _delta(backend, before, name):
    return backend.counters()[name] - before[name]


@pytest.fixture
def loaded(instance):
    """t(a int, b text) with 1000 rows and an index on a; a session on it."""
    make_table(instance, "t", [("a", "integer"), ("b", "text")])
    s = Session(instance)
    s.insert_many("t", [(i, f"r{i}") for i in range(1000)])
    ix.create_index(s.backend, "t", "t_a", ["a"])
    yield instance, s
    s.close()


def _scan_all(backend, snapshot=None):
    rows = [r for _t, r in ix.index_scan(backend, "t_a").visible_rows(snapshot)]
    backend.xact.commit()
    return rows


def test_first_scan_kills_second_scan_skips_the_heap(loaded, assert_no_pins):
    inst, s = loaded
    b = s.backend
    assert s.delete("t", lambda r: r[0] % 2 == 0) == 500
    c0 = b.counters()
    assert len(_scan_all(b)) == 500
    assert _delta(b, c0, "index_heap_fetches") == 1000
    assert _delta(b, c0, "index_items_killed") == 500
    c1 = b.counters()
    assert len(_scan_all(b)) == 500
    assert _delta(b, c1, "index_heap_fetches") == 500   # none for the killed items
    assert _delta(b, c1, "index_items_read") == 500
    assert _delta(b, c1, "index_items_killed") == 0
    summary = ix.check_btree(b, "t_a")
    assert summary["dead_items"] == 500
    b.xact.commit()
    assert_no_pins(inst)


def test_older_snapshot_prevents_killing_and_still_sees_rows(loaded):
    inst, s = loaded
    b = s.backend
    old = Session(inst)
    old.begin("repeatable read")
    assert len(old.select("t", lambda r: r[0] < 10)) == 10      # the snapshot is taken
    assert s.delete("t", lambda r: r[0] < 100) == 100
    c0 = b.counters()
    assert len(_scan_all(b)) == 900
    assert _delta(b, c0, "index_items_killed") == 0
    # the old snapshot still finds the deleted rows through the index
    got = ix.lookup_visible(old.backend, "t_a", 7)
    assert [r for _t, r in got] == [(7, "r7")]
    rows = [r for _t, r in ix.index_scan(old.backend, "t_a", 0, 99).visible_rows()]
    assert len(rows) == 100
    assert old.backend.counters()["index_items_killed"] == 0
    old.commit()
    old.close()
    c1 = b.counters()
    assert len(_scan_all(b)) == 900
    assert _delta(b, c1, "index_items_killed") == 100     # now dead to everyone
    ix.check_btree(b, "t_a")
    b.xact.commit()


def test_in_progress_delete_is_not_killed(loaded):
    inst, s = loaded
    deleter = Session(inst)
    deleter.begin()
    assert deleter.delete("t", lambda r: r[0] < 50) == 50
    b = s.backend
    c0 = b.counters()
    assert len(_scan_all(b)) == 1000
    assert _delta(b, c0, "index_items_killed") == 0
    deleter.rollback()
    deleter.close()
    c1 = b.counters()
    assert len(_scan_all(b)) == 1000
    assert _delta(b, c1, "index_items_killed") == 0      # aborted delete: rows are live
    ix.check_btree(b, "t_a")
    b.xact.commit()


def test_setting_off_kills_nothing(loaded):
    inst, s = loaded
    s.delete("t", lambda r: r[0] < 200)
    s.backend.settings.set("kill_index_tuples", False)
    b = s.backend
    c0 = b.counters()
    for _ in range(2):
        assert len(_scan_all(b)) == 800
    assert _delta(b, c0, "index_items_killed") == 0
    assert _delta(b, c0, "index_heap_fetches") == 2000


def test_kill_gives_up_when_the_page_changed(instance):
    make_table(instance, "t", [("a", "integer")])
    s = Session(instance)
    s.insert_many("t", [(i,) for i in range(100)])            # one leaf
    ix.create_index(s.backend, "t", "t_a", ["a"])
    s.delete("t", lambda r: r[0] < 50)
    b = s.backend
    c0 = b.counters()
    it = ix.index_scan(b, "t_a").visible_rows()
    assert next(it)[1] == (50,)          # 50 dead entries fetched and remembered
    other = Session(instance)
    Table(other, "t").insert((1000,))    # the leaf changes (its LSN moves)
    rest = list(it)
    assert len(rest) == 49
    assert _delta(b, c0, "index_items_killed") == 0
    b.xact.commit()
    c1 = b.counters()
    assert len(_scan_all(b)) == 51
    assert _delta(b, c1, "index_items_killed") == 50
    ix.check_btree(b, "t_a")
    other.close()
    b.xact.commit()
    s.close()


def test_kill_after_vacuum_recycled_the_tid_does_not_hide_the_new_row(instance):
    """The scan fetched a dead row's entry; before it leaves the page VACUUM removes the
    entry and frees the heap slot, and a new row with the same key takes the same TID.
    Marking by TID would now hide a live row: the LSN check prevents it."""
    make_table(instance, "t", [("a", "integer")])
    s = Session(instance)
    t = Table(s, "t")
    ix.create_index(s.backend, "t", "t_a", ["a"])
    tids = {i: t.insert((i,)) for i in range(10)}
    t.delete(tids[5])
    b = s.backend
    it = ix.index_scan(b, "t_a").visible_rows()
    got = [next(it)[1] for _ in range(6)]
    assert got == [(0,), (1,), (2,), (3,), (4,), (6,)]     # 5 was fetched: dead
    other = Session(instance)
    res = vacuum_table(other.backend, other.rel("t"),
                       index_callbacks=ix.index_vacuum_callbacks(other.backend, "t"))
    assert res.dead_item_ids_removed == 1
    new_tid = Table(other, "t").insert((5,))
    assert new_tid == tids[5]                                # the slot was recycled
    rest = [r for _t, r in it]
    assert rest == [(7,), (8,), (9,)]
    assert b.counters()["index_items_killed"] == 0
    b.xact.commit()
    assert [r for _t, r in ix.lookup_visible(b, "t_a", 5)] == [(5,)]
    ix.check_btree(b, "t_a")
    b.xact.commit()
    other.close()
    s.close()


@pytest.mark.parametrize("kill", [True, False])
def test_simple_deletion_avoids_the_split(instance, kill):
    make_table(instance, "t", [("a", "integer")])
    s = Session(instance, kill_index_tuples=kill)
    b = s.backend
    s.insert_many("t", [(i,) for i in range(300)])
    ix.create_index(b, "t", "t_a", ["a"])
    assert ix.check_btree(b, "t_a")["leaf_pages"] == 1
    s.delete("t", lambda r: True)
    _scan_all(b)
    c0 = b.counters()
    t = Table(s, "t")
    s.begin()
    for i in range(300):
        t.insert((1000 + i,))            # 600 items would not fit one leaf
    s.commit()
    if kill:
        assert _delta(b, c0, "index_items_deleted") == 300
        assert _delta(b, c0, "index_splits") == 0
        assert ix.check_btree(b, "t_a")["leaf_pages"] == 1
    else:
        assert _delta(b, c0, "index_items_deleted") == 0
        assert _delta(b, c0, "index_splits") >= 1
    ix.check_btree(b, "t_a")
    b.xact.commit()
    s.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_index_scan_equals_seq_scan_on_one_snapshot(instance, seed):
    rng = random.Random(seed)
    make_table(instance, "t", [("a", "integer"), ("b", "text"), ("c", "bigint")])
    s = Session(instance)
    t = Table(s, "t")
    ix.create_index(s.backend, "t", "t_ab", ["a", "b"])
    live = {}
    for i in range(600):
        row = (rng.randint(0, 50), rng.choice(["x", "y", None]), i)
        live[t.insert(row)] = row
    ix.create_index(s.backend, "t", "t_c", ["c"])
    for _ in range(300):
        tid = rng.choice(list(live))
        if rng.random() < 0.5:
            t.delete(tid)
            del live[tid]
        else:
            old = live.pop(tid)
            new = (old[0] if rng.random() < 0.5 else rng.randint(0, 50), old[1], old[2])
            new_tid, _hot = t.update(tid, new)
            live[new_tid] = new
    reader = Session(instance)
    reader.begin("repeatable read")
    seq = sorted(reader.select("t"), key=lambda r: r[2])
    # changes after the snapshot must be invisible to both paths
    for tid in rng.sample(list(live), 50):
        t.delete(tid)
    t.insert((25, "z", 10**6))
    rb = reader.backend
    for lo, hi in [(None, None), (10, 20), (0, 0), (49, 50)]:
        via_index = sorted((r for _t, r in ix.index_scan(rb, "t_ab", lo, hi).visible_rows()),
                           key=lambda r: r[2])
        want = [r for r in seq if (lo is None or lo <= r[0] <= hi)]
        assert via_index == want
    via_c = [r for _t, r in ix.index_scan(rb, "t_c").visible_rows()]
    assert via_c == seq
    reader.commit()
    reader.close()
    ix.check_btree(s.backend, "t_ab")
    ix.check_btree(s.backend, "t_c")
    s.backend.xact.commit()
    s.close()
