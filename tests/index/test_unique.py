"""Unique indexes with PostgreSQL's semantics: a duplicate is an error only against a live
or committed row; an insert that meets an in-progress duplicate waits for that
transaction and then either fails (it committed) or goes on (it aborted).

What these do not prove: fairness or timing of the wait (no assertion on time: the
waiter is seen waiting in the proc array's wait-for column)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from minidb import index as ix
from minidb.errors import IntegrityError, UniqueViolation
from minidb.session import Session

from tests.index.helpers import Table, make_table

WAIT_LIMIT_S = 20.0


@pytest.fixture
def setup(instance):
    make_table(instance, "t", [("a", "integer"), ("b", "text")])
    s = Session(instance, deadlock_timeout=100)
    ix.create_index(s.backend, "t", "t_a", ["a"], unique=True)
    yield instance, s, Table(s, "t")
    s.close()


def test_violation_names_index_and_key_and_leaves_tree_valid(setup, assert_no_pins):
    inst, s, t = setup
    t.insert((1, "one"))
    t.insert((2, "two"))
    with pytest.raises(UniqueViolation) as e:
        t.insert((1, "uno"))
    assert isinstance(e.value, IntegrityError) and e.value.sqlstate == "23505"
    assert 'unique constraint "t_a"' in str(e.value) and "(a)=(1)" in str(e.value)
    assert sorted(s.select("t")) == [(1, "one"), (2, "two")]
    ix.check_btree(s.backend, "t_a")
    s.backend.xact.commit()
    assert_no_pins(inst)


def test_nulls_never_conflict(setup):
    inst, s, t = setup
    for _ in range(3):
        t.insert((None, "n"))
    assert len(ix.lookup_visible(s.backend, "t_a", (None,))) == 3
    ix.check_btree(s.backend, "t_a")
    s.backend.xact.commit()


def test_deleted_rows_do_not_conflict_and_own_rows_do(setup):
    inst, s, t = setup
    tid = t.insert((5, "a"))
    assert t.delete(tid)
    t.insert((5, "b"))                  # the old version's deleter committed
    s.begin()
    t.insert((6, "c"))
    with pytest.raises(UniqueViolation):
        t.insert((6, "d"))              # my own earlier row is live
    s.rollback()
    s.begin()
    tid = t.insert((7, "e"))
    t.delete(tid)                       # deleted by me in this transaction
    t.insert((7, "f"))
    s.commit()
    assert sorted(s.select("t")) == [(5, "b"), (7, "f")]
    ix.check_btree(s.backend, "t_a")
    s.backend.xact.commit()


def test_dead_duplicate_is_killed_by_the_check(setup):
    inst, s, t = setup
    tid = t.insert((9, "old"))
    t.delete(tid)                       # committed; no snapshot is older: dead to all
    b = s.backend
    killed = b.counters()["index_items_killed"]
    t.insert((9, "new"))
    assert b.counters()["index_items_killed"] == killed + 1
    summary = ix.check_btree(b, "t_a")
    assert summary["dead_items"] == 1
    b.xact.commit()


def test_duplicates_spanning_leaf_pages(instance):
    """Equal keys of dead versions fill several leaves; the live duplicate is found on a
    right sibling.  An old snapshot keeps the versions from being killable."""
    make_table(instance, "t", [("k", "text")])
    s = Session(instance)
    ix.create_index(s.backend, "t", "t_k", ["k"], unique=True)
    t = Table(s, "t")
    key = "K" * 1200
    old = Session(instance)
    old.begin("repeatable read")
    old.select("t")                     # holds back the horizon
    for _ in range(20):
        tid = t.insert((key,))
        t.delete(tid)
    t.insert((key,))
    assert ix.check_btree(s.backend, "t_k")["leaf_pages"] >= 3
    with pytest.raises(UniqueViolation):
        t.insert((key,))
    assert s.backend.counters()["index_items_killed"] == 0
    old.commit()
    old.close()
    ix.check_btree(s.backend, "t_k")
    s.backend.xact.commit()
    s.close()


class Step:
    """Run one call in a thread, keep its result or exception."""

    def __init__(self, fn):
        self.result = self.error = None
        self._t = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._t.start()

    def _run(self, fn):
        try:
            self.result = fn()
        except BaseException as e:  # noqa: BLE001
            self.error = e

    def join(self):
        self._t.join(WAIT_LIMIT_S)
        assert not self._t.is_alive(), "still blocked"
        if self.error is not None:
            raise self.error
        return self.result


def _wait_until_waiting(inst, slot, xid):
    deadline = time.monotonic() + WAIT_LIMIT_S
    while inst.seg.proc_wait_xid[slot] != xid:
        assert time.monotonic() < deadline, "the second inserter never waited"
        time.sleep(0.005)


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_insert_waits_for_in_progress_duplicate(instance, outcome, assert_no_pins):
    make_table(instance, "t", [("a", "integer"), ("b", "text")])
    first = Session(instance, deadlock_timeout=100)
    second = Session(instance, deadlock_timeout=100)
    ix.create_index(first.backend, "t", "t_a", ["a"], unique=True)
    t1, t2 = Table(first, "t"), Table(second, "t")
    first.begin()
    t1.insert((42, "first"))
    xid = first.xact.xid
    step = Step(lambda: t2.insert((42, "second")))
    _wait_until_waiting(instance, second.backend.slot, xid)
    if outcome == "commit":
        first.commit()
        with pytest.raises(UniqueViolation):
            step.join()
        assert first.select("t") == [(42, "first")]
    else:
        first.rollback()
        step.join()
        assert first.select("t") == [(42, "second")]
    ix.check_btree(first.backend, "t_a")
    first.backend.xact.commit()
    first.close()
    second.close()
    assert_no_pins(instance)


def test_waits_for_in_progress_delete_of_duplicate(instance):
    """A live row being deleted by a running transaction: wait; the delete commits, so
    the insert succeeds."""
    make_table(instance, "t", [("a", "integer")])
    first = Session(instance, deadlock_timeout=100)
    second = Session(instance, deadlock_timeout=100)
    ix.create_index(first.backend, "t", "t_a", ["a"], unique=True)
    t1, t2 = Table(first, "t"), Table(second, "t")
    tid = t1.insert((3,))
    first.begin()
    t1.delete(tid)
    step = Step(lambda: t2.insert((3,)))
    _wait_until_waiting(instance, second.backend.slot, first.xact.xid)
    first.commit()
    step.join()
    assert first.select("t") == [(3,)]
    ix.check_btree(first.backend, "t_a")
    first.backend.xact.commit()
    first.close()
    second.close()


def test_unique_build(instance):
    make_table(instance, "t", [("a", "integer")])
    s = Session(instance)
    t = Table(s, "t")
    tid = t.insert((1,))
    t.delete(tid)
    t.insert((1,))
    t.insert((None,))
    t.insert((None,))
    ix.create_index(s.backend, "t", "ok", ["a"], unique=True)   # a dead duplicate is fine
    ix.check_btree(s.backend, "ok")
    t.insert((2,))
    s.insert("t", (2,))                 # heap only ("ok" misses it): a live duplicate
    nfiles = len(os.listdir(instance.smgr.base))
    with pytest.raises(UniqueViolation, match=r'"bad": Key \(a\)=\(2\) is duplicated'):
        ix.create_index(s.backend, "t", "bad", ["a"], unique=True)
    assert "bad" not in instance.catalog.indexes
    assert len(os.listdir(instance.smgr.base)) == nfiles   # the half-built file is gone
    s.backend.xact.commit()
    s.close()


def test_the_check_visits_each_heap_page_once_and_makes_no_fstat_per_version(tmp_path,
                                                                           monkeypatch):
    """2002's engine (no HOT, no pruning, no killing): a row updated 300 times has 300 dead
    versions on a few heap pages, each with an index entry the next update's uniqueness
    check must look at.  Batched per leaf page, the check pins each heap page once (not
    once per version) and asks the file's size without a system call."""
    from minidb.instance import Instance
    from minidb.sql.engine import Engine
    with Instance(str(tmp_path / "d"), shared_buffers=256) as inst:
        sess = Session(inst)
        try:
            e = Engine(sess)
            e.execute("CREATE TABLE b (bid integer PRIMARY KEY, bal integer, f char(100))")
            e.execute("INSERT INTO b VALUES (1, 0, 'x')")
            for k, v in (("hot_updates", "off"), ("heap_page_pruning", "off"),
                         ("kill_index_tuples", "off"), ("enable_seqscan", "off")):
                e.execute(f"SET {k} = {v}")
            for _ in range(300):
                e.execute("UPDATE b SET bal = bal + 1 WHERE bid = 1")
            heap_pages = inst.catalog.heap_rel("b")
            nheap = sess.backend.bufmgr.smgr.nblocks(heap_pages.relfilenode)
            calls = []
            real_fstat = os.fstat
            import minidb.index.unique as uq
            visits = []
            real_block = uq.heap_dirty_check_block

            def counting(bm, hrel, block, offsets, *a):
                visits.append(len(offsets))
                return real_block(bm, hrel, block, offsets, *a)
            monkeypatch.setattr(uq, "heap_dirty_check_block", counting)
            monkeypatch.setattr(os, "fstat", lambda fd: calls.append(fd) or real_fstat(fd))
            e.execute("UPDATE b SET bal = bal + 1 WHERE bid = 1")
            monkeypatch.setattr(os, "fstat", real_fstat)
            assert e.execute("SELECT bal FROM b WHERE bid = 1").rows == [(301,)]
        finally:
            sess.close()
    assert nheap < 60
    # before: one heap visit (pin, lock) and one fstat per old version (300 of each)
    assert sum(visits) >= 300 and len(visits) <= nheap, (len(visits), nheap)
    assert len(calls) < 20, len(calls)


