"""Parallel sequential scans: the block allocator, and scans by the leader and pool workers.

Allocator tests (no processes): every block handed out exactly once for many (nblocks,
participants, start block, policy) combinations and random interleavings, including start
blocks that make a chunk straddle the end of the table; the end-of-scan syncscan report
happens exactly once; PostgreSQL 14's chunk sizes and ramp-down points (the reference's
worked examples); ``next_run`` hands out the same blocks as ``next_block``.

Scan tests (real worker processes of an instance's pool): a parallel scan returns exactly
the rows of a serial scan on one snapshot, and its participants together scan every block
exactly once, for tables of 0, 1, 63, 64, 65 and more blocks, every chunk policy and 0 to
3 workers; aggregates equal numpy's; a worker sees the leader's uncommitted rows and not
another transaction's; a worker's error reaches the leader as the same exception;
KeyboardInterrupt (and closing the generator) stops the workers; a worker that dies is
noticed; the pool's processes are gone after close.  Under the I/O model, ``block``
allocation over two workers makes at least ten times the seeks of ``pg14``.

What these tests do not prove: speed (see bench/parallel_bench.py), or fairness of the
tail (the ramp-down is checked on positions, not on time).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import numpy as np
import pytest

from minidb.errors import DataError, DivisionByZero, OperationalError
from minidb.heap.heapam import heap_bulk_insert, heap_insert
from minidb.heap.mvcc import seq_scan
from minidb.heap.parallel import (INVALID_BLOCK, BlockAllocator, SharedScan,
                                  initial_chunk_size)
from minidb.heap.syncscan import SyncScanTable
from minidb.instance import Instance
from minidb.exec.gather import Aggregate, ParallelSeqScan
from minidb.workers.pool import process_alive

from tests.conftest import assert_no_pins_in, create_table


# ---------------------------------------------------------------------------------------------
# the allocator, without processes
class _Seg:
    def __init__(self, slots=2):
        self.pscan = np.zeros((slots, 16), dtype=np.int64)
        self.syncscan = np.full((20, 3), -1, dtype=np.int64)
        self.syncscan_clock = np.zeros(1, dtype=np.int64)


class _Locks:
    def __init__(self):
        self.pscan = [threading.Lock() for _ in range(4)]
        self.syncscan = threading.Lock()


def _scan(nblocks, policy="pg14", *, syncscan=False, max_chunk=8192, fixed=64, nchunks=2048,
          hint=None):
    seg, locks = _Seg(), _Locks()
    ss = SyncScanTable(seg, locks.syncscan)
    if hint is not None:
        ss.get_location(7, nblocks)
        assert ss.report_location(7, hint)
    shared = SharedScan.acquire(seg, locks, owner=os.getpid())
    shared.initialize(7, nblocks, policy=policy, max_chunk=max_chunk, fixed_chunk=fixed,
                      nchunks=nchunks, syncscan=syncscan)
    return shared, ss


def _participants(shared, ss, k, record=True):
    ps = [BlockAllocator(shared, ss, participant=i, record=record) for i in range(k)]
    for p in ps:
        p.startblock_init()
    return ps


def _drive(ps, rng, by_run=False, max_n=7):
    """Random interleaving until every participant is done; returns blocks per participant."""
    got = [[] for _ in ps]
    live = list(range(len(ps)))
    while live:
        i = rng.choice(live)
        if by_run:
            r = ps[i].next_run(max_n)
            if r is None:
                live.remove(i)
            else:
                got[i].extend(range(r[0], r[0] + r[1]))
        else:
            b = ps[i].next_block()
            if b is None:
                live.remove(i)
            else:
                got[i].append(b)
    return got


@pytest.mark.parametrize("policy", ["block", "fixed", "pg14"])
def test_every_block_exactly_once_for_many_shapes(policy):
    rng = random.Random(1234)
    shapes = [(0, 1), (1, 1), (1, 3), (2, 2), (15, 4), (16, 2), (17, 3), (63, 2), (64, 4),
              (65, 3), (100, 2), (129, 5), (4095, 3), (4096, 2), (4097, 4), (9000, 3)]
    for nblocks, k in shapes:
        for hint in (None, 0, 16, 48, 4080):
            if hint is not None and hint >= max(nblocks, 1):
                continue
            for by_run in (False, True):
                shared, ss = _scan(nblocks, policy, syncscan=hint is not None, fixed=5,
                                   hint=hint)
                ps = _participants(shared, ss, k)
                got = _drive(ps, rng, by_run=by_run)
                flat = sorted(b for g in got for b in g)
                assert flat == list(range(nblocks)), (policy, nblocks, k, hint, by_run)
                assert sum(p.blocks for p in ps) == nblocks
                if hint is not None and nblocks:
                    assert {p.start_block for p in ps} == {hint}
                    assert sum(p.end_reported for p in ps) == 1
                # the shared counter overshoots by at most one chunk per participant
                assert nblocks <= shared.nallocated <= nblocks + sum(
                    max(p.initial_chunk, 1) for p in ps)


def test_chunks_follow_the_start_block_and_wrap():
    """A synchronized scan starts at the hint; the chunk crossing the end is split into a
    tail run and a head run, and positions map to (n + start) % nblocks."""
    shared, ss = _scan(100, "fixed", syncscan=True, fixed=16, hint=80)
    (p,) = _participants(shared, ss, 1)
    assert p.start_block == 80
    runs = []
    while (r := p.next_run(1000)) is not None:
        runs.append(r)
    assert runs == [(80, 16), (96, 4), (0, 12), (12, 16), (28, 16), (44, 16), (60, 16),
                    (76, 4)]
    assert p.end_reported
    # the end-of-scan report restored the start block as the hint
    assert ss.get_location(7, 100) == 80


def test_next_run_hands_out_what_next_block_would():
    """Whole chunks at a time, in the same order of participants: identical blocks."""
    for policy, nblocks, start in (("pg14", 20000, 0), ("pg14", 9000, 4000), ("fixed", 1000, 48),
                                   ("block", 50, 16)):
        order = random.Random(nblocks).choices(range(3), k=100000)
        results = []
        for by_run in (False, True):
            shared, ss = _scan(nblocks, policy, syncscan=start > 0, fixed=24,
                               hint=start if start else None)
            ps = _participants(shared, ss, 3, record=False)
            got = [[] for _ in ps]
            done = set()
            for i in order:
                if len(done) == 3:
                    break
                if i in done:
                    continue
                p = ps[i]
                while True:  # one whole chunk (or the end)
                    if by_run:
                        r = p.next_run(1 << 30)
                        blocks = None if r is None else list(range(r[0], r[0] + r[1]))
                    else:
                        b = p.next_block()
                        blocks = None if b is None else [b]
                    if blocks is None:
                        done.add(i)
                        break
                    got[i].extend(blocks)
                    if p.chunk_remaining == 0:
                        break
            results.append(got)
        assert results[0] == results[1], policy


def test_next_runs_hands_out_what_next_run_would():
    """``next_runs`` (a warm batch's runs under one lock acquisition) gives the runs that
    consecutive ``next_run`` calls give, ramp-down, the end of a synchronized scan and its
    syncscan reports included; interleaved with other participants, every block goes out
    exactly once."""
    rng = random.Random(77)
    cases = [("pg14", 20000, None), ("pg14", 9000, 4000), ("pg14", 4097, None),
             ("pg14", 300_000, 1008), ("pg14", 2000, 1936),
             ("fixed", 1000, 48), ("block", 50, 16), ("pg14", 1, None), ("pg14", 0, None)]
    for policy, nblocks, hint in cases:
        seqs = []
        for batched in (False, True):
            shared, ss = _scan(nblocks, policy, syncscan=hint is not None, fixed=24, hint=hint)
            (p,) = _participants(shared, ss, 1)
            want = random.Random(nblocks)
            got, reports = [], []
            while True:
                m = want.choice((1, 7, 64, 450))
                if batched:
                    runs, ended = p.next_runs(m)
                else:
                    runs, ended, total = [], False, 0
                    while total < m:
                        r = p.next_run(m - total)
                        if r is None:
                            ended = True
                            break
                        runs.append(r)
                        total += r[1]
                merged = []  # next_runs returns a stretch of consecutive chunks as one run
                for f, k in runs:
                    if merged and merged[-1][0] + merged[-1][1] == f:
                        merged[-1] = (merged[-1][0], merged[-1][1] + k)
                    else:
                        merged.append((f, k))
                got.append(merged)
                p.pages_read(sum(k for _, k in runs))  # the test reads what it took
                reports.append(ss.get_location(7, max(nblocks, 1)) if hint is not None else 0)
                if ended:
                    break
            seqs.append((got, reports, p.runs, p.chunks, p.end_reported, shared.nallocated))
        assert seqs[0] == seqs[1], (policy, nblocks, hint)
    for policy, nblocks, hint in cases:
        shared, ss = _scan(nblocks, policy, syncscan=hint is not None, fixed=24, hint=hint)
        ps = _participants(shared, ss, 3)
        live, blocks = [0, 1, 2], []
        while live:
            i = rng.choice(live)
            if rng.random() < 0.5:
                runs, ended = ps[i].next_runs(rng.choice((1, 9, 100)))
            else:
                r = ps[i].next_run(rng.choice((1, 9, 100)))
                runs, ended = ([] if r is None else [r]), r is None
            blocks.extend(b for f, k in runs for b in range(f, f + k))
            if ended:
                live.remove(i)
        assert sorted(blocks) == list(range(nblocks)), (policy, nblocks, hint)
        if hint is not None and nblocks:
            assert sum(p.end_reported for p in ps) == 1


def test_a_batch_of_whole_chunks_leaves_no_piece_to_the_next():
    """``whole_chunks(n)``: a warm batch of that many blocks ends where a chunk does, so
    the next batch does not start with the piece of a chunk - a run of its own once the
    other participants have moved the shared counter on (one more pin_run per batch).
    Interleaved with another participant, every batch taken so is one run, and every block
    still goes out once."""
    rng = random.Random(5)
    for nblocks, policy in ((20000, "pg14"), (5000, "fixed"), (3000, "pg14")):
        shared, ss = _scan(nblocks, policy, fixed=24)
        ps = _participants(shared, ss, 2)
        ps[0].next_runs(5)                       # each holds a piece of a chunk
        ps[1].next_runs(3)
        blocks, live, split = [], [0, 1], 0
        for p, k in ((ps[0], 5), (ps[1], 3)):
            blocks.extend(range(p.runs[0][0], p.runs[0][0] + k))
        while live:
            i = rng.choice(live)
            p = ps[i]
            want = rng.choice((100, 450, 1000))
            k = p.whole_chunks(want)
            assert 0 < k <= want
            piece = p.chunk_remaining
            runs, ended = p.next_runs(k)
            blocks.extend(b for f, n in runs for b in range(f, f + n))
            if ended:
                live.remove(i)
                continue
            if k < want:                         # rounded: the batch ended at a chunk's end
                assert p.chunk_remaining == 0
            merged = []                          # as HeapScan queues them for pin_run
            for f, n in runs:
                if merged and merged[-1][0] + merged[-1][1] == f:
                    merged[-1][1] += n
                else:
                    merged.append([f, n])
            assert len(merged) <= (1 if piece == 0 else 2)   # new chunks are one stretch
            split += len(merged) == 2
        assert split <= 2      # only the batches after the pieces taken before the loop
        assert sorted(blocks) == list(range(nblocks)), (policy, nblocks)


def test_position_is_reported_when_pages_are_read_not_when_handed_out():
    """A reader that tells the allocator what it read (``pages_read``, as ``HeapScan``
    does): a run taken ahead is not reported until it is read, the reports follow the
    reads in the order handed out (a run read in pieces reports its pieces), and the end
    of the scan is reported only after the last pages the drawing participant was handed
    have been read - so its own page reports never overwrite the start block."""
    shared, ss = _scan(100, "fixed", syncscan=True, fixed=40, hint=16)
    (p,) = _participants(shared, ss, 1)
    assert ss.get_location(7, 100) == 16
    assert p.next_run(40) == (16, 40)          # blocks 16 .. 55, nothing read yet
    assert ss.get_location(7, 100) == 16       # (the hint is where the scan started)
    p.pages_read(20)                           # 16 .. 35 read
    assert ss.get_location(7, 100) == 32
    p.pages_read(20)                           # 36 .. 55
    assert ss.get_location(7, 100) == 48
    runs, ended = p.next_runs(1000)            # the rest, and the end, in one call
    assert ended and runs == [(56, 40), (96, 4), (0, 16)]
    assert not p.end_reported and p.end_pending
    assert ss.get_location(7, 100) == 48       # handed out, not read: nothing reported
    p.pages_read(44)                           # 56 .. 99: 96 is the last multiple of 16
    assert ss.get_location(7, 100) == 96 and not p.end_reported
    p.pages_read(16)                           # 0 .. 15: then the end, the start block
    assert p.end_reported and not p.end_pending
    assert ss.get_location(7, 100) == 16


def test_a_reader_that_does_not_report_has_read_what_it_asks_past():
    """Without ``pages_read`` (a caller of ``next_block`` or ``next_run`` alone), the pages
    handed out count as read at the next request, and at the end the end report follows
    them: PostgreSQL's rhythm."""
    shared, ss = _scan(64, "fixed", syncscan=True, fixed=32, hint=0)
    (p,) = _participants(shared, ss, 1)
    assert p.next_run(32) == (0, 32)
    ss.report_location(7, 48)                  # another scan's report, meanwhile
    assert p.next_run(32) == (32, 32)          # asking again: 0 .. 31 were read
    assert ss.get_location(7, 64) == 16
    assert p.next_run(32) is None and p.end_reported
    assert ss.get_location(7, 64) == 0


def test_pg14_chunk_sizes_and_ramp_down_follow_postgres():
    # worked examples of the reference (section 12.4)
    for nblocks, chunk in ((100, 1), (4096, 2), (100_000, 64), (164_000, 128),
                           (1_000_000, 512), (20_000_000, 8192)):
        assert initial_chunk_size("pg14", nblocks, 8192, 64) == chunk
    assert initial_chunk_size("pg14", 20_000_000, 1000, 64) == 1000
    assert initial_chunk_size("block", 20_000_000, 8192, 64) == 1
    assert initial_chunk_size("fixed", 20_000_000, 8192, 64) == 64
    assert initial_chunk_size("pg14", 100_000, 8192, 64, nchunks=100) == 1024
    # ramp-down for nblocks = 100,000, C = 64, one participant: the chunk size in force
    # for each chunk, by the position the participant had reached when it took the chunk
    shared, ss = _scan(100_000, "pg14")
    (p,) = _participants(shared, ss, 1, record=False)
    sizes = []
    while True:
        last = p.nallocated
        r = p.next_run(1 << 30)
        if r is None:
            break
        sizes.append((last, p.chunk_size))
    limits = {64: 95_904, 32: 97_952, 16: 98_976, 8: 99_488, 4: 99_744, 2: 99_872}
    for last, size in sizes:
        if size > 1:
            assert last <= limits[size], (last, size)
        if size < 64:
            assert last > limits[size * 2] - size * 2, (last, size)
    assert [s for _, s in sizes][-1] == 1
    assert sorted({s for _, s in sizes}) == [1, 2, 4, 8, 16, 32, 64]


def test_startblock_is_set_once_and_late_values_are_dropped():
    shared, ss = _scan(1000, "pg14", syncscan=True, hint=160)
    a = BlockAllocator(shared, ss)
    assert shared.start_block == INVALID_BLOCK
    assert a.startblock_init() == 160
    ss.report_location(7, 320)  # the hint moves; a later participant keeps the scan's start
    b = BlockAllocator(shared, ss)
    assert b.startblock_init() == 160


def test_cancel_stops_participants_between_runs():
    shared, ss = _scan(1000, "fixed", fixed=10)
    (p,) = _participants(shared, ss, 1, record=False)
    assert p.next_run(4) == (0, 4)
    shared.cancel()
    assert p.next_run(4) is None and p.next_run(4) is None


def test_slots_are_reused_and_a_dead_owners_slot_is_reclaimed():
    seg, locks = _Seg(slots=2), _Locks()
    a = SharedScan.acquire(seg, locks)
    b = SharedScan.acquire(seg, locks)
    with pytest.raises(OperationalError, match="no free parallel scan slot"):
        SharedScan.acquire(seg, locks)
    a.release()
    c = SharedScan.acquire(seg, locks)
    assert c.slot == a.slot and c.gen == a.gen + 1
    a.release()  # a stale handle releases nothing
    assert seg.pscan[c.slot, 0] == 1
    seg.pscan[b.slot, 1] = 2 ** 22 + 12345  # an owner pid that does not exist
    d = SharedScan.acquire(seg, locks)
    assert d.slot == b.slot


# ---------------------------------------------------------------------------------------------
# scans with worker processes
COLS = [("id", "integer", True), ("v", "bigint"), ("pad", "character(100)")]


@pytest.fixture(scope="module")
def pinst(tmp_path_factory):
    inst = Instance(tmp_path_factory.mktemp("par") / "data", shared_buffers=256,
                    max_connections=8, max_worker_processes=4)
    try:
        yield inst
    finally:
        inst.close()


def _rows_per_page(inst) -> int:
    rel = create_table(inst, f"probe_{os.getpid()}_{time.monotonic_ns()}", COLS)
    with inst.connect() as be:
        _load(be, rel, 0, 1000)
        return 1000 // be.bufmgr.smgr.nblocks(rel.relfilenode)


def _load(be, rel, lo, n, nulls=False):
    ids = np.arange(lo, lo + n, dtype=np.int32)
    v = (ids.astype(np.int64) * 7919) % 1000 - 500
    cols = {"id": ids, "v": v, "pad": [""] * n}
    if nulls:
        cols["v"] = [None if i % 5 == 0 else int(x) for i, x in zip(ids.tolist(), v.tolist())]
    heap_bulk_insert(be, rel, cols, n, xmin=2)


_TABLES: dict = {}


def _table(inst, nblocks):
    """A table of exactly ``nblocks`` blocks (made once per module)."""
    if nblocks not in _TABLES:
        rpp = _TABLES.setdefault("rpp", _rows_per_page(inst))
        rel = create_table(inst, f"t{nblocks}", COLS)
        with inst.connect() as be:
            for i in range(nblocks):  # a bulk insert starts a new page: one page per call
                _load(be, rel, i * rpp, rpp, nulls=True)
            assert be.bufmgr.smgr.nblocks(rel.relfilenode) == nblocks
        _TABLES[nblocks] = rel
    return _TABLES[nblocks]


def _serial_ids(be, rel, snap=None):
    out = []
    for b in seq_scan(be, rel, ["id"], snap):
        out.append(b.columns[0][0])
    return np.sort(np.concatenate(out)) if out else np.empty(0, dtype=np.int32)


def _parallel(be, rel, cols, **kw):
    ps = ParallelSeqScan(be, rel, cols, record_runs=True, **kw)
    parts = [b for b in ps.rows()]
    return ps, parts


@pytest.mark.parametrize("nblocks", [0, 1, 63, 64, 65, 300])
def test_parallel_scan_returns_the_serial_rows_and_scans_each_block_once(pinst, nblocks):
    rel = _table(pinst, nblocks)
    with pinst.connect() as be:
        expect = _serial_ids(be, rel)
        for policy in ("block", "fixed", "pg14"):
            for nworkers in (0, 1, 2, 3):
                be.settings.set("parallel_chunk_policy", policy)
                be.settings.set("parallel_fixed_chunk_blocks", 7)
                ps, parts = _parallel(be, rel, ["id"], nworkers=nworkers)
                got = np.sort(np.concatenate([b.columns[0][0] for b in parts])) if parts \
                    else np.empty(0, dtype=np.int32)
                assert np.array_equal(got, expect), (policy, nworkers)
                st = ps.stats
                assert st.workers_launched == nworkers
                assert len(st.participants) == nworkers + 1
                visits = sorted(b for p in st.participants for f, k in p.runs
                                for b in range(f, f + k))
                assert visits == list(range(nblocks)), (policy, nworkers)
                assert st.total("pages") == nblocks
                assert st.total("buffers_hit") + st.total("buffers_read") == nblocks
        be.xact.rollback()
        assert_no_pins_in(pinst)


def test_aggregates_match_numpy_with_nulls_and_a_predicate(pinst):
    rel = _table(pinst, 300)
    with pinst.connect() as be:
        rows = [b for b in seq_scan(be, rel, ["id", "v"])]
        ids = np.concatenate([b.columns[0][0] for b in rows])
        v = np.concatenate([b.columns[1][0] for b in rows])
        vnull = np.concatenate([b.columns[1][1] for b in rows])
        keep = ids % 3 != 0
        vv = v[keep & ~vnull]
        aggs = [Aggregate("count"), Aggregate("count", 1), Aggregate("sum", 1),
                Aggregate("min", 1), Aggregate("max", 1), Aggregate("avg", 1),
                Aggregate("max", 0)]
        for nworkers in (0, 2, 3):
            ps = ParallelSeqScan(be, rel, ["id", "v"], predicate=NotMultipleOf(3),
                                 aggregates=aggs, nworkers=nworkers)
            got = ps.aggregate()
            assert got == [int(keep.sum()), len(vv), int(vv.sum()), int(vv.min()),
                           int(vv.max()), pytest.approx(vv.mean()), int(ids[keep].max())]
            assert ps.stats.workers_launched == nworkers
        # no rows: count 0, the others NULL
        ps = ParallelSeqScan(be, rel, ["id", "v"], predicate=NotMultipleOf(1),
                             aggregates=aggs, nworkers=2)
        assert ps.aggregate() == [0, 0, None, None, None, None, None]
        be.xact.rollback()


class NotMultipleOf:
    """A picklable predicate (sent to the workers): id % k != 0."""

    def __init__(self, k):
        self.k = k

    def __call__(self, cols):
        return cols[0][0] % self.k != 0


class FailInWorker:
    """Raises the given error class in worker processes only."""

    def __init__(self, leader_pid, exc):
        self.leader_pid = leader_pid
        self.exc = exc

    def __call__(self, cols):
        if os.getpid() != self.leader_pid:
            raise self.exc("division by zero in a worker")
        return np.ones(len(cols[0][0]), dtype=bool)


class Slow:
    """Sleeps on every batch (so that a scan is still running when it is cancelled)."""

    def __init__(self, seconds=0.05):
        self.seconds = seconds

    def __call__(self, cols):
        time.sleep(self.seconds)
        return np.ones(len(cols[0][0]), dtype=bool)


def test_workers_see_the_leaders_snapshot(pinst):
    rel = _table(pinst, 65)
    with pinst.connect() as be, pinst.connect() as other:
        other.xact.start_statement()
        xo = other.xact.xid_for_write()
        for i in range(100):
            heap_insert(other, rel, (10_000_000 + i, 0, ""), xmin=xo)
        be.xact.begin()
        snap = be.xact.start_statement()
        xid = be.xact.xid_for_write()
        for i in range(200):
            heap_insert(be, rel, (20_000_000 + i, 0, ""), xmin=xid, cmin=0)
        be.xact.command_done(True)
        snap = be.xact.start_statement()  # sees its own inserts (cid 1), not other's
        expect = _serial_ids(be, rel, snap)
        assert (expect >= 20_000_000).sum() == 200 and not ((expect >= 10_000_000)
                                                           & (expect < 20_000_000)).any()
        be.settings.set("parallel_leader_participation", False)  # workers' rows only
        for policy in ("block", "pg14"):
            be.settings.set("parallel_chunk_policy", policy)
            ps, parts = _parallel(be, rel, ["id"], snapshot=snap, nworkers=3)
            got = np.sort(np.concatenate([b.columns[0][0] for b in parts]))
            assert np.array_equal(got, expect)
            assert all(b.participant.startswith("worker") for b in parts)
        be.xact.rollback()
        other.xact.rollback()


def test_a_workers_error_reaches_the_leader_as_the_same_exception(pinst):
    rel = _table(pinst, 300)
    with pinst.connect() as be:
        for exc in (DivisionByZero, ValueError):
            ps = ParallelSeqScan(be, rel, ["id"], predicate=FailInWorker(os.getpid(), exc),
                                 aggregates=[Aggregate("count")], nworkers=2)
            with pytest.raises(exc) as info:
                ps.aggregate()
            if exc is DivisionByZero:
                assert info.value.sqlstate == "22012"
                assert isinstance(info.value, DataError)
            assert "parallel worker" in "".join(getattr(info.value, "__notes__", []))
            assert "FailInWorker" not in str(info.value)
            assert "division by zero" in info.value.worker_traceback
        _pool_settles(pinst)
        # the pool still works afterwards
        ps = ParallelSeqScan(be, rel, ["id"], aggregates=[Aggregate("count")], nworkers=2)
        assert ps.aggregate()[0] == len(_serial_ids(be, rel))
        be.xact.rollback()
        assert_no_pins_in(pinst)


def _pool_settles(inst, timeout=5.0):
    """Every claimed worker is given back (no leader owns one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(s in ("idle", "unstarted") for s in inst.pool.states()):
            return
        time.sleep(0.01)
    raise AssertionError(f"pool did not settle: {inst.pool.states()}")


def test_closing_the_generator_early_stops_the_workers(pinst):
    rel = _table(pinst, 300)
    with pinst.connect() as be:
        be.settings.set("parallel_chunk_policy", "block")
        ps = ParallelSeqScan(be, rel, ["id"], predicate=Slow(), nworkers=3)
        gen = ps.rows()
        next(gen)
        gen.close()
        assert ps.stats.total("blocks") < 300  # stopped early
        assert all(p.cancelled for p in ps.stats.participants)
        _pool_settles(pinst)
        be.xact.rollback()
        assert_no_pins_in(pinst)


def test_keyboard_interrupt_in_the_leader_stops_the_workers(pinst):
    """Ctrl-C (a real SIGINT to this process) while the leader waits for its workers'
    messages: sent on the leader's first wait, so both workers are surely launched and,
    slowed to 0.2 s a batch, surely still scanning (a timer raced with the workers' start
    on a loaded machine)."""
    rel = _table(pinst, 300)
    with pinst.connect() as be:
        be.settings.set("parallel_chunk_policy", "block")
        be.settings.set("parallel_leader_participation", False)
        ps = ParallelSeqScan(be, rel, ["id"], predicate=Slow(0.2), nworkers=2,
                             aggregates=[Aggregate("count")])
        real_poll, fired = ps._poll, []

        def poll(pool, active, task_id, timeout, partial):
            if timeout > 0 and not fired:   # the leader waits: every worker is running
                fired.append(len(active))
                os.kill(os.getpid(), signal.SIGINT)
            yield from real_poll(pool, active, task_id, timeout, partial)
        ps._poll = poll
        # Python raises KeyboardInterrupt only where SIGINT was not ignored when it
        # started (a shell ignores it for background jobs, as CI's may): install the
        # handler for this test, whatever the process inherited
        old_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            with pytest.raises(KeyboardInterrupt):
                ps.aggregate()
        finally:
            signal.signal(signal.SIGINT, old_handler)
        assert fired == [2] and ps.stats.workers_launched == 2
        assert ps.stats.total("blocks") < 300
        assert len(ps.stats.participants) == 2 and all(p.cancelled
                                                      for p in ps.stats.participants)
        _pool_settles(pinst)
        assert all(process_alive(p) for p in pinst.pool.worker_pids())  # not killed
        be.xact.rollback()
        assert_no_pins_in(pinst)


class DieInWorker:
    """Ends the worker process abruptly (os._exit) at its second batch: the predicate runs
    after the batch's pins and locks were released, so the death leaves nothing held.
    (A process killed while it holds a buffer partition lock or a buffer's I/O leaves them
    held for good: minidb has no crash restart.)"""

    def __init__(self, leader_pid):
        self.leader_pid = leader_pid
        self.calls = 0

    def __call__(self, cols):
        self.calls += 1
        if os.getpid() != self.leader_pid and self.calls > 1:
            os._exit(3)
        return np.ones(len(cols[0][0]), dtype=bool)


def test_a_worker_that_dies_is_noticed_and_replaced(pinst):
    rel = _table(pinst, 300)
    with pinst.connect() as be:
        be.settings.set("parallel_chunk_policy", "block")
        be.settings.set("parallel_leader_participation", False)
        ps = ParallelSeqScan(be, rel, ["id"], predicate=DieInWorker(os.getpid()), nworkers=1)
        with pytest.raises(OperationalError, match="exited unexpectedly"):
            for _ in ps.rows():
                pass
        assert ps.stats.workers_launched == 1
        _pool_settles(pinst)
        # its backend slot is freed (4 workers need all 4 worker slots), and the next scan
        # starts a new worker in its place
        ps = ParallelSeqScan(be, rel, ["id"], aggregates=[Aggregate("count")], nworkers=4)
        assert ps.aggregate()[0] == len(_serial_ids(be, rel))
        assert ps.stats.workers_launched == 4
        be.xact.rollback()
    assert_no_pins_in(pinst)


def test_leaders_in_threads_and_forked_processes_share_the_pool(pinst):
    rel = _table(pinst, 300)
    with pinst.connect() as be:
        n = len(_serial_ids(be, rel))
        be.xact.rollback()
    results, errors = [], []

    def lead():
        try:
            with pinst.connect() as b:
                for _ in range(3):
                    ps = ParallelSeqScan(b, rel, ["id"], aggregates=[Aggregate("count")],
                                         nworkers=2)
                    results.append((ps.aggregate()[0], ps.stats.workers_launched))
                b.xact.rollback()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    r, w = ctx.Pipe(duplex=False)

    def child():
        try:
            with pinst.connect() as b:
                ps = ParallelSeqScan(b, rel, ["id"], aggregates=[Aggregate("count")],
                                     nworkers=2)
                w.send((ps.aggregate()[0], ps.stats.workers_launched))
                b.xact.rollback()
        except BaseException as e:  # noqa: BLE001
            w.send(repr(e))

    procs = [ctx.Process(target=child, daemon=True) for _ in range(2)]
    for p in procs:
        p.start()
    threads = [threading.Thread(target=lead) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    got = [r.recv() for _ in procs] if r.poll(60) else []
    for p in procs:
        p.join(10)
    assert not errors, errors
    assert len(got) == 2 and all(isinstance(g, tuple) and g[0] == n for g in got), got
    assert all(c == n for c, _ in results) and len(results) == 6
    # four leaders asked for 2 workers each from a pool of 4: some got fewer, none more
    assert all(0 <= k <= 2 for _, k in results + got)
    _pool_settles(pinst)


def test_max_parallel_workers_bounds_the_workers_launched(pinst):
    rel = _table(pinst, 65)
    with pinst.connect() as be:
        be.settings.set("max_parallel_workers", 1)
        ps = ParallelSeqScan(be, rel, ["id"], aggregates=[Aggregate("count")], nworkers=3)
        ps.aggregate()
        assert (ps.stats.workers_planned, ps.stats.workers_launched) == (3, 1)
        be.settings.set("max_parallel_workers", 0)
        ps = ParallelSeqScan(be, rel, ["id"], aggregates=[Aggregate("count")], nworkers=3)
        assert ps.aggregate()[0] > 0 and ps.stats.workers_launched == 0
        be.xact.rollback()


def test_without_a_free_scan_slot_the_leader_scans_alone(pinst):
    rel = _table(pinst, 65)
    taken = []
    try:
        while True:
            try:
                taken.append(SharedScan.acquire(pinst.seg, pinst.locks))
            except OperationalError:
                break
        assert len(taken) == pinst.seg.pscan.shape[0]
        with pinst.connect() as be:
            ps = ParallelSeqScan(be, rel, ["id"], aggregates=[Aggregate("count")],
                                 nworkers=2)
            assert ps.aggregate() == [len(_serial_ids(be, rel))]
            assert ps.stats.workers_launched == 0 and "slot" in ps.stats.reason
            be.xact.rollback()
    finally:
        for t in taken:
            t.release()


def test_no_pool_means_the_leader_scans_alone(tmp_path):
    with Instance(tmp_path / "d", shared_buffers=64, max_worker_processes=0) as inst:
        assert inst.pool is None
        rel = create_table(inst, "t", COLS)
        with inst.connect() as be:
            _load(be, rel, 0, 500)
            ps = ParallelSeqScan(be, rel, ["id"], aggregates=[Aggregate("count")], nworkers=2)
            assert ps.aggregate() == [500]
            assert ps.stats.workers_launched == 0 and "max_worker_processes" in ps.stats.reason


def test_pool_processes_are_gone_after_close(tmp_path):
    inst = Instance(tmp_path / "d", shared_buffers=64, max_connections=4,
                    max_worker_processes=3)
    rel = create_table(inst, "t", COLS)
    with inst.connect() as be:
        _load(be, rel, 0, 2000)
        ps = ParallelSeqScan(be, rel, ["id"], aggregates=[Aggregate("count")], nworkers=3)
        assert ps.aggregate() == [2000] and ps.stats.workers_launched == 3
    pids = inst.pool.worker_pids() + [inst.pool.master_pid]
    assert len(pids) == 4 and all(process_alive(p) for p in pids)
    assert inst.pool.states().count("idle") == 3
    inst.close()
    assert not any(process_alive(p) for p in pids)
    # a new instance on the directory finds every worker slot free
    with Instance(tmp_path / "d", shared_buffers=64, max_connections=4,
                  max_worker_processes=3) as inst2:
        assert inst2.pool.states() == ["unstarted"] * 3
        assert (inst2.seg.proc_pid == 0).all()


# ---------------------------------------------------------------------------------------------
# the I/O pattern: block allocation defeats read-ahead
def _alternating_scan(inst, nblocks: int, policy: str, participants: int = 2) -> dict:
    """Participants in threads (each its own read-ahead stream) take turns, one chunk each,
    through the real allocator and the real I/O model; each reads its chunk as a scan
    through a 32-buffer ring does (runs of at most 16 blocks).  Returns the counters."""
    import queue

    shared = SharedScan.acquire(inst.seg, inst.locks)
    shared.initialize(99, nblocks, policy=policy)
    io = inst.iomodel
    seen = []

    def participant(i, go: queue.Queue, done: queue.Queue):
        alloc = BlockAllocator(shared, None, participant=i)
        alloc.startblock_init()
        while go.get():
            more = True
            while True:  # one whole chunk
                r = alloc.next_run(16)
                if r is None:
                    more = False
                    break
                io.read(99, 0, r[0], r[1], nblocks)
                seen.extend(range(r[0], r[0] + r[1]))
                if alloc.chunk_remaining == 0:
                    break
            done.put(more)

    inst.drop_os_cache()
    before = inst.io_counters()
    chans = [(queue.Queue(), queue.Queue()) for _ in range(participants)]
    threads = [threading.Thread(target=participant, args=(i, *chans[i]))
               for i in range(participants)]
    for t in threads:
        t.start()
    active = list(range(participants))
    while active:
        for i in list(active):
            chans[i][0].put(True)
            if not chans[i][1].get(timeout=30):
                active.remove(i)
                chans[i][0].put(False)
    for t in threads:
        t.join(10)
    shared.release()
    assert sorted(seen) == list(range(nblocks))
    after = inst.io_counters()
    return {k: after[k] - before[k] for k in after}


def test_block_allocation_over_two_workers_seeks_ten_times_more_than_pg14(tmp_path):
    """18,432 blocks, so that pg14's chunks (nblocks / 2048 -> 16 blocks) are as large as
    Linux's read-ahead window; a fast disk, since the counters do not depend on its speed.

    The two participants alternate chunk by chunk, as PostgreSQL's do on two idle cores.
    With real worker processes on this 2-core machine (shared with other work) a worker
    is often descheduled for milliseconds, and the other then takes consecutive single
    blocks and earns read-ahead; that depends on the scheduler, so it is measured by
    bench/parallel_bench.py, not asserted here."""
    # without the drive's read-ahead cache, which would serve the participants' alternate
    # single blocks without seeks (a real drive's cache does: the requests still show it),
    # and with per-file read-ahead (Linux's ondemand read-ahead follows the participants'
    # shared stream through the page cache: tests/storage/test_iomodel.py)
    with Instance(tmp_path / "d", shared_buffers=64, max_worker_processes=0,
                  io_model="custom", io_seq_mb_per_s=20000, io_seek_ms=0.01,
                  io_readahead_kb=128, os_cache_mb=16, io_drive_cache_kb=0,
                  io_readahead_policy="perfile") as inst:
        got = {policy: _alternating_scan(inst, 18_432, policy)
               for policy in ("pg14", "block")}
        for d in got.values():
            assert d["cache_hits"] + d["cache_misses"] == 18_432
            assert d["bytes"] == 8192 * (d["cache_misses"] + d["readahead_pages"])
        # block: every participant read is a lone block (its stream never continues)
        assert got["block"]["requests"] >= 18_432 // 2
        assert got["block"]["seeks"] >= 10 * got["pg14"]["seeks"], got
        # pg14: one request per chunk of 16 (and the ramp-down's smaller ones)
        assert got["pg14"]["requests"] <= 18_432 // 16 + 400


@pytest.mark.slow
def test_parallel_scan_under_the_io_model_reads_every_block_once(tmp_path):
    """Real workers, cold: every block is demanded from the OS cache exactly once, and
    the disk reads what was missed plus what read-ahead fetched."""
    inst = Instance(tmp_path / "d", shared_buffers=256, max_connections=4,
                    max_worker_processes=2, io_model="custom", io_seq_mb_per_s=20000,
                    io_seek_ms=0.01, io_readahead_kb=128, os_cache_mb=2)
    try:
        rel = create_table(inst, "wide", [("id", "integer"), ("pad", "character(1800)")])
        with inst.connect() as be:
            n = 2000 * 4
            heap_bulk_insert(be, rel, {"id": np.arange(n, dtype=np.int32),
                                              "pad": [""] * n}, n, xmin=2)
            nblocks = be.bufmgr.smgr.nblocks(rel.relfilenode)
            be.bufmgr.flush_buffers()
            for policy in ("pg14", "block", "fixed"):
                be.bufmgr.drop_relation_buffers(rel.relfilenode)
                inst.drop_os_cache()
                be.settings.set("parallel_chunk_policy", policy)
                before = inst.io_counters()
                ps = ParallelSeqScan(be, rel, ["id"], aggregates=[Aggregate("count")],
                                     nworkers=2)
                assert ps.aggregate() == [n]
                d = {k: v - before[k] for k, v in inst.io_counters().items()}
                assert d["cache_misses"] + d["cache_hits"] == nblocks
                assert d["bytes"] == 8192 * (d["cache_misses"] + d["readahead_pages"])
                assert d["requests"] >= 1 and d["seeks"] <= d["requests"]
                assert sum(p.io["cache_misses"] + p.io["cache_hits"]
                           for p in ps.stats.participants) == nblocks
            be.xact.rollback()
    finally:
        inst.close()


# ---------------------------------------------------------------------------------------------
# CPU per page: decode batches do not depend on the allocation policy
def _cold_batches(inst, rel, nblocks: int, policy: str | None, **shape) -> tuple[int, int]:
    """(decode batches, rows) of one cold scan of ``rel`` by a single participant with a
    ring (``policy``; None: the serial scan)."""
    from minidb.heap.heapam import HeapScan
    with inst.connect() as be:
        be.bufmgr.flush_buffers()
        be.bufmgr.drop_relation_buffers(rel.relfilenode)
        src = None
        shared = None
        if policy is not None:
            shared = SharedScan.acquire(inst.seg, inst.locks)
            shared.initialize(rel.relfilenode, nblocks, policy=policy, **shape)
            src = BlockAllocator(shared, None)
            src.startblock_init()
        try:
            hs = HeapScan(be, rel, [0], use_ring=True, syncscan=False, block_source=src)
            rows = sum(len(b) for b in hs)
        finally:
            if shared is not None:
                shared.release()
        assert hs.pages_scanned == nblocks
        return hs.batches_read, rows


def test_decode_batches_do_not_depend_on_the_allocation_policy(tmp_path):
    """A cold scan through a 32-buffer ring (256 kB) decodes 16 pages a batch (half the ring),
    whether its runs are single blocks (``block``), chunks or the serial range: a
    single-block run no longer ends its batch, so CPU per page is the same."""
    with Instance(tmp_path / "d", shared_buffers=512, max_connections=4,
                  max_worker_processes=0) as inst:
        rel = create_table(inst, "t", [("id", "integer"), ("pad", "character(200)")])
        with inst.connect() as be:
            n = 32 * 160
            heap_bulk_insert(be, rel, {"id": np.arange(n, dtype=np.int32), "pad": [""] * n},
                             n, xmin=2)
            nblocks = be.bufmgr.smgr.nblocks(rel.relfilenode)
        assert nblocks == 160
        got = {p: _cold_batches(inst, rel, nblocks, p)
               for p in (None, "block", "fixed", "pg14")}
        assert {rows for _, rows in got.values()} == {n}
        batches = {p: b for p, (b, _) in got.items()}
        assert batches["block"] == batches["fixed"] == batches["pg14"] == batches[None], batches
        assert batches["block"] == nblocks // 16


def test_a_bad_page_in_a_read_batch_fails_the_scan_and_leaves_no_pins(tmp_path):
    """A participant's single-block reads are verified together at the end of the batch:
    a corrupted page there raises DataCorrupted (naming the block), and every buffer of
    the batch is unpinned and usable again."""
    from minidb.errors import DataCorrupted
    with Instance(tmp_path / "d", shared_buffers=512, max_connections=4,
                  max_worker_processes=0) as inst:
        rel = create_table(inst, "t", [("id", "integer"), ("pad", "character(200)")])
        with inst.connect() as be:
            n = 32 * 64
            heap_bulk_insert(be, rel, {"id": np.arange(n, dtype=np.int32), "pad": [""] * n},
                             n, xmin=2)
            be.bufmgr.flush_buffers()
            be.bufmgr.drop_relation_buffers(rel.relfilenode)
        with open(inst.smgr.path(rel.relfilenode), "r+b") as f:
            f.seek(37 * 8192 + 5000)
            f.write(b"\xff" * 16)
        with pytest.raises(DataCorrupted, match="block 37"):
            _cold_batches(inst, rel, 64, "block")
        assert_no_pins_in(inst)
        # the pages before and after still read; the bad one fails again
        with inst.connect() as be:
            with pytest.raises(DataCorrupted):
                be.bufmgr.pin(rel.relfilenode, 37)
            b = be.bufmgr.pin(rel.relfilenode, 38)
            be.bufmgr.unpin(b)
        assert_no_pins_in(inst)


def test_a_warm_parallel_scan_pins_and_decodes_like_the_serial_scan(tmp_path):
    """Warm (every page in the pool, through a bulk-read ring): a participant takes a
    batch's chunks at once and pins them with as few ``pin_run`` calls as the serial scan
    makes (it used to pin half a ring at a time: one call per 16 pages), decodes in as many
    batches, and with a worker the participants' pages add up to the table, nothing is
    read, and the rows are the serial scan's on the same snapshot."""
    with Instance(tmp_path / "d", shared_buffers=2048, max_connections=4,
                  max_worker_processes=1) as inst:
        rel = create_table(inst, "t", [("id", "integer"), ("pad", "character(200)")])
        with inst.connect() as be:
            n = 32 * 600
            heap_bulk_insert(be, rel, {"id": np.arange(n, dtype=np.int32), "pad": [""] * n},
                             n, xmin=2)
            bm = be.bufmgr
            nblocks = bm.smgr.nblocks(rel.relfilenode)
            assert nblocks == 600 and nblocks > bm.nbuffers // 4  # a ring scan
            assert sum(len(b) for b in seq_scan(be, rel, ["id"], use_ring=False)) == n
            calls = []
            real = bm.pin_run

            def counting(*a, **k):
                bufs = real(*a, **k)
                calls.append(len(bufs))
                return bufs
            bm.pin_run = counting
            try:
                snap = be.xact.current_snapshot()
                expect = _serial_ids(be, rel, snap)
                serial_calls = len(calls)
                reads = be.counters()["buffers_read"]
                calls.clear()
                ps, parts = _parallel(be, rel, ["id"], snapshot=snap, nworkers=0)
                # (chunks of 1 block here: the first run, still "cold", is one pin)
                assert nblocks - 1 <= sum(calls) <= nblocks
                assert len(calls) <= serial_calls + 1, (calls, serial_calls)
                assert ps.stats.total("pages") == nblocks
                ps, parts = _parallel(be, rel, ["id"], snapshot=snap, nworkers=1)
            finally:
                del bm.pin_run
            assert be.counters()["buffers_read"] == reads
            st = ps.stats
            assert st.workers_launched == 1
            assert sum(p.pages for p in st.participants) == nblocks
            assert st.total("buffers_read") == 0
            assert st.total("buffers_hit") == nblocks
            got = np.sort(np.concatenate([b.columns[0][0] for b in parts]))
            assert np.array_equal(got, expect)
            be.xact.rollback()


def test_a_scan_tells_its_block_source_what_it_read(tmp_path):
    """``HeapScan`` tells its block source, after each pin, how many of the blocks it was
    handed it has now read (``pages_read``): cold and warm, the counts add up to the
    table, and the synchronized scan's reported position is always a block already read
    (it never runs ahead of the reads); the end report, the start block, comes last."""
    from minidb.heap.heapam import HeapScan

    class Recording(BlockAllocator):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.read: list[int] = []     # blocks read, in order
            self.bad: list = []

        def pages_read(self, n):
            handed = [b for f, k in self.runs for b in range(f, f + k)]
            self.read.extend(handed[len(self.read):len(self.read) + n])
            super().pages_read(n)
            hint = ss.get_location(rel.relfilenode, nblocks)
            if hint not in self.read:
                self.bad.append((hint, len(self.read)))

    with Instance(tmp_path / "d", shared_buffers=2048, max_connections=4,
                  max_worker_processes=0) as inst:
        rel = create_table(inst, "t", [("id", "integer"), ("pad", "character(200)")])
        with inst.connect() as be:
            n = 32 * 600
            heap_bulk_insert(be, rel, {"id": np.arange(n, dtype=np.int32), "pad": [""] * n},
                             n, xmin=2)
            be.bufmgr.flush_buffers()
            be.bufmgr.drop_relation_buffers(rel.relfilenode)
            nblocks = be.bufmgr.smgr.nblocks(rel.relfilenode)
            ss = SyncScanTable(inst.seg, inst.locks.syncscan)
            ss.get_location(rel.relfilenode, nblocks)
            ss.report_location(rel.relfilenode, 160)
            for temperature in ("cold", "warm"):
                shared = SharedScan.acquire(inst.seg, inst.locks)
                try:
                    shared.initialize(rel.relfilenode, nblocks, policy="fixed",
                                      fixed_chunk=64, syncscan=True)
                    src = Recording(shared, ss, record=True)
                    assert src.startblock_init() == 160
                    hs = HeapScan(be, rel, [0], use_ring=True, block_source=src)
                    assert sum(len(b) for b in hs) == n
                finally:
                    shared.release()
                assert sorted(src.read) == list(range(nblocks)), temperature
                assert src.read == [b for f, k in src.runs for b in range(f, f + k)]
                assert src.bad == [], temperature
                assert src.end_reported and ss.get_location(rel.relfilenode, nblocks) == 160


# ---------------------------------------------------------------------------------------------
# block allocation paced by reads
class _Unpaced:
    """A block source that hides ``paced_by_reads`` (the scan then does not wait for a
    read before it takes the next block: the rhythm before pacing), for comparison."""

    def __init__(self, alloc):
        self._a = alloc
        self.nblocks = alloc.nblocks
        self.next_run = alloc.next_run
        self.next_runs = alloc.next_runs


def _threaded_block_scan(inst, rel, nblocks: int, participants: int = 2,
                         paced: bool = True) -> tuple[list[list[int]], list]:
    """Cold scan of ``rel`` by ``participants`` threads (each its own backend and read-ahead
    stream, as processes are) through one ``block``-policy allocator: (each participant's
    blocks in the order it took them, each participant's HeapScan)."""
    from minidb.heap.heapam import HeapScan
    with inst.connect() as be:
        be.bufmgr.flush_buffers()
        be.bufmgr.drop_relation_buffers(rel.relfilenode)
    inst.drop_os_cache()
    shared = SharedScan.acquire(inst.seg, inst.locks)
    shared.initialize(rel.relfilenode, nblocks, policy="block")
    taken: list[list[int]] = [[] for _ in range(participants)]
    scans: list = [None] * participants
    errors: list = []
    start = threading.Barrier(participants)

    def participant(i):
        try:
            alloc = BlockAllocator(shared, None, participant=i, record=True)
            alloc.startblock_init()
            with inst.connect() as be:
                hs = HeapScan(be, rel, [0], use_ring=True, syncscan=False,
                              block_source=alloc if paced else _Unpaced(alloc))
                scans[i] = hs
                start.wait()
                for _ in hs:
                    pass
            taken[i] = [b for first, k in alloc.runs for b in range(first, first + k)]
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=participant, args=(i,)) for i in range(participants)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        shared.release()
    assert not errors, errors
    assert sorted(b for t in taken for b in t) == list(range(nblocks))
    return taken, scans


