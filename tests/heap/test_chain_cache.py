"""The HOT chain walk's dead-run cache (``minidb.heap.mvcc``, "Skipping the dead run").

What is proven here:
  * on random histories of one page (two rows updated HOT, deleted, committed or aborted,
    with synchronous_commit on or off, the WAL flushed or not, the page pruned or vacuumed
    between walks - so slots are reused), for RR snapshots held from several moments, a
    new snapshot and the writer's own: the walk through the cache (kept across the whole
    history, as a backend keeps it) returns exactly what the full walk from the root
    returns - the version found and its bytes, ``all_dead``, the hint bits it writes (the
    page bytes after), whether it wrote any, and the commit log's hint counters;
  * the cache is used: a walk of a long chain of committed updates starts past the dead
    run (the entry remembers it), for an unhinted run (asynchronous commit, WAL unflushed)
    and a hinted one; a remembered member that pruning removed is not trusted (the entry
    goes and the walk starts at the root);
(The point path and the index scans with the backend's cache against the same without
it: tests/exec/test_point.py.)
"""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minidb.catalog import ColumnDef
from minidb.heap.mvcc import _walk_chain, hot_search_page
from minidb.heap.prune import prune_page
from minidb.heap.vacuum import vacuum_table
from minidb.instance import Instance
from minidb.session import Session
from minidb.storage.bufmgr import SHARE

_CLOG_COUNTERS = ("hint_checks", "hints_deferred")


def _open(path, **kw):
    return Instance(path, shared_buffers=64, heap_page_pruning=False, max_worker_processes=0,
                    wal_writer_delay=10000, **kw)


def _make(inst):
    inst.catalog.create_table("t", [ColumnDef("id", "integer"), ColumnDef("val", "integer")])
    return inst.catalog.heap_rel("t")


def _compare(inst, be, rel, roots, snap, cache) -> list:
    """Walk every root with ``snap``: the full walk on a copy of the page, then the cached
    walk on the page itself; assert they agree.  Returns the answers."""
    bm = be.bufmgr
    clog, procarray = inst.clog, inst.procarray
    out = []
    b = bm.pin_lock(rel.relfilenode, 0, SHARE)
    try:
        page = bm.page_view(b)
        for off in roots:
            copy = bytearray(page)
            c0 = clog.stats()
            ref_hinted: list = []
            ref = _walk_chain(copy, 0, off, snap, clog, procarray, None, False, ref_hinted)
            c1 = clog.stats()
            hinted: list = []
            got = hot_search_page(page, 0, off, snap, clog, procarray, hinted, cache,
                                  rel.relfilenode)
            c2 = clog.stats()
            if hinted:
                bm.mark_dirty_hint(b)
            assert got == ref
            assert bytes(page) == bytes(copy)
            assert bool(hinted) == bool(ref_hinted)
            for name in _CLOG_COUNTERS:
                assert c2[name] - c1[name] == c1[name] - c0[name], name
            out.append(got)
    finally:
        bm.unlock_unpin(b)
    return out


def _prune(inst, be, rel) -> None:
    bm = be.bufmgr
    b = bm.pin(rel.relfilenode, 0)
    try:
        bm.lock_for_cleanup(b)
        try:
            prune_page(be, rel, b, inst.procarray.global_xmin())
        finally:
            bm.unlock(b)
    finally:
        bm.unpin(b)


END = st.sampled_from(["commit", "commit", "commit", "abort", "open"])
OPS = st.lists(st.one_of(
    # a writer's statement, then it commits, aborts or keeps its transaction open; so
    # many times
    st.tuples(st.just("update"), st.integers(0, 1), END, st.integers(1, 8)),
    st.tuples(st.just("update"), st.integers(0, 1), END, st.integers(1, 8)),
    st.tuples(st.just("delete"), st.integers(0, 1), END, st.just(1)),
    st.tuples(st.just("end"), st.booleans()),        # the writer commits (True) or aborts
    st.just(("snap",)), st.just(("drop",)), st.just(("flush",)), st.just(("prune",)),
    st.just(("vacuum",))), min_size=2, max_size=30)


_HYP = dict(deadline=None, suppress_health_check=list(HealthCheck))


@settings(max_examples=25, **_HYP)
@given(ops=OPS, sync=st.booleans())
def test_cached_walk_equals_full_walk_on_random_histories(ops, sync):
    _history(ops, sync)


