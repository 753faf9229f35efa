"""VACUUM and the index: entries of dead heap tuples are removed (with the killed ones on
the same pages) before the heap line pointers are recycled; VACUUM keeps what an old
snapshot may see; a VACUUM racing with inserts that split pages misses nothing.

``check_btree`` also checks the converse of heapallindexed: no entry names a recycled
heap slot or another row.  What these do not prove: VACUUM racing with scans in other
processes (threads of one process share the same code paths and locks)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from minidb import index as ix
from minidb.heap.vacuum import vacuum_table
from minidb.session import Session

from tests.index.helpers import Table, make_table


@pytest.fixture
def env(instance):
    make_table(instance, "t", [("a", "integer"), ("b", "text")])
    s = Session(instance)
    s.insert_many("t", [(i, "x" * (i % 30)) for i in range(3000)])
    ix.create_index(s.backend, "t", "t_a", ["a"])
    ix.create_index(s.backend, "t", "t_b", ["b", "a"])
    yield instance, s
    s.close()


def _vacuum(s):
    b = s.backend
    return vacuum_table(b, s.rel("t"), index_callbacks=ix.index_vacuum_callbacks(b, "t"))


def test_vacuum_removes_entries_then_slots_are_reused(env, assert_no_pins):
    inst, s = env
    b = s.backend
    s.delete("t", lambda r: r[0] % 3 == 0)
    res = _vacuum(s)
    assert res.index_passes == 2 and res.dead_item_ids_removed == 1000
    for name in ("t_a", "t_b"):
        summary = ix.check_btree(b, name)
        assert summary["leaf_items"] == 2000 and summary["dead_items"] == 0
    b.xact.commit()
    t = Table(s, "t")
    tids = [t.insert((10_000 + i, "new")) for i in range(300)]
    old_slots = {tid for tid, _ in s.select_tids("t")}
    assert all(tid[0] < res.relpages for tid in tids)        # recycled line pointers
    assert len(old_slots) == 2300
    for name in ("t_a", "t_b"):
        ix.check_btree(b, name)
    assert [r for _t, r in ix.lookup_visible(b, "t_a", 10_005)] == [(10_005, "new")]
    b.xact.commit()
    assert_no_pins(inst)


def test_bulk_delete_removes_listed_and_killed_entries(env):
    inst, s = env
    b = s.backend
    s.delete("t", lambda r: r[0] < 100)
    list(ix.index_scan(b, "t_a", 0, 49).visible_rows())     # kills 50 entries in t_a
    b.xact.commit()
    dead = np.array([tid for tid, r in s.select_tids("t") if 100 <= r[0] < 110])
    res = ix.bulk_delete(b, "t_a", dead)
    assert res.entries_removed == 10 and res.dead_items_removed == 50
    assert res.entries_remaining == 3000 - 60
    assert res.leaf_pages == ix.check_btree(b, "t_a", heapallindexed=False)["leaf_pages"]
    assert len(list(ix.index_scan(b, "t_a", 100, 109))) == 0
    b.xact.commit()


def test_vacuum_keeps_what_an_old_snapshot_sees(env):
    inst, s = env
    b = s.backend
    old = Session(inst)
    old.begin("repeatable read")
    old.select("t", lambda r: False)
    s.delete("t", lambda r: r[0] < 500)
    res = _vacuum(s)
    assert res.dead_item_ids_removed == 0 and res.dead_tuples == 500
    assert len(ix.lookup_visible(old.backend, "t_a", 42)) == 1
    assert len(list(ix.index_scan(old.backend, "t_b", ("x" * 12,), ("x" * 12,))
                    .visible_rows())) == 100
    old.commit()
    old.close()
    assert _vacuum(s).dead_item_ids_removed == 500
    for name in ("t_a", "t_b"):
        assert ix.check_btree(b, name)["leaf_items"] == 2500
    b.xact.commit()


def test_vacuum_racing_with_splitting_inserts(env, assert_no_pins):
    inst, s = env
    b = s.backend
    s.delete("t", lambda r: r[0] % 2 == 1)
    writer = Session(inst)
    wt = Table(writer, "t")
    errors = []

    def insert_many():
        try:
            for i in range(1500):
                wt.insert((i * 2 + 1, "y" * (i % 40)))      # land between the old keys
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
    th = threading.Thread(target=insert_many)
    th.start()
    res = _vacuum(s)
    th.join(60)
    assert not th.is_alive() and not errors, errors
    assert res.dead_item_ids_removed > 0
    assert writer.backend.counters()["index_splits"] > 0
    rows = s.select("t")
    for name in ("t_a", "t_b"):
        assert ix.check_btree(b, name)["leaf_items"] == len(rows)
    b.xact.commit()
    writer.close()
    assert_no_pins(inst)
