"""MVCC read paths: the visibility-filtered sequential scan and the HOT chain walk.

This module joins the heap (pages, tuples, ``HeapScan``) to the transaction layer
(snapshots, the commit log, ``minidb.txn.visibility``).  It has three readers:

* ``seq_scan`` - a sequential scan that returns the rows a snapshot sees;
* ``heap_hot_search`` - PostgreSQL's ``heap_hot_search_buffer``: from a TID (as an index
  gives it) to the version of the row the snapshot sees, plus the ``all_dead`` verdict
  that index tuple killing uses;
* ``heap_fetch_visible`` - the row of ``heap_hot_search``, decoded.

Page-at-a-time, batch at a time
-------------------------------
``HeapScan`` pins a run of pages (``SCAN_BATCH_PAGES``), share-locks them all, finds every
LP_NORMAL tuple with one vectorized read of the line pointers, and hands the absolute byte
offsets of those tuples to a ``tuple_filter`` while the locks are held.  ``MVCCFilter`` is
that filter: one gather of the tuple headers (``layout.gather_header``, the first 40 bytes
of every tuple), one call to ``satisfies_mvcc_batch``, and a boolean mask back.  The
columns of the visible tuples are then gathered while only the pins are held (buffer
rule 2: no tuple moves while we pin its page), exactly as PostgreSQL's page-at-a-time
mode collects the visible line pointers of a page under a short share lock.

Most tuples a scan meets were decided long ago, and their hint bits say so.  The filter
therefore first reads only t_infomask of the batch (one narrow gather):

* if every tuple is XMIN_COMMITTED and XMAX_INVALID (a table read once since it was
  written), one more narrow gather of t_xmin checks that every inserter precedes the
  snapshot's xmin, and the whole batch is visible - no header arrays, no batch test;
  likewise a batch of nothing but hinted dead versions (XMIN_COMMITTED, XMAX_COMMITTED,
  every xmax before the snapshot's xmin: the pages a mass UPDATE or DELETE left) is
  wholly invisible after a gather of t_xmax;
* otherwise the tuples whose hint bits decide alone are settled first: *known live*
  (XMIN_COMMITTED, XMAX_INVALID or lock-only, xmin older than the snapshot's xmin) and
  *known dead* (XMIN_COMMITTED and XMAX_COMMITTED, not a lock, xmax older than the
  snapshot's xmin: the dead version an UPDATE or DELETE leaves once a reader has hinted
  it), and only the others go through ``gather_header`` and ``satisfies_mvcc_batch``.

A batch of at most ``FILTER_SCALAR_MAX`` tuples (a tiny table's page) makes the same
decisions in the same order tuple by tuple in plain Python (``MVCCFilter._small``).

Both shortcuts give exactly the batch test's answers (and no hints) for the tuples they
decide: the batch test decides tuple by tuple, and for those bit patterns it asks the
snapshot only "is xmin / xmax running?", which is no for an xid below the snapshot's
xmin.  A test compares the filter with the scalar rule on generated pages.

Hint bits
---------
``satisfies_mvcc_batch`` returns, per tuple, the hint bits the commit log just decided:
XMIN_COMMITTED / XMIN_INVALID when the inserter's fate was looked up, XMAX_COMMITTED /
XMAX_INVALID for the deleter's.  Never for a transaction the snapshot still considers
running (a later reader whose snapshot sees it finished sets the bit).  The filter ORs
them into each tuple's t_infomask in place, under the scan's *share* locks (buffer rule
4: concurrent setters OR in the same bits; a lost update only loses a hint, which the
next reader sets again), and marks the pages that got any as dirty hints
(``mark_dirty_hint_batch``, which logs an image of a page's first hint change after a
checkpoint).  A table's
first scan after a load or a mass update therefore dirties every page it hints, as in
PostgreSQL; later scans find the bits and never ask the commit log.  ``hint_writes``
counts the tuples whose t_infomask a filter changed (tests use it).  Hint bits never
change a visibility answer: they cache what the commit log says, and the snapshot check
(``xid_running``) is still made on a hinted xid (rows 10 and 16 of the decision table).

PostgreSQL does not write a ``COMMITTED`` hint while the transaction's asynchronous commit
record is unflushed (a hinted page written before the WAL writer's flush could outlive a
commit that a crash then loses); minidb's visibility functions ask the same question
(``CommitLog.commit_hints_ok(xid)``: the commit LSN of the xid's group against the flushed
WAL).

The HOT chain walk (``heap_hot_search``)
---------------------------------------
An index entry points at the *root* line pointer of a HOT chain.  The walk, under a
share lock on the one page:

1. start at the TID's line pointer; LP_REDIRECT (left by pruning) is followed once, at
   the start only; LP_DEAD and LP_UNUSED end the walk at once;
2. a member must be LP_NORMAL; a HEAP_ONLY_TUPLE at the very start means the TID is not
   a chain root (an index never points at one): stop;
3. from the second member on, t_xmin must equal the previous member's t_xmax, else the
   chain is broken (the slot was pruned and reused) and ends;
4. the first member the snapshot sees (scalar ``satisfies_mvcc``, hints written and
   ``mark_dirty_hint``) is returned;
   A member the hint bits show dead before the snapshot (inserter and deleter known
   committed, deleter older than the snapshot's xmin) is passed without the test; so is
   one whose deleter, older than the snapshot's xmin and not a locker, the commit log
   says committed, while asynchronous commit records are unflushed
   (``clog.commit_hints_ok()`` false: the test's COMMITTED hints for recent xids are
   deferred then, and under synchronous_commit off a hot row's chain - pgbench's
   branches - is walked member by member unhinted until the next prune).  The test's
   answer for such a member is "invisible" whatever its inserter did; the skipped
   member gets no hints (later readers set them once the WAL is flushed).  A member
   the hint bits show visible - inserter committed (hint) before the snapshot's xmin,
   or frozen, and no deleter (xmax 0, HEAP_XMAX_INVALID or a lock only) - is returned
   without the call: the test's answer there is "visible, nothing to hint";
5. the chain continues through t_ctid while the member is HEAP_HOT_UPDATED (the next
   member is on the same page); a member without that flag ends it (a non-HOT update
   put the next version on another page, under its own index entry).

Skipping the dead run
---------------------
(A departure from PostgreSQL; minidb/heap/README.md section 5 has the argument.)  The
members a walk passes from the root on without a test - dead before the snapshot by hint
bits, or by a committed deleter while commits are unflushed (step 4) - form the chain's
*dead run*.  With a ``chain_cache`` (the backend's: ``backend.chain_cache``), the walk
remembers the run's last member M under (relfilenode, block, root offset): (M's offset, its
xmin, its xmax, the number of members ahead of it, their largest xmax, whether all of them
were passed by hint bits).  A later walk of the chain starts at M if M is still LP_NORMAL,
heap-only, with those xmin and xmax (then it is the same tuple: its members ahead are there
or pruned, never replaced), the largest xmax ahead is below the snapshot's xmin, and either
all of them were hinted or ``clog.commit_hints_ok()`` is false now (the full walk would
then pass the unhinted ones without writing hints).  Else the entry goes and the walk
starts at the root.  The members ahead of M write no hints and count nothing in the full
walk either; their share of ``all_dead`` is needed only when nothing is visible, and is
then read from the page (``_ahead_all_dead``).  A member that ``satisfies_mvcc`` just
hinted dead before the snapshot extends the run too (later walks pass it by its hints).

``all_dead``: true iff some member was examined and every member examined is
``surely_dead`` against the global horizon (``procarray.vis_horizon(xmax)``: a bound kept
from an earlier computation when it settles the member, else the exact
``procarray.global_xmin()``; asked only once an invisible member is met), judged from hint bits alone after this walk set
them.  An index entry can then be marked LP_DEAD: no snapshot, now or later, can see
anything through it (the horizon only moves forward).  A visible member makes it false;
a broken chain ends the walk with the verdict on the members examined so far.  Edge
cases, and where they depart from PostgreSQL (which leaves ``all_dead`` true whenever
the walk stops before examining a member):

=========================================  ==========  ==================================
the TID's line pointer                     all_dead    why
=========================================  ==========  ==================================
LP_DEAD (pruning found the chain dead)     True        same as PostgreSQL
LP_UNUSED                                  False       PostgreSQL: True; the slot may be
                                                       reused at any moment, so say
                                                       nothing
offset beyond the line pointer array       False       PostgreSQL: True; same reason
a heap-only tuple (not a chain root)       False       PostgreSQL: True; an index never
                                                       points there, so be careful
LP_REDIRECT to a pointer not LP_NORMAL     False       PostgreSQL: True; pruning never
                                                       leaves that, so it is not trusted
block beyond the relation's end            False       nothing was looked at
=========================================  ==========  ==================================

Invariants:
  1. Hint bits are written only under a content lock (share or exclusive) and the
     buffer is then marked dirty as a hint.
  2. ``MVCCFilter`` returns exactly ``satisfies_mvcc_batch``'s mask and hints, tuple by
     tuple (its shortcuts decide only what the hint bits decide alone).
  3. ``heap_hot_search`` returns at most one version per call, and ``all_dead`` is never
     true when it returns one.

Left out: ``first_call=False`` (continuing a chain after a returned member, for non-MVCC
snapshots), PD_ALL_VISIBLE / the visibility map (every tuple is tested), serializable
predicate locks.
"""