def _continuing_share(taken: list[list[int]]) -> float:
    """Of the blocks taken once every participant had taken one, the share that continue
    the same participant's previous block (what its file descriptor sees as sequential)."""
    joined = max(t[0] for t in taken)
    follow = total = 0
    for t in taken:
        prev = None
        for b in t:
            if b > joined:
                total += 1
                follow += prev is not None and b == prev + 1
            prev = b
    return follow / total


def test_block_allocation_paced_by_reads_alternates_the_participants(tmp_path):
    """Two participants of a ``block`` scan, each read costing 0.8 ms of device latency
    (less than the 1 ms slices in which the I/O model collects owed time) and no
    read-ahead: each takes its next block only after its previous read completed, so the
    two take blocks nearly in turns - few of a participant's blocks continue its own
    previous block, the strided pattern of seed 002 - while the pages are still decoded
    in batches: as many decode batches as a serial scan's.  (Unpaced, the same scan gave
    55-76% at 0.4-0.8 ms; paced 1-13%: the bound leaves room for a loaded machine.)"""
    with Instance(tmp_path / "d", shared_buffers=512, max_connections=6,
                  max_worker_processes=0, io_model="custom", io_seq_mb_per_s=2000,
                  io_seek_ms=0.8, io_rotational=False, io_queue_depth=32,
                  io_readahead_kb=0, os_cache_mb=4, io_readahead_policy="perfile") as inst:
        rel = create_table(inst, "t", [("id", "integer"), ("pad", "character(200)")])
        with inst.connect() as be:
            n = 32 * 192
            heap_bulk_insert(be, rel, {"id": np.arange(n, dtype=np.int32), "pad": [""] * n},
                             n, xmin=2)
            nblocks = be.bufmgr.smgr.nblocks(rel.relfilenode)
        assert nblocks == 192
        taken, scans = _threaded_block_scan(inst, rel, nblocks)
        assert all(len(t) > nblocks // 4 for t in taken), [len(t) for t in taken]
        share = _continuing_share(taken)
        assert share < 0.5, share
        # every participant waited for its reads (each of its blocks was a miss)
        assert all(hs.paced_waits >= len(t) // 4 for hs, t in zip(scans, taken)), \
            [(hs.paced_waits, len(t)) for hs, t in zip(scans, taken)]
        # decode batches: a participant's pages in batches of half its ring (16), not one
        # batch per single-block run
        assert all(hs.batches_read <= -(-len(t) // 16) + 2 for hs, t in zip(scans, taken))


def test_a_paced_scan_takes_each_block_after_its_previous_read_completed(tmp_path):
    """One participant of a ``block`` scan, 0.9 ms a read (no read-ahead; just under the
    1 ms slice in which ``read`` itself sleeps, and far above a block's CPU even on a loaded
    machine, so the waits counted do not depend on the load): whenever it asks
    the allocator for a block, the I/O model owes it at most ``PACE_WAKE_EARLY_S`` (its
    previous read has completed, up to the sleep's least overshoot); its decode batches
    are a serial scan's (16 pages).  A chunked scan is not paced (no waits)."""
    from minidb.heap.heapam import HeapScan
    from minidb.storage.iomodel import PACE_WAKE_EARLY_S
    with Instance(tmp_path / "d", shared_buffers=512, max_connections=4,
                  max_worker_processes=0, io_model="custom", io_seq_mb_per_s=2000,
                  io_seek_ms=0.9, io_rotational=False, io_queue_depth=32,
                  io_readahead_kb=0, os_cache_mb=4) as inst:
        rel = create_table(inst, "t", [("id", "integer"), ("pad", "character(200)")])
        with inst.connect() as be:
            n = 32 * 64
            heap_bulk_insert(be, rel, {"id": np.arange(n, dtype=np.int32), "pad": [""] * n},
                             n, xmin=2)
            nblocks = be.bufmgr.smgr.nblocks(rel.relfilenode)
        io = inst.iomodel
        got = {}
        for policy in ("block", "fixed"):
            with inst.connect() as be:
                be.bufmgr.flush_buffers()
                be.bufmgr.drop_relation_buffers(rel.relfilenode)
                inst.drop_os_cache()
                shared = SharedScan.acquire(inst.seg, inst.locks)
                shared.initialize(rel.relfilenode, nblocks, policy=policy)
                alloc = BlockAllocator(shared, None)
                alloc.startblock_init()
                owed = []
                take = alloc.next_run

                def next_run(max_n, take=take, owed=owed):
                    owed.append(io.owed())
                    return take(max_n)
                alloc.next_run = next_run
                try:
                    hs = HeapScan(be, rel, [0], use_ring=True, syncscan=False,
                                  block_source=alloc)
                    assert sum(len(b) for b in hs) == n
                finally:
                    shared.release()
                got[policy] = (hs.paced_waits, hs.batches_read, owed)
        waits, batches, owed = got["block"]
        assert len(owed) >= nblocks
        assert max(owed) <= PACE_WAKE_EARLY_S, max(owed)
        # nearly every block (not after a decode batch, nor when the reader was descheduled
        # until its read had completed anyway)
        assert waits >= nblocks // 4, waits
        assert batches == got["fixed"][1] == nblocks // 16
        assert got["fixed"][0] == 0


def _lockstep_batches(inst, rel, nblocks: int, participants: int) -> list[list[int]]:
    """Two participants' warm scans through one pg14 allocator, one batch each in turn
    (equal speeds): the pages of every batch each decoded, per participant."""
    from minidb.heap.heapam import HeapScan
    shared = SharedScan.acquire(inst.seg, inst.locks)
    shared.initialize(rel.relfilenode, nblocks, policy="pg14")
    sizes: list[list[int]] = [[], []]
    bes = [inst.connect(), inst.connect()]
    try:
        scans, its = [], []
        for be in bes:
            alloc = BlockAllocator(shared, None)
            alloc.participants = participants
            alloc.startblock_init()
            hs = HeapScan(be, rel, [0], syncscan=False, block_source=alloc)
            scans.append(hs)
            its.append(iter(hs))
        live = [0, 1]
        while live:
            for i in list(live):
                before = scans[i].pages_scanned
                if next(its[i], None) is None:
                    live.remove(i)
                else:
                    sizes[i].append(scans[i].pages_scanned - before)
    finally:
        for be in bes:
            be.close()
        shared.release()
    assert sum(map(sum, sizes)) == nblocks
    return sizes


def test_shared_warm_scan_batches_shrink_near_the_end(tmp_path):
    """With others sharing the block source, a participant's warm batch takes at most half
    of what is left near the end (down to TAIL_BATCH_PAGES): in lockstep the two last
    batches are small, so neither participant idles while the other decodes a whole
    batch.  Alone (participants 1), batches stay whole."""
    from minidb.heap.heapam import TAIL_BATCH_PAGES
    with Instance(tmp_path / "d", shared_buffers=2400, max_connections=4,
                  max_worker_processes=1) as inst:
        rel = create_table(inst, "t", [("id", "integer"), ("pad", "character(200)")])
        with inst.connect() as be:
            n = 32 * 2000
            heap_bulk_insert(be, rel, {"id": np.arange(n, dtype=np.int32), "pad": [""] * n},
                             n, xmin=2)
            nblocks = be.bufmgr.smgr.nblocks(rel.relfilenode)
            target = be.bufmgr.max_batch_pins
            assert nblocks >= 4 * target > 8 * TAIL_BATCH_PAGES
            assert sum(len(b) for b in seq_scan(be, rel, ["id"], use_ring=False)) == n
        whole = _lockstep_batches(inst, rel, nblocks, participants=1)
        shared = _lockstep_batches(inst, rel, nblocks, participants=2)
    # alone: every batch but the very last of the scan is a whole one
    assert sorted(s for p in whole for s in p[:-1]) [0] == target
    # shared: both end on a small batch, and the two ends are close
    ends = [p[-1] for p in shared]
    assert max(ends) <= 2 * TAIL_BATCH_PAGES, shared
    assert abs(sum(shared[0]) - sum(shared[1])) <= 2 * TAIL_BATCH_PAGES + target // 2, shared
    assert sum(len(p) for p in shared) <= sum(len(p) for p in whole) + 12
