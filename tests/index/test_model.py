"""A hypothesis state machine: inserts, deletes, updates (HOT and not), VACUUM, index
scans forward and backward, and an old REPEATABLE READ snapshot, against a
``sortedcontainers.SortedList`` model; ``check_btree`` on both indexes after each run.

Keys are small integers (many duplicates) and, in a second index, long strings (about
seven items per page), so runs split leaves, internal pages and the root.  Killing is on, so scans
mark dead items and later inserts remove them before splitting; the old snapshot must
keep seeing the rows it saw, whatever got killed meanwhile.

What this does not prove: anything about concurrent processes (one backend writes; the
old snapshot is a second backend in the same thread)."""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from sortedcontainers import SortedList

from minidb import index as ix
from minidb.heap.vacuum import vacuum_table
from minidb.instance import Instance
from minidb.session import Session

from tests.index.helpers import Table, make_table

WORDS = ["a" * 900, "b" * 1000, "\u00e9" * 500, "c" * 1100, "a" * 901]


class BTreeMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self):
        self.dir = tempfile.mkdtemp()
        self.inst = Instance(self.dir + "/data", shared_buffers=48)
        make_table(self.inst, "t", [("a", "integer"), ("b", "text"), ("id", "bigint")])
        self.s = Session(self.inst)
        self.t = Table(self.s, "t")
        b = self.s.backend
        ix.create_index(b, "t", "t_a", ["a"])
        ix.create_index(b, "t", "t_ba", ["b", "a"])
        self.model = SortedList()          # (a, id)
        self.rows = {}                     # id -> (tid, row)
        self.next_id = 0
        self.old = None                    # (session, model copy) of an old snapshot

    def teardown(self):
        if getattr(self, "inst", None) is None:
            return
        try:
            if self.old is not None:
                self.old[0].commit()
                self.old[0].close()
            b = self.s.backend
            ix.check_btree(b, "t_a")
            ix.check_btree(b, "t_ba")
            b.xact.commit()
            self.s.close()
        finally:
            self.inst.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(a=st.integers(0, 30), w=st.sampled_from(WORDS), n=st.integers(1, 8))
    def insert(self, a, w, n):
        for k in range(n):
            row = (a + k, w, self.next_id)
            tid = self.t.insert(row)
            self.rows[self.next_id] = (tid, row)
            self.model.add((row[0], self.next_id))
            self.next_id += 1

    @precondition(lambda self: self.rows)
    @rule(data=st.data())
    def delete(self, data):
        rid = data.draw(st.sampled_from(sorted(self.rows)))
        tid, row = self.rows.pop(rid)
        assert self.t.delete(tid)
        self.model.remove((row[0], rid))

    @rule(lo=st.integers(0, 35), span=st.integers(0, 10))
    def delete_range(self, lo, span):
        for a, rid in list(self.model.irange((lo, -1), (lo + span, 1 << 62))):
            tid, _row = self.rows.pop(rid)
            assert self.t.delete(tid)
            self.model.remove((a, rid))

    @precondition(lambda self: self.rows)
    @rule(data=st.data(), change_key=st.booleans(), a=st.integers(0, 30))
    def update(self, data, change_key, a):
        rid = data.draw(st.sampled_from(sorted(self.rows)))
        tid, row = self.rows.pop(rid)
        new = (a if change_key else row[0], row[1], rid)
        new_tid, _hot = self.t.update(tid, new)
        assert new_tid is not None
        self.model.remove((row[0], rid))
        self.model.add((new[0], rid))
        self.rows[rid] = (new_tid, new)

    @rule()
    def vacuum(self):
        b = self.s.backend
        vacuum_table(b, self.s.rel("t"), index_callbacks=ix.index_vacuum_callbacks(b, "t"))

    @rule(lo=st.integers(-1, 40), span=st.integers(0, 40), backward=st.booleans())
    def scan(self, lo, span, backward):
        b = self.s.backend
        hi = lo + span
        rows = [r for _t, r in ix.index_scan(b, "t_a", lo, hi, direction="backward"
                                             if backward else "forward").visible_rows()]
        b.xact.commit()
        keys = [r[0] for r in rows]
        assert keys == sorted(keys, reverse=backward)
        assert sorted((r[0], r[2]) for r in rows) == \
            list(self.model.irange((lo, -1), (hi, 1 << 62)))

    @rule(w=st.sampled_from(WORDS))
    def scan_text(self, w):
        b = self.s.backend
        got = sorted(r[2] for _t, r in ix.index_scan(b, "t_ba", (w,), (w,)).visible_rows())
        b.xact.commit()
        assert got == sorted(rid for rid, (_t, r) in self.rows.items() if r[1] == w)

    @precondition(lambda self: self.old is None)
    @rule()
    def open_old_snapshot(self):
        old = Session(self.inst)
        old.begin("repeatable read")
        old.select("t", lambda r: False)
        self.old = (old, list(self.model))

    @precondition(lambda self: self.old is not None)
    @rule()
    def check_old_snapshot(self):
        old, saved = self.old
        rows = [r for _t, r in ix.index_scan(old.backend, "t_a").visible_rows()]
        assert sorted((r[0], r[2]) for r in rows) == saved

    @precondition(lambda self: self.old is not None)
    @rule()
    def close_old_snapshot(self):
        self.old[0].commit()
        self.old[0].close()
        self.old = None

    @invariant()
    def no_locks_held(self):
        if getattr(self, "inst", None) is not None:
            assert not self.inst.seg.buf_lock_shared.any()
            assert (self.inst.seg.buf_lock_excl == -1).all()


BTreeMachine.TestCase = pytest.mark.slow(BTreeMachine.TestCase)
BTreeMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestBTreeModel = BTreeMachine.TestCase