from __future__ import annotations

import struct

import numpy as np

from minidb.config import BLCKSZ
from minidb.errors import DataCorrupted
from minidb.heap.heapam import SCAN_BATCH_PAGES, Batch, HeapRel, HeapScan
from minidb.heap.layout import gather_header
from minidb.storage.htup import (HEAP_HOT_UPDATED, HEAP_ONLY_TUPLE, HEAP_XMAX_COMMITTED,
                                 HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY, HEAP_XMIN_COMMITTED,
                                 HEAP_XMIN_INVALID)
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE
from minidb.txn.clog import COMMITTED, FIRST_NORMAL_XID as _FIRST_NORMAL_XID
from minidb.txn.clog import PAGE_MASK as _CLOG_PAGE_MASK, PAGE_SHIFT as _CLOG_PAGE_SHIFT
from minidb.txn.visibility import satisfies_mvcc, satisfies_mvcc_batch, surely_dead

__all__ = ["MVCCFilter", "SeqScan", "seq_scan", "heap_hot_search", "hot_search_page",
           "walk_chain", "heap_fetch_visible"]

_T_XMAX, _T_INFOMASK = 8, 32       # offsets in the tuple header (minidb.heap.layout)
_HDR = struct.Struct("<QQIIIHHH")   # xmin xmax cmin cmax ctid.block ctid.offset im2 im
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_PD_LOWER = 12                      # pd_lower in the page header (storage/page.py)
_PAGE_HEADER = pg.PAGE_HEADER_SIZE  # line pointer 1 follows the header
# the two bits that make a tuple "known committed and never deleted"
_HINTED_LIVE = HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID
_HINTED_LIVE_HI = _HINTED_LIVE >> 8
assert _HINTED_LIVE & 0xFF == 0
# ... and the bits that make it "known committed, deleted by a known committed deleter"
_DEAD_MASK = HEAP_XMIN_COMMITTED | HEAP_XMAX_COMMITTED | HEAP_XMAX_INVALID | HEAP_XMAX_LOCK_ONLY
_HINTED_DEAD = HEAP_XMIN_COMMITTED | HEAP_XMAX_COMMITTED
# a deleter that is no deleter: invalid, or only a row locker
_XMAX_GONE = HEAP_XMAX_INVALID | HEAP_XMAX_LOCK_ONLY
_XMIN_COMMITTED = HEAP_XMIN_COMMITTED
_XMIN_FROZEN = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID


