"""HeapScan's small-batch path (``_read_small``) and MVCCFilter's (``_small``) against the
vectorized paths (``_read_pages``, the numpy filter).

What is proven here: for tables of one to a few pages holding tuples in every MVCC state
(committed, aborted, in progress, updated, HOT-updated, deleted, some NULLs, pruned line
pointers), a scan through the small-batch path and one through the vectorized path
(``SMALL_SCAN_PAGES = 0``, ``FILTER_SCALAR_MAX = -1``), started from the same page bytes
with the same snapshot, return the same batches (values, NULL masks, TIDs) and leave the
same pages (hint bits, pruning), the same buffer flags and usage counts, the same backend
counters (buffers hit and read, ...) and the same scan / filter counters; also with a pushed-down filter, with
``batch_pages`` cutting the table into several runs, and on a cold pool (the pages read
from the file).  Nothing stays pinned or locked.  Not proven: speed (bench/oltp_bench.py).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minidb.heap import heapam
from minidb.heap import mvcc as mvcc_mod
from minidb.heap.mvcc import MVCCFilter, seq_scan
from minidb.heap.prune import heap_page_prune_opt
from minidb.instance import Instance
from minidb.session import Session
from minidb.sql import Engine
from tests.conftest import assert_no_pins_in, copy_datadir

_names = itertools.count()


def _build(inst, ops, seed_rows: int):
    """A table ``t<n>`` (id, val, note) shaped by ``ops``; returns (name, open session
    holding an uncommitted change or None)."""
    name = f"t{next(_names)}"
    s = Session(inst)
    e = Engine(s)
    e.execute(f"CREATE TABLE {name} (id integer, val integer, note text)")
    if seed_rows:
        e.execute(f"INSERT INTO {name} VALUES " + ", ".join(
            f"({g}, {g * 10}, {'NULL' if g % 3 == 0 else repr('n' + str(g))})"
            for g in range(1, seed_rows + 1)))
    for op, k in ops:
        if op == "update":
            e.execute(f"UPDATE {name} SET val = val + 1 WHERE id % {k} = 0")
        elif op == "delete":
            e.execute(f"DELETE FROM {name} WHERE id % {k + 7} = 1")
        elif op == "aborted":
            e.execute("BEGIN")
            e.execute(f"INSERT INTO {name} VALUES ({1000 + k}, 0, 'x')")
            e.execute(f"UPDATE {name} SET val = 0 WHERE id % {k} = 2")
            e.execute("ROLLBACK")
        elif op == "insert":
            e.execute(f"INSERT INTO {name} VALUES "
                      + ", ".join(f"({g}, 0, 'i')" for g in range(1, k + 1)))
    s.close()
    open_s = None
    if any(op == "open" for op, _ in ops):
        open_s = Session(inst)
        oe = Engine(open_s)
        oe.execute("BEGIN")
        oe.execute(f"UPDATE {name} SET val = -1 WHERE id % 4 = 0")
        oe.execute(f"INSERT INTO {name} VALUES (-5, -5, NULL)")
    return name, open_s


def _save(bm, rel):
    out = []
    for blk in range(bm.smgr.nblocks(rel.relfilenode)):
        b = bm.pin(rel.relfilenode, blk)
        out.append((blk, b, bm.page(b).copy(), int(bm.seg.buf_flags[b]),
                    int(bm.seg.buf_usage[b])))
        bm.unpin(b)
    return out


def _restore(bm, saved):
    for _blk, b, page, flags, usage in saved:
        bm.page(b)[:] = page
        bm.seg.buf_flags[b] = flags
        bm.seg.buf_usage[b] = usage


def _run(backend, rel, snap, small: bool, monkeypatch, *, prune: bool, pushed: bool,
         batch_pages: int):
    """One scan; what it returned and what it left behind."""
    monkeypatch.setattr(heapam, "SMALL_SCAN_PAGES", 4 if small else 0)
    monkeypatch.setattr(mvcc_mod, "FILTER_SCALAR_MAX", 64 if small else -1)
    bm = backend.bufmgr
    stats0 = bm.stats.copy()
    hook = (lambda bufs, first: heap_page_prune_opt(backend, rel, bufs, first)) if prune \
        else None
    if pushed:
        mvcc = MVCCFilter(bm, snap, backend.instance.clog)

        def flt(views, starts, bufs):   # a pushed-down "val % 2 = 0", then visibility
            vals = rel.layout.gather(views, starts, [1])[0][0]
            out = np.zeros(len(starts), dtype=bool)
            idx = np.flatnonzero(vals % 2 == 0)
            if idx.size:
                out[idx[mvcc(views, starts[idx], bufs)]] = True
            return out
        scan = hs = heapam.HeapScan(backend, rel, [0, 1, 2], tuple_filter=flt, prepare_pages=hook,
                                    batch_pages=batch_pages)
        filt = mvcc
    else:
        scan = seq_scan(backend, rel, [0, 1, 2], snap, prepare_pages=hook,
                        batch_pages=batch_pages)
        hs, filt = scan.heap_scan, scan.filter
    batches = []
    for b in scan:
        cols = [(v.tolist(), None if m is None else m.tolist()) for v, m in b.columns]
        batches.append((cols, b.blocks.tolist(), b.offsets.tolist()))
    pages = [bm.page(b)[8:].copy() for _blk, b, *_ in _save(bm, rel)]  # without pd_lsn
    saved = _save(bm, rel)
    return {"batches": batches,
            "pages": [p.tobytes() for p in pages],
            "flags": [s[3] for s in saved], "usage": [s[4] for s in saved],
            "stats": (bm.stats - stats0).tolist(),
            "scan": (hs.pages_scanned, hs.tuples_seen),
            "filter": (filt.hint_writes, filt.hinted_pages, filt.tuples_checked,
                       filt.fast_batches)}


def _both(inst, name, monkeypatch, open_s, **kw):
    with inst.connect() as backend:
        rel = inst.catalog.heap_rel(name)
        bm = backend.bufmgr
        snap = backend.xact.start_statement()
        saved = _save(bm, rel)
        try:
            vec = _run(backend, rel, snap, False, monkeypatch, **kw)
            _restore(bm, saved)
            small = _run(backend, rel, snap, True, monkeypatch, **kw)
        finally:
            backend.xact.command_done(False)
            backend.xact.commit()
    if open_s is not None:
        open_s.close()
    assert_no_pins_in(inst)
    return vec, small


_ops = st.lists(st.tuples(st.sampled_from(["update", "delete", "aborted", "insert", "open"]),
                          st.integers(2, 9)), max_size=5)


@pytest.fixture(scope="module")
def shared_inst(tmp_path_factory):
    inst = Instance(tmp_path_factory.mktemp("small") / "data", shared_buffers=128)
    try:
        yield inst
    finally:
        inst.close()


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=_ops, rows=st.integers(0, 260), prune=st.booleans(), pushed=st.booleans(),
       batch_pages=st.sampled_from([1, 2, 3, 512]))
def test_small_path_equals_vectorized_path(shared_inst, monkeypatch, ops, rows, prune, pushed,
                                           batch_pages):
    name, open_s = _build(shared_inst, ops, rows)
    vec, small = _both(shared_inst, name, monkeypatch, open_s, prune=prune, pushed=pushed,
                       batch_pages=batch_pages)
    assert small == vec


def test_small_path_is_taken_and_sets_hint_bits(shared_inst, monkeypatch):
    """A one-page table freshly updated: the small path runs (no pin_run), sets the same
    hints as the vectorized one, and counts one buffer hit per page."""
    name, _ = _build(shared_inst, [("update", 2), ("aborted", 3)], 40)
    calls = []
    real = heapam.HeapScan._read_small

    def spy(self, block, count):
        calls.append((block, count))
        return real(self, block, count)
    monkeypatch.setattr(heapam.HeapScan, "_read_small", spy)
    vec, small = _both(shared_inst, name, monkeypatch, None, prune=False, pushed=False,
                       batch_pages=512)
    assert calls == [(0, 1)]
    assert small == vec
    assert small["filter"][0] > 0                    # hint bits were written
    from minidb.shmem import C
    assert small["stats"][C["buffers_hit"]] >= 1


def test_cold_pool_reads_the_same(tmp_path, monkeypatch):
    """Pages not in the pool: both paths read them (buffers_read) and return the same."""
    data = tmp_path / "data"
    with Instance(data, shared_buffers=64) as inst:
        name, _ = _build(inst, [("update", 3)], 200)   # a few pages
    for small in (False, True):   # each run on its own copy: the first one's hints are
        copy_datadir(data, tmp_path / f"copy{small}")   # written back at close
    results = []
    for small in (False, True):
        with Instance(tmp_path / f"copy{small}", shared_buffers=64) as inst, \
                inst.connect() as backend:
            rel = inst.catalog.heap_rel(name)
            assert 1 < backend.bufmgr.smgr.nblocks(rel.relfilenode) <= 4
            snap = backend.xact.start_statement()
            results.append(_run(backend, rel, snap, small, monkeypatch, prune=False,
                                pushed=False, batch_pages=512))
            backend.xact.command_done(False)
            backend.xact.commit()
    from minidb.shmem import C
    assert results[1] == results[0]
    assert results[1]["stats"][C["buffers_read"]] == len(results[1]["pages"])