@pytest.mark.long
@settings(max_examples=300, **_HYP)
@given(ops=OPS, sync=st.booleans())
def test_cached_walk_equals_full_walk_on_random_histories_long(ops, sync):
    _history(ops, sync)


def _history(ops, sync):
    with tempfile.TemporaryDirectory() as d, _open(d + "/data") as inst:
        rel = _make(inst)
        w = Session(inst, synchronous_commit=sync)
        roots = [w.insert("t", (k, 0))[1] for k in range(2)]
        readers: list[Session] = []
        cache: dict = {}
        val = 0
        with inst.connect() as be, Session(inst) as fresh:
            def walk_all():
                snaps = [s.xact.current_snapshot() for s in readers]
                fresh_snap = fresh.xact.start_statement()
                snaps.append(fresh_snap)
                own = w.xact.in_block
                if own:
                    snaps.append(w.xact.start_statement())
                try:
                    for snap in snaps:
                        _compare(inst, be, rel, roots, snap, cache)
                finally:
                    if own:
                        w.xact.command_done(False)
                    fresh.xact.command_done(False)
                    fresh.xact.commit()

            for op in ops:
                kind = op[0]
                if kind in ("update", "delete"):
                    for _ in range(op[3]):       # that many transactions
                        if not w.xact.in_block:
                            w.begin()
                        val += 1
                        if kind == "update":
                            w.update("t", lambda row, k=op[1]: row[0] == k,
                                     lambda row, v=val: (row[0], v))
                        else:
                            w.delete("t", lambda row, k=op[1]: row[0] == k)
                        if op[2] != "open":
                            w.commit() if op[2] == "commit" else w.rollback()
                elif kind == "end":
                    if w.xact.in_block:
                        w.commit() if op[1] else w.rollback()
                elif kind == "snap":
                    s = Session(inst)
                    s.begin("repeatable read")
                    s.select("t")
                    readers.append(s)
                    if len(readers) > 3:
                        readers.pop(0).close()
                elif kind == "drop":
                    if readers:
                        readers.pop(0).close()
                elif kind == "flush":
                    inst.wal.flush(inst.wal.insert_lsn())
                elif kind == "prune":
                    _prune(inst, be, rel)
                elif kind == "vacuum":
                    if not w.xact.in_block:
                        vacuum_table(be, rel)
                walk_all()                       # after every step
        for s in readers:
            s.close()
        if w.xact.in_block:
            w.rollback()
        w.close()


def _long_chain(inst, n):
    rel = _make(inst)
    w = Session(inst, synchronous_commit=False)
    root = w.insert("t", (1, 0))[1]
    for k in range(1, n + 1):
        w.update("t", None, lambda row, k=k: (row[0], k))
    w.close()
    return rel, root


def test_a_walk_starts_past_the_dead_run(tmp_path):
    with _open(tmp_path / "d") as inst, inst.connect() as be, Session(inst) as r:
        rel, root = _long_chain(inst, 12)
        assert not inst.clog.commit_hints_ok()        # the updates' commits are unflushed
        cache: dict = {}
        snap = r.xact.start_statement()
        first = _compare(inst, be, rel, [root], snap, cache)
        (entry,) = cache.values()
        m_off, _xmin, _xmax, before, _max, before_hinted = entry
        assert before == 11 and not before_hinted     # the last dead member, 11 ahead of it
        again = _compare(inst, be, rel, [root], snap, cache)
        assert again == first and first[0][0] is not None
        assert cache[(rel.relfilenode, 0, root)] == entry
        r.xact.command_done(False)
        r.xact.commit()
        # once the WAL is flushed the full walk hints the run (the cached one must too:
        # the entry is not used while hints may be set), and remembers a hinted run
        inst.wal.flush(inst.wal.insert_lsn())
        snap = r.xact.start_statement()
        tip = first[0][0]
        assert _compare(inst, be, rel, [root], snap, cache)[0][0] == tip
        assert cache[(rel.relfilenode, 0, root)][-1] is True
        assert _compare(inst, be, rel, [root], snap, cache)[0][0] == tip
        r.xact.command_done(False)
        r.xact.commit()
        # pruning removes the remembered member: the entry is dropped, the answer the same
        _prune(inst, be, rel)
        snap = r.xact.start_statement()
        assert _compare(inst, be, rel, [root], snap, cache)[0][0] == tip
        assert (rel.relfilenode, 0, root) not in cache or \
            cache[(rel.relfilenode, 0, root)][0] != m_off
        r.xact.command_done(False)
        r.xact.commit()