# ---------------------------------------------------------------------------------------------
# the scan filter
# Batches of at most this many tuples are filtered in plain Python (``MVCCFilter._small``).
FILTER_SCALAR_MAX = 64

class MVCCFilter:
    """``HeapScan.tuple_filter`` that keeps the tuples ``snapshot`` sees and writes the
    hint bits the commit log decided (see the module docstring)."""

    __slots__ = ("bm", "snapshot", "clog", "hint_writes", "hinted_pages", "tuples_checked",
                 "fast_batches", "_xmin_bound")

    def __init__(self, bm, snapshot, clog):
        self.bm = bm
        self.snapshot = snapshot
        self.clog = clog
        self.hint_writes = 0     # tuples whose t_infomask this filter changed
        self.hinted_pages = 0    # pages marked dirty as hints (once per batch that hinted)
        self.tuples_checked = 0  # LP_NORMAL tuples given to the filter
        self.fast_batches = 0    # batches decided whole by hint bits (all live / all dead)
        # Every xid below it is finished for this snapshot (XidInMVCCSnapshot says no).
        self._xmin_bound = min(snapshot.xmin, snapshot.xmax)

    def __call__(self, views, starts: np.ndarray, bufs) -> np.ndarray:
        n = len(starts)
        self.tuples_checked += n
        if n <= FILTER_SCALAR_MAX:
            return self._small(views, starts)
        # Fast path: all known committed, none deleted, all inserters older than the
        # snapshot -> all visible, no hints.  Two narrow gathers: t_infomask's high byte
        # (both bits live there; one byte gathers faster than two), then t_xmin.
        hi = views.u8[starts + (_T_INFOMASK + 1)]
        if ((hi & _HINTED_LIVE_HI) == _HINTED_LIVE_HI).all():
            if int(views.u64[starts >> 3].max()) < self._xmin_bound:
                self.fast_batches += 1
                return np.ones(n, dtype=bool)
        im = views.u16[(starts + _T_INFOMASK) >> 1]
        # All dead versions, hinted, deleted before the snapshot (pages a mass UPDATE or
        # DELETE left behind): none visible, no hints.
        if ((im & _DEAD_MASK) == _HINTED_DEAD).all():
            xmax = views.u64[(starts + _T_XMAX) >> 3]
            if int(xmax.min()) > 0 and int(xmax.max()) < self._xmin_bound:
                self.fast_batches += 1
                return np.zeros(n, dtype=bool)
        return self._classify(views, starts, im)

    def _small(self, views, starts: np.ndarray) -> np.ndarray:
        """The filter for a small batch (a tiny table's page: HeapScan's small-batch path),
        tuple by tuple in plain Python: the numpy steps below cost ~1 us each whatever the
        batch size.  The same decisions in the same order: the two whole-batch shortcuts
        (counted in ``fast_batches``), then known live / known dead by hint bits, then the
        scalar ``satisfies_mvcc`` for the rest (which agrees with ``satisfies_mvcc_batch``
        tuple by tuple: tests/txn/test_visibility.py), hints ORed in under the share locks
        and each page that got any marked dirty as a hint once.
        ``tests/heap/test_small_scan.py`` compares it with the vectorized filter."""
        flat = views.flat
        bound = self._xmin_bound
        pos = starts.tolist()
        hdrs = [_HDR.unpack_from(flat, s) for s in pos]
        n = len(hdrs)
        if all(h[7] & _HINTED_LIVE == _HINTED_LIVE for h in hdrs) and \
                max(h[0] for h in hdrs) < bound:
            self.fast_batches += 1
            return np.ones(n, dtype=bool)
        if all(h[7] & _DEAD_MASK == _HINTED_DEAD for h in hdrs) and \
                min(h[1] for h in hdrs) > 0 and max(h[1] for h in hdrs) < bound:
            self.fast_batches += 1
            return np.zeros(n, dtype=bool)
        vis = np.zeros(n, dtype=bool)
        hinted_bufs = []
        snap, clog = self.snapshot, self.clog
        for i, (xmin, xmax, cmin, cmax, _b, _o, _im2, im) in enumerate(hdrs):
            if im & HEAP_XMIN_COMMITTED and im & (HEAP_XMAX_INVALID | HEAP_XMAX_LOCK_ONLY) \
                    and xmin < bound:
                vis[i] = True                                   # known live
                continue
            if im & _DEAD_MASK == _HINTED_DEAD and 0 < xmax < bound:
                continue                                        # known dead
            vis[i], hints = satisfies_mvcc(xmin, xmax, cmin, cmax, im, snap, clog)
            if hints:
                s = pos[i]
                _U16.pack_into(flat, s + _T_INFOMASK, _U16.unpack_from(flat, s + _T_INFOMASK)[0]
                               | hints)
                self.hint_writes += 1
                hinted_bufs.append(s // BLCKSZ)
        if hinted_bufs:
            bufs = sorted(set(hinted_bufs))
            for b in bufs:
                self.bm.mark_dirty_hint(b)
            self.hinted_pages += len(bufs)
        return vis

    def _classify(self, views, starts: np.ndarray, im: np.ndarray) -> np.ndarray:
        """Decide from hint bits whatever they decide alone; the rest by the batch test.

        Known live: XMIN_COMMITTED, XMAX_INVALID or only a lock, xmin older than the
        snapshot.  Known dead: XMIN_COMMITTED and XMAX_COMMITTED (not a lock), xmax older
        than the snapshot.  ``satisfies_mvcc_batch`` answers exactly so for both, with no
        hints; it decides element by element, so handing it only the others is the same.
        """
        n = len(starts)
        bound = self._xmin_bound
        vis = np.zeros(n, dtype=bool)
        decided = np.zeros(n, dtype=bool)
        live = np.flatnonzero(((im & HEAP_XMIN_COMMITTED) != 0)
                              & ((im & (HEAP_XMAX_INVALID | HEAP_XMAX_LOCK_ONLY)) != 0))
        if live.size:
            live = live[views.u64[starts[live] >> 3] < bound]
            vis[live] = True
            decided[live] = True
        dead = np.flatnonzero((im & _DEAD_MASK) == _HINTED_DEAD)
        if dead.size:
            xmax = views.u64[(starts[dead] + _T_XMAX) >> 3]
            decided[dead[(xmax != 0) & (xmax < bound)]] = True
        rest = np.flatnonzero(~decided)
        if rest.size:
            rs = starts[rest]
            v, hints = satisfies_mvcc_batch(gather_header(views, rs), self.snapshot, self.clog)
            vis[rest] = v
            if hints.any():
                self._write_hints(views, rs, hints)
        return vis

    def _write_hints(self, views, starts: np.ndarray, hints: np.ndarray) -> None:
        nz = np.flatnonzero(hints)
        s = starts[nz]
        # under the scan's share locks: OR the bits in (another setter ORs the same ones)
        views.u16[(s + _T_INFOMASK) >> 1] |= hints[nz]
        # starts are offsets into the whole pool, so offset // BLCKSZ is the buffer
        bufs = np.unique(s // BLCKSZ)
        self.bm.mark_dirty_hint_batch(bufs)
        self.hint_writes += len(nz)
        self.hinted_pages += len(bufs)


# ---------------------------------------------------------------------------------------------
# sequential scan
class SeqScan:
    """An iterator of ``heapam.Batch`` es of the rows a snapshot sees (see ``seq_scan``).

    ``.filter`` is the ``MVCCFilter`` (its counters say how many hint bits the scan set),
    ``.heap_scan`` the underlying ``HeapScan`` (pages and tuples looked at)."""

    def __init__(self, backend, rel: HeapRel, columns, snapshot, *, prepare_pages=None,
                 batch_pages: int = SCAN_BATCH_PAGES, use_ring: bool | None = None,
                 start_block: int = 0):
        cols = [rel.layout.column_index(c) if isinstance(c, str) else int(c) for c in columns]
        if snapshot is None:
            snapshot = backend.xact.current_snapshot()
        self.backend = backend
        self.rel = rel
        self.snapshot = snapshot
        self.filter = MVCCFilter(backend.bufmgr, snapshot, backend.instance.clog)
        self.heap_scan = HeapScan(backend, rel, cols, batch_pages=batch_pages,
                                  tuple_filter=self.filter, prepare_pages=prepare_pages,
                                  use_ring=use_ring, start_block=start_block)
        self.rows = 0
        self._gen = self._run()

    def _run(self):
        stats, oid = self.backend.pgstat, self.rel.oid
        stats.count(oid, "seq_scan")
        for batch in self.heap_scan.batches():
            n = len(batch)
            self.rows += n
            stats.count(oid, "seq_tup_read", n)
            yield batch

    def __iter__(self):
        return self

    def __next__(self) -> Batch:
        return next(self._gen)

    def close(self) -> None:
        self._gen.close()


def seq_scan(backend, rel: HeapRel, columns, snapshot=None, *, prepare_pages=None,
             batch_pages: int = SCAN_BATCH_PAGES, use_ring: bool | None = None,
             start_block: int = 0) -> SeqScan:
    """Scan ``rel`` returning batches of the rows ``snapshot`` sees.

    ``columns`` are column indexes or names.  ``snapshot`` defaults to the backend's
    current statement snapshot (``xact.current_snapshot()``, which starts a statement -
    and an implicit transaction - if none is running; ending it is the caller's
    business).  ``prepare_pages(bufs, first_block)`` runs on each batch of pinned,
    unlocked pages (opportunistic pruning).  Counts one 'seq_scan' for the table when
    iteration starts and one 'seq_tup_read' per row returned.
    """
    return SeqScan(backend, rel, columns, snapshot, prepare_pages=prepare_pages,
                   batch_pages=batch_pages, use_ring=use_ring, start_block=start_block)


# ---------------------------------------------------------------------------------------------
# HOT chain
# the dead-run cache (``heap_hot_search``'s ``chain_cache``) empties when it holds this many
# chains
CHAIN_CACHE_MAX = 4096


def heap_hot_search(bm, rel: HeapRel, tid: tuple[int, int], snapshot, clog, procarray,
                    horizon: int | None = None, *, prepare_pages=None,
                    chain_cache: dict | None = None
                    ) -> tuple[tuple[int, int] | None, bytes | None, bool]:
    """(TID of the visible version, its tuple bytes, all_dead) for the chain at ``tid``.

    See the module docstring for the walk and the ``all_dead`` verdict.
    ``prepare_pages(bufs, block)`` - the scan's pruning hook - runs on the pinned,
    unlocked page first, if given.  ``horizon`` defaults to ``procarray.global_xmin()``.
    ``chain_cache``: the backend's dead-run cache (module docstring), if the walk may use
    and fill it - the same answer either way.
    """
    return _hot_search(bm, rel, tid, snapshot, clog, procarray, horizon, prepare_pages,
                       for_fetch=False, chain_cache=chain_cache)


def _hot_search(bm, rel, tid, snapshot, clog, procarray, horizon, prepare_pages, *,
                for_fetch: bool, chain_cache=None):
    block, off = int(tid[0]), int(tid[1])
    if not bm.smgr.has_block(rel.relfilenode, block):
        if for_fetch:  # a TID given by the user (a TID scan): none there, as PostgreSQL
            return None, None, False
        # a TID from an index: the heap lost blocks behind the index's back (a truncated
        # file) - an error, never rows silently missing (PostgreSQL's "could not read block")
        raise DataCorrupted(
            f'could not read block {block} in file "{bm.smgr.path(rel.relfilenode)}": '
            f'the relation "{rel.name}" has only {bm.smgr.nblocks(rel.relfilenode)} blocks '
            f"(an index entry points to ({block},{off}))")
    b = bm.pin(rel.relfilenode, block)
    try:
        if prepare_pages is not None:
            prepare_pages(np.array([b], dtype=np.int64), block)
        bm.lock(b, SHARE)
        hinted = []
        try:
            return _walk_chain(bm.page(b), block, off, snapshot, clog, procarray, horizon,
                               for_fetch, hinted, chain_cache, rel.relfilenode)
        finally:
            if hinted:
                bm.mark_dirty_hint(b)
            bm.unlock(b)
    finally:
        bm.unpin(b)


def hot_search_page(page, block: int, off: int, snapshot, clog, procarray, hinted: list,
                    chain_cache: dict | None = None, rfn: int = 0
                    ) -> tuple[tuple[int, int] | None, bytes | None, bool]:
    """``heap_hot_search``'s walk on a page the caller holds pinned and share-locked (and
    has offered to pruning): the same answer, the horizon asked per member as needed.  A
    hint bit written appends to ``hinted``: the caller then marks the buffer dirty as a
    hint (``mark_dirty_hint``).  For a caller that pins and locks the page its own way
    (the point path: ``minidb.index.scan.fetch_equal``).  ``chain_cache`` (with the
    page's relfilenode ``rfn``): as ``heap_hot_search``'s."""
    return _walk_chain(page, block, off, snapshot, clog, procarray, None, False, hinted,
                       chain_cache, rfn)


def _check(page, lp_off, xmin, xmax, cmin, cmax, im, snapshot, clog, hinted):
    """Scalar MVCC test of one tuple; writes the hint bits it learned (share lock held).
    Returns (visible, infomask now)."""
    visible, hints = satisfies_mvcc(xmin, xmax, cmin, cmax, im, snapshot, clog)
    if hints:
        im |= hints
        _U16.pack_into(page, lp_off + _T_INFOMASK, im)
        hinted.append(1)
    return visible, im


def _walk_chain(page, block, off, snapshot, clog, procarray, horizon, for_fetch,
                hinted, cache=None, rfn=0):
    # line pointers read inline (one unpack each; the offsets are checked here)
    u32 = _U32.unpack_from
    nitems = (_U16.unpack_from(page, _PD_LOWER)[0] - _PAGE_HEADER) >> 2
    if not 1 <= off <= nitems:
        return None, None, False
    lp = u32(page, _PAGE_HEADER - 4 + 4 * off)[0]
    flags = (lp >> 15) & 3
    if flags == pg.LP_DEAD:
        return None, None, True
    if flags == pg.LP_UNUSED:
        return None, None, False
    at_start = True
    fixed = horizon is not None              # the caller's horizon, else asked per member
    hdr = _HDR.unpack_from
    lp_base = _PAGE_HEADER - 4
    all_dead = not for_fetch                 # a fetch needs no verdict: skip the horizon
    examined = 0
    prev_xmax = 0
    snap_xmin = snapshot.xmin
    me = snapshot.myxid
    skip_unhinted = None                     # decided at the first unhinted member
    # the dead run (module docstring, "Skipping the dead run"): ``run`` - every member so
    # far, from the root, was passed as dead before the snapshot (known dead by its hint
    # bits, or by its committed deleter); ``run_hinted`` - all of them by hint bits;
    # ``run_max`` - their largest deleter; ``mark`` - the entry to remember: the last of
    # them, with what precedes it
    root = off
    entry = mark = None
    run = cache is not None
    run_hinted = True
    run_max = 0
    m_off = 0                                # the member the walk started at, from the cache
    if run:
        entry = cache.get((rfn, block, root))
        if entry is not None:
            e_off, e_xmin, e_xmax, before, before_max, before_hinted = entry
            if before_max < snap_xmin and e_off <= nitems:
                e_lp = u32(page, lp_base + 4 * e_off)[0]
                if (e_lp >> 15) & 3 == pg.LP_NORMAL:
                    x0, x1, _c0, _c1, _cb, _co, e_im2, _im = hdr(page, e_lp & 0x7FFF)
                    if (x0 == e_xmin and x1 == e_xmax and e_im2 & HEAP_ONLY_TUPLE
                            and (before_hinted
                                 or (skip_unhinted := not clog.commit_hints_ok()))):
                        # the member is still the one remembered (a slot is reused only
                        # with other xids), so the members ahead of it are still there,
                        # or pruned, and dead to this snapshot as the full walk would
                        # pass them: start at it
                        off, lp, flags, at_start = e_off, e_lp, pg.LP_NORMAL, False
                        m_off = e_off
                        examined, run_max, run_hinted = before, before_max, before_hinted
            if not m_off:
                del cache[(rfn, block, root)]
                entry = None
    if at_start and flags == pg.LP_REDIRECT:
        off = lp & 0x7FFF                    # a redirect's lp_off is the target offset
        if not 1 <= off <= nitems:
            return None, None, False
        lp = u32(page, _PAGE_HEADER - 4 + 4 * off)[0]
        flags = (lp >> 15) & 3
        at_start = False
    # this process's copies of commit log pages (``CommitLog.status`` keeps them; a copy
    # never changes, and a final COMMITTED status in one stays true); the page of the last
    # deleter looked up
    clog_pages = getattr(clog, "_local", None)
    cpage_no, cdata = -1, None
    # module constants as locals: this loop runs once per chain member (~60 on a hot row)
    lp_normal, dead_mask, hinted_dead, xmax_gone, hot_updated = (
        pg.LP_NORMAL, _DEAD_MASK, _HINTED_DEAD, _XMAX_GONE, HEAP_HOT_UPDATED)
    cshift, cmask, committed = _CLOG_PAGE_SHIFT, _CLOG_PAGE_MASK, COMMITTED
    for _ in range(nitems):                  # a chain cannot be longer than the page
        if flags != lp_normal:
            break                            # (a redirect may only start a chain)
        lp_off = lp & 0x7FFF
        xmin, xmax, cmin, cmax, ctid_block, ctid_off, im2, im = hdr(page, lp_off)
        if at_start:
            if im2 & HEAP_ONLY_TUPLE:
                # not a chain root: an index never points here.  A fetch (heap_fetch_visible)
                # asks about exactly this version instead.
                if for_fetch:
                    visible, _ = _check(page, lp_off, xmin, xmax, cmin, cmax, im, snapshot,
                                        clog, hinted)
                    if visible:
                        return (block, off), _item_bytes(page, lp_off, lp), False
                return None, None, False
            at_start = False
        elif prev_xmax and xmin != prev_xmax:
            break                            # broken chain: the slot was reused
        if 0 < xmax < snap_xmin and im & dead_mask == hinted_dead:
            # dead before the snapshot, as the hint bits say (MVCCFilter's "known dead":
            # inserter and deleter known committed, a real deleter older than every xid
            # the snapshot sees running): invisible with nothing to learn -
            # satisfies_mvcc's answer, without the call.  For such a member
            # surely_dead(xmax, im, horizon) is xmax < horizon.
            if run:
                if examined:                 # (the root itself is never remembered)
                    mark = (off, xmin, xmax, examined, run_max, run_hinted)
                if xmax > run_max:
                    run_max = xmax
            examined += 1
            if all_dead:
                if not fixed and (horizon is None or xmax >= horizon):
                    horizon = procarray.vis_horizon(xmax)
                if xmax >= horizon:
                    all_dead = False
        else:
            dead = False
            if (0 < xmax < snap_xmin and not im & xmax_gone and xmin != me
                    and (skip_unhinted if skip_unhinted is not None
                         else (skip_unhinted := not clog.commit_hints_ok()))):
                # Dead before the snapshot if its deleter committed: the deleter is older
                # than every xid the snapshot sees running, so satisfies_mvcc says
                # invisible whatever the inserter (not this transaction) did.  Taken only
                # while asynchronous commit records are unflushed, when satisfies_mvcc's
                # hints for recent xids are deferred anyway (commit_hints_ok): one commit
                # log read instead of the full test - inline, from this process's copy of
                # the deleter's commit log page (the deleters of one chain are close xids)
                # when it already shows the final COMMITTED, else ``clog.status``.
                if xmax >> cshift != cpage_no:
                    cpage_no = xmax >> cshift
                    cdata = clog_pages.get(cpage_no) if clog_pages is not None else None
                if (cdata is not None and xmax >= _FIRST_NORMAL_XID
                        and (cdata[(xmax & cmask) >> 2] >> ((xmax & 3) << 1)) & 3
                        == committed):
                    dead = True
                elif clog.status(xmax) == committed:
                    dead = True
                    cpage_no = -1            # the status call refreshed the copy
            if dead:
                if run:
                    if examined:
                        mark = (off, xmin, xmax, examined, run_max, run_hinted)
                    if xmax > run_max:
                        run_max = xmax
                    run_hinted = False
            else:
                if (im & _XMIN_COMMITTED and (xmax == 0 or im & xmax_gone)
                        and (xmin < snap_xmin or im & _XMIN_FROZEN == _XMIN_FROZEN)):
                    # inserted by a transaction committed (hint) before the snapshot (or
                    # frozen), never deleted (or only locked): satisfies_mvcc's "visible,
                    # nothing to hint", without the two calls
                    visible = True
                else:
                    visible, im = _check(page, lp_off, xmin, xmax, cmin, cmax, im, snapshot,
                                         clog, hinted)
                if visible:
                    if mark is not None and mark != entry:
                        _remember(cache, (rfn, block, root), mark)
                    return (block, off), _item_bytes(page, lp_off, lp), False
                if run:
                    if 0 < xmax < snap_xmin and im & dead_mask == hinted_dead:
                        # the test just hinted it dead: later walks pass it by its hints
                        if examined:
                            mark = (off, xmin, xmax, examined, run_max, run_hinted)
                        if xmax > run_max:
                            run_max = xmax
                    else:
                        run = False
            examined += 1
            if all_dead:
                if not fixed and (horizon is None or xmax >= horizon):
                    horizon = procarray.vis_horizon(xmax)  # the kept bound, if it settles
                if not surely_dead(xmax, im, horizon):
                    all_dead = False
        if not im2 & hot_updated or ctid_block != block or not 1 <= ctid_off <= nitems:
            break                            # a HOT successor is always on the same page
        off = ctid_off
        lp = u32(page, lp_base + 4 * off)[0]
        flags = (lp >> 15) & 3
        prev_xmax = xmax
    if mark is not None and mark != entry:
        _remember(cache, (rfn, block, root), mark)
    if all_dead and m_off:
        # the walk started past the members ahead of ``m_off``: their share of the verdict
        all_dead = _ahead_all_dead(page, root, m_off, nitems, procarray, horizon, fixed)
    return None, None, all_dead and examined > 0


# ``hot_search_page`` without its frame, for the point path (``minidb.index.scan
# .fetch_equal``): called as walk_chain(page, block, off, snapshot, clog, procarray, None,
# False, hinted, chain_cache, rfn)
walk_chain = _walk_chain


def _ahead_all_dead(page, off, m_off, nitems, procarray, horizon, fixed) -> bool:
    """Whether every member of the chain at root ``off`` ahead of member ``m_off`` is
    ``surely_dead`` (from their hint bits as they are now): the full walk's verdict on the
    members the dead-run cache let a walk skip.  Reads only (those members are dead to the
    snapshot: the walk would write no hint on them)."""
    u32 = _U32.unpack_from
    hdr = _HDR.unpack_from
    lp_base = _PAGE_HEADER - 4
    lp = u32(page, lp_base + 4 * off)[0]
    if (lp >> 15) & 3 == pg.LP_REDIRECT:
        off = lp & 0x7FFF
        lp = u32(page, lp_base + 4 * off)[0]
    for _ in range(nitems):
        if off == m_off:
            return True
        if (lp >> 15) & 3 != pg.LP_NORMAL:
            return False
        _x0, xmax, _c0, _c1, ctid_block, ctid_off, _im2, im = hdr(page, lp & 0x7FFF)
        if not fixed and (horizon is None or xmax >= horizon):
            horizon = procarray.vis_horizon(xmax)
        if not surely_dead(xmax, im, horizon):
            return False
        if not 1 <= ctid_off <= nitems:
            return False
        off = ctid_off
        lp = u32(page, lp_base + 4 * off)[0]
    return False


def _remember(cache: dict, key, mark) -> None:
    if len(cache) >= CHAIN_CACHE_MAX and key not in cache:
        cache.clear()
    cache[key] = mark


def _item_bytes(page, lp_off: int, lp: int) -> bytes:
    return bytes(page[lp_off:lp_off + (lp >> 17)])


def heap_fetch_visible(backend, rel: HeapRel, tid: tuple[int, int], snapshot=None
                       ) -> tuple | None:
    """The row at ``tid`` that ``snapshot`` sees, decoded, or None.

    If ``tid`` is a chain root (a plain tuple, a HOT chain's first member, or a
    redirect), this is the version ``heap_hot_search`` finds.  If ``tid`` names a
    heap-only tuple directly (a TID taken from a scan, not from an index), that exact
    version is checked and returned if visible - no chain walk (as PostgreSQL's
    ``heap_fetch`` does for a TID scan).  ``snapshot`` defaults to the backend's current
    statement snapshot.  Counts nothing: index scans count 'idx_tup_fetch' themselves.
    """
    if snapshot is None:
        snapshot = backend.xact.current_snapshot()
    inst = backend.instance
    _found, data, _all_dead = _hot_search(backend.bufmgr, rel, tid, snapshot, inst.clog,
                                          inst.procarray, None, None, for_fetch=True)
    return None if data is None else rel.layout.decode(data)