def test_old_version_deleted_by_me_is_judged_without_a_horizon(setup, monkeypatch):
    """The unique check of a non-HOT update's new entry meets the row's old version, inserted
    by a committed transaction and deleted by the updater: "deleted by me" (no conflict, not
    dead), decided without computing the global xmin; another backend meeting the same
    version still waits for the updater (the general path)."""
    from minidb.index import unique
    inst, s, t = setup
    tid = t.insert((1, "a"))
    assert t.insert((2, "x" * 7000))[0] == tid[0]   # the page is now nearly full
    assert len(t.rows()) == 2              # a reader sets the inserters' commit hint bits
    calls = []
    real = inst.procarray.global_xmin
    monkeypatch.setattr(inst.procarray, "global_xmin", lambda: calls.append(1) or real())
    s.begin()
    new_tid, hot = t.update(tid, (1, "a" * 2000))  # does not fit on the page: not HOT
    assert not hot and new_tid[0] != tid[0]
    assert calls == []
    bm, xact = s.backend.bufmgr, s.backend.xact
    hrel = t.rel()
    mine = unique.heap_dirty_check(bm, hrel, tid, inst.procarray, inst.clog, (xact.xid,), [])
    assert mine == (False, 0, False)
    assert calls == []
    other = unique.heap_dirty_check(bm, hrel, tid, inst.procarray, inst.clog, (xact.xid + 99,),
                                    [])
    assert other == (False, xact.xid, False)   # someone else waits for my delete
    s.commit()
    assert sorted(t.rows()) == [(1, "a" * 2000), (2, "x" * 7000)]
    ix.check_btree(s.backend, "t_a")
    s.backend.xact.commit()
