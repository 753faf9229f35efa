"""Heap page pruning: opportunistic cleanup of one page and of its HOT chains (``pruneheap.c``).

Every UPDATE or DELETE leaves the old tuple version on its page.  Once the deleting
transaction committed and is older than the global xmin horizon (no snapshot can see the
version any more), *pruning* takes the version's storage back, under a cleanup lock on the
page (exclusive content lock, and no other backend holds a pin: buffer rule 5 - a reader
with only a pin may hold a pointer into a tuple, so tuples move only when nobody pins the
page).  Pruning never touches an index: an index entry points at a chain's *root* line
pointer, which is kept (as LP_REDIRECT or LP_DEAD) for as long as an entry may point at it.

When (``heap_page_prune_opt``, PostgreSQL's rules):

  1. ``heap_page_pruning`` is on (a session setting; off = the 2002 behaviour);
  2. ``pd_prune_xid`` is set (some deleter or updater left a version here) and is older than
     the horizon ``ProcArray.global_xmin()`` (else nothing here can be dead to everyone) -
     for one page asked first of ``ProcArray.vis_horizon``, which answers most "not yet"
     cases from a kept bound without the proc array scan;
  3. the page is getting full: ``PD_PAGE_FULL`` (an UPDATE found no room here) or its heap
     free space is below ``max(fillfactor's reserve, BLCKSZ / 10)`` - pruning a page with
     plenty of room costs more than it gains;
  4. a *conditional* cleanup lock is granted (``BufferManager.try_cleanup_lock``): a page
     another backend pins is skipped, never waited for.

Conditions 1-3 are checked for a whole batch of pages at once, from the headers in the
pool without a content lock (hints: a torn read only makes us try or skip a page once);
the horizon is computed once per batch and only when some page passed 1-3.  2 and 3 are
checked again under the cleanup lock.  Against PostgreSQL 15's ``heap_page_prune_opt``:
the same tests in the same order (pd_prune_xid valid, GlobalVisTestIsRemovableXid on it,
``minfree = Max(RelationGetTargetPageFreeSpace, BLCKSZ / 10)``, ``PageIsFull ||
PageGetHeapFreeSpace < minfree``, ConditionalLockBufferForCleanup, the space test again
under the lock); PageGetHeapFreeSpace's "no line pointer can be had" case trusts
PD_HAS_FREE_LINES instead of scanning for an unused one, the fill factor is the session's
``heap_fillfactor`` (minidb has no per-table one), and pd_prune_xid is tested again under
the lock (another backend may have pruned the page meanwhile; PostgreSQL prunes it again
and finds nothing).

What (``prune_page``): every LP_NORMAL tuple is classified with ``satisfies_vacuum_batch``
against the horizon (the hint bits it learns are set on the way), then each HOT chain is
walked from its root - a LP_REDIRECT item, or a LP_NORMAL tuple that is not HEAP_ONLY.
The walk follows ``t_ctid`` within the page while the member is HOT-updated and the next
member's xmin equals this one's xmax (else the chain is broken and ends); it goes past DEAD
and RECENTLY_DEAD members and stops at the first LIVE / INSERT_IN_PROGRESS /
DELETE_IN_PROGRESS one.  With ``k`` = the chain position just after the last DEAD member::

    chain found                           root line pointer         members 1..k-1   rest
    ------------------------------------  ------------------------  ---------------  --------
    no DEAD member (k = 0)                unchanged                 -                unchanged
    every member DEAD                     LP_DEAD (no storage)      LP_UNUSED        -
    DEAD members, then survivors          LP_REDIRECT -> member k   LP_UNUSED        unchanged
    redirect whose target is gone         LP_DEAD                   -                -
    heap-only tuple reached by no chain,  -                         LP_UNUSED        -
      DEAD (an aborted HOT update)

A plain tuple (not HOT-updated) is a chain of one: DEAD -> LP_DEAD.  The root never
becomes LP_UNUSED here: index entries may still point at it; only VACUUM, after its index
pass, recycles LP_DEAD items.  Heap-only tuples have no index entries, so they go straight
to LP_UNUSED.  Then the page is compacted (``page.repair_fragmentation``), ``pd_prune_xid``
becomes the oldest xmax among the remaining versions that are deleted but not yet dead to
everyone (RECENTLY_DEAD, DELETE_IN_PROGRESS; 0 if none), ``PD_PAGE_FULL`` is cleared, and
the buffer is marked dirty.  A prune that removes nothing still stores the new
``pd_prune_xid`` and clears ``PD_PAGE_FULL`` (as a hint), so the page is not retried in vain.

Cost (one page of an OLTP table, ~55 tuples): the single-page classification
(``_scan_scalar``) reads a copy of the page with ``struct``; a tuple whose hint bits say
LIVE and that is not heap-only - most of a page - costs one read of its two infomasks as
one u32 and one mask test, and takes no part in the chain walk; a tuple whose inserter and
deleter are hinted committed is DEAD or RECENTLY_DEAD by one comparison with the horizon;
the others go to ``visibility.VacuumJudge`` (``satisfies_vacuum`` keeping each ended xid's
commit-log status and hint check for the rest of the page: a chain's xmax is its next
version's xmin; an xid older than this prune's ``global_xmin()`` is not running: no scan of
the proc array for it).  The page change (``pg.prune_items``) rewrites the line pointer array once and
compacts moving only what moves: the items above the highest one that lost its storage
stay where they are, the ones below it move up as one slice (``page._compact``).  The WAL
record carries the plan, not a page delta (below).  Replaying the 1,861 prunes of a
TPC-B-like run into copies of their pages, the page-level work (classification, plan,
page change, record data, free space) takes ~50-65 us a page where the whole-area
compaction and the two-field reads took ~60-85 (the compaction alone ~22 against ~33);
a whole prune in that run, WAL record included, ~73 us against ~84 (medians; a loaded
machine).

WAL: a prune that changed line pointers logs Heap2 PRUNE as PostgreSQL's
``xl_heap_prune``: main data ``latestRemovedXid`` (the newest xmax among the DEAD
versions removed whose inserter did not abort - HeapTupleHeaderAdvanceConflictHorizon; for
waldump only, there are no standbys to conflict with), ``nredirected``, ``ndead``,
``nunused``; one logical block (``PageRecord.add(buf, data=...)``) whose data is the page's
new ``pd_prune_xid`` (u32) and the offsets (u16): the redirected (root, target) pairs, the
now-dead, the now-unused.  Redo (``redo_prune``, registered in ``recovery.LOGICAL_REDO``)
runs the same ``_execute`` as the primary - line pointers, compaction, ``pd_prune_xid``,
``PD_PAGE_FULL`` - so the page comes out byte for byte as the primary left it, but for the
hint bits the primary set while classifying (unlogged, as in PostgreSQL; the first hint
change after a checkpoint logs an image).  tests/wal/test_prune_redo.py compares every
page after redo with the primary's.  A prune that only set hints or pd_prune_xid logs
nothing (``mark_dirty_hint``).

Invariants (checked by ``check_heap`` and the tests):
  1. Pruning holds a cleanup lock: it got the exclusive content lock while holding the only
     pin.  (Another backend may pin the page afterwards - pinning takes no lock - but it
     cannot read a tuple before taking a content lock, i.e. before pruning is done; what it
     must not have is a pointer into the page from *before*.)
  2. An LP_REDIRECT item points at an LP_NORMAL HEAP_ONLY tuple of the same page.
  3. Only DEAD versions lose their storage; RECENTLY_DEAD and newer ones are kept, so any
     snapshot still sees what it saw before.
  4. A root line pointer (what an index entry can name) is never made LP_UNUSED here.

The free-space map is never touched while a heap page is locked: ``heap_page_prune_opt``
records the pages it pruned after releasing their locks (one FSM update per batch);
``prune_page`` returns the counts and leaves that to its caller (``record_free_space``).
PostgreSQL's on-access pruning does not update the FSM at all (the room is meant for later
UPDATEs of that page's rows); minidb does, so that space only pruning frees is still found
by inserts - see the README's departures.

Statistics: pruning does not change ``n_dead_tup`` (VACUUM sets it); each backend counts
what it pruned in ``prune_stats(backend)`` (pages_pruned, tuples_deleted, redirected,
unused, dead, skipped_busy, attempted).  ``trace_pruning`` prints every page pruned.

How to hook it in: ``PagePruner(backend, rel)`` is *the* hook, the ``prepare_pages`` every
reader of ``rel`` passes - ``HeapScan(backend, rel, cols, prepare_pages=PagePruner(backend,
rel))``, ``seq_scan``, a parallel participant's scan, and the heap fetches of an index scan
(``heap_hot_search``).  The scan calls it with each batch's buffers, pinned once each and
not locked; it counts the pages it pruned.  A caller with one page pins it and, before
locking it, calls the hook (or ``heap_page_prune_opt(backend, rel, buf)``) on that buffer.
The index scan's own default (``minidb.index.scan``) checks ``pd_prune_xid`` first, to save
the call on the many pages that have nothing to prune.

Departures from PostgreSQL: 64-bit xids, so no freezing during pruning; the PRUNE record
carries the page's new ``pd_prune_xid`` (PostgreSQL's redo leaves that hint alone) so that
redo is exact; no visibility map; the ``PD_HAS_FREE_LINES``
hint is trusted when judging a page that has MaxHeapTuplesPerPage line pointers.  A DEAD
heap-only tuple that no chain reaches is removed even if it is flagged HOT-updated
(PostgreSQL raises an error then); nothing can point at it but a broken chain.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field

import numpy as np

from minidb.config import BLCKSZ
from minidb.heap.heapam import MAX_HEAP_TUPLES_PER_PAGE, HeapRel
from minidb.heap.layout import FlatViews, gather_header
from minidb.storage.htup import (HEAP_HOT_UPDATED, HEAP_ONLY_TUPLE, HEAP_XMAX_COMMITTED,
                                 HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY, HEAP_XMIN_COMMITTED,
                                 HEAP_XMIN_INVALID)
from minidb.storage import freespace
from minidb.storage import page as pg
from minidb.storage.xloginsert import PageRecord
from minidb.wal.record import RM_HEAP2, XLOG_HEAP2_PRUNE
from minidb.storage.bufmgr import EXCLUSIVE
from minidb.txn.visibility import (DEAD, DELETE_IN_PROGRESS, INSERT_IN_PROGRESS, LIVE,
                                   RECENTLY_DEAD, VacuumJudge,
                                   satisfies_vacuum_batch)

# PRUNE main data (xl_heap_prune): latestRemovedXid, nredirected, ndead, nunused; the block
# data is the page's new pd_prune_xid and the offsets (``_prune_block_data``)
_PRUNE_MAIN = struct.Struct("<QHHH")

# Prune only pages with less free space than this fraction of a block (or than fillfactor
# keeps free, if more): PostgreSQL's BLCKSZ / 10 in heap_page_prune_opt.
PRUNE_MIN_FREE_DIVISOR = 10

_INFOMASK2_OFFSET = 30  # t_infomask2, then t_infomask, inside the tuple header (layout.py)
_INFOMASK_OFFSET = 32
# the two infomasks read as one u32 (t_infomask2 low, t_infomask high): a tuple whose
# inserter is hinted committed, with no deleter, that is not heap-only
_PLAIN_MASK = HEAP_ONLY_TUPLE | (HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID) << 16
_PLAIN_LIVE = (HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID) << 16
_XIDS_CTID = struct.Struct("<QQ8xIH")    # xmin, xmax, (cmin, cmax), ctid.block, ctid.offset
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_LP_OFF_MASK = 0x7FFF  # line pointer word: lp_off (15 bits), lp_flags (2), lp_len (15)
_LP_FLAGS_SHIFT = 15
_LP_FLAGS_BITS = 3 << _LP_FLAGS_SHIFT
_LP_NORMAL_BITS = pg.LP_NORMAL << _LP_FLAGS_SHIFT
_LP_REDIRECT_BITS = pg.LP_REDIRECT << _LP_FLAGS_SHIFT
_SETTLED_LIVE = HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID  # inserter committed, no deleter
_XMIN_FLAGS = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID
_HINT_BITS = _XMIN_FLAGS | HEAP_XMAX_COMMITTED | HEAP_XMAX_INVALID | HEAP_XMAX_LOCK_ONLY
_SETTLED_DELETED = HEAP_XMIN_COMMITTED | HEAP_XMAX_COMMITTED  # and not frozen, not a lock

_STAT_NAMES = ("attempted", "pages_pruned", "tuples_deleted", "redirected", "unused", "dead",
               "skipped_busy")


def prune_stats(backend) -> dict[str, int]:
    """This backend's pruning counters (created on first use)."""
    st = getattr(backend, "prune_stats", None)
    if st is None:
        st = dict.fromkeys(_STAT_NAMES, 0)
        backend.prune_stats = st
    return st


# PruneResult's default dead_offsets: one shared empty array, read-only (a new array per
# opportunistic prune, which never fills it in, cost as much as the rest of the result)
_NO_OFFSETS = np.empty(0, np.int64)
_NO_OFFSETS.flags.writeable = False


@dataclass(slots=True)
class PruneResult:
    """What ``_prune`` did to one page, and what it left there (``live`` ..
    ``dead_offsets`` only when asked for the census: VACUUM, ``prune_page``)."""
    ndeleted: int = 0           # tuple versions whose storage was removed
    nredirected: int = 0        # root line pointers made (or re-pointed) LP_REDIRECT
    nunused: int = 0            # line pointers made LP_UNUSED (dead heap-only tuples)
    ndead: int = 0              # line pointers made LP_DEAD (dead roots and plain tuples)
    live: int = 0               # remaining LIVE versions
    recently_dead: int = 0      # remaining versions some snapshot may still see
    insert_in_progress: int = 0
    delete_in_progress: int = 0
    dead_offsets: np.ndarray = field(default_factory=lambda: _NO_OFFSETS)
    free_space: int = 0         # heap free space afterwards
    changed: bool = False       # line pointers or storage changed

    @property
    def counts(self) -> tuple[int, int, int]:
        return self.ndeleted, self.nredirected, self.nunused


# ---------------------------------------------------------------------------------------------
# opportunistic pruning
def min_free_space(settings) -> int:
    """Free space below which a prunable page is worth pruning."""
    reserve = BLCKSZ * (100 - settings.heap_fillfactor) // 100
    return max(reserve, BLCKSZ // PRUNE_MIN_FREE_DIVISOR)


def _needs_space(flags: int, lower: int, upper: int, min_free: int) -> bool:
    """Condition 3 of the module docstring for one page header."""
    if flags & pg.PD_PAGE_FULL:
        return True
    free = upper - lower - pg.ITEMID_SIZE
    if (lower - pg.PAGE_HEADER_SIZE) // pg.ITEMID_SIZE >= MAX_HEAP_TUPLES_PER_PAGE \
            and not flags & pg.PD_HAS_FREE_LINES:
        free = 0
    return free < min_free


def heap_page_prune_opt(backend, rel: HeapRel, bufs, first_block: int | None = None) -> int:
    """Prune those of ``bufs`` (pinned once each by this backend, not locked) that need and
    allow it; returns the number of pages pruned.  ``bufs`` is one buffer id or an array
    (HeapScan's ``prepare_pages(bufs, first_block)``); ``first_block`` is not needed (the
    buffer tags name the blocks) and is accepted for the hook's signature."""
    settings = backend.settings
    if not settings.heap_page_pruning:
        return 0
    bm = backend.bufmgr
    if type(bufs) is int or (type(bufs) is np.ndarray and bufs.size == 1):
        # One page (an index scan's heap fetch): conditions 2 and 3 as scalars - the
        # numpy batch test below costs ~40 us, as much as a whole index lookup.
        b = bufs if type(bufs) is int else int(bufs.reshape(-1)[0])
        pxid, flags, lower, upper = pg.prune_hints(bm.seg.buf_pages[b])
        if not pxid or upper == 0:
            return 0
        min_free = min_free_space(settings)
        if not _needs_space(flags, lower, upper, min_free):
            return 0
        # the cheap bound first (GlobalVis): the exact horizon only for a page to prune
        procarray = backend.instance.procarray
        if pxid >= procarray.vis_horizon(pxid, backend.slot):
            return 0
        horizon = procarray.global_xmin()
        cands = [b]
    else:
        min_free = min_free_space(settings)
        cands, horizon = _batch_candidates(backend, bufs, min_free)
        if not cands:
            return 0
    stats = prune_stats(backend)
    pruned_blocks, pruned_free = [], []
    scalar = len(cands) == 1
    for b in cands:
        stats["attempted"] += 1
        if not bm.try_cleanup_lock(b):
            stats["skipped_busy"] += 1
            continue
        try:
            pxid, flags, lower, upper = pg.prune_hints(bm.page(b))
            if pxid == 0 or pxid >= horizon or not _needs_space(flags, lower, upper, min_free):
                continue
            block = bm.buffer_tag(b)[2]
            # horizon is global_xmin(): no xid older than it runs
            r = _prune(backend, rel, b, horizon, block=block, census=False, scalar=scalar,
                       running_from=horizon)
        finally:
            bm.unlock(b)
        if r.changed:
            pruned_blocks.append(block)
            pruned_free.append(r.free_space)
    if pruned_blocks:
        freespace.record_many(bm, rel.relfilenode, pruned_blocks, pruned_free)
    return len(pruned_blocks)


def _batch_candidates(backend, bufs, min_free: int) -> tuple[list, int]:
    """(buffers passing conditions 2 and 3, the horizon) for a batch of pages, read from
    the page headers in the pool with numpy; ([], 0) if none."""
    bufs = np.atleast_1d(np.asarray(bufs, dtype=np.int64))
    if not bufs.size:
        return [], 0
    # page headers straight from the pool, without content locks (hints only)
    head = backend.bufmgr.seg.buf_pages[bufs, :pg.PAGE_HEADER_SIZE]
    prune_xid = head.view("<u4")[:, 5].astype(np.uint64)
    if not prune_xid.any():
        return [], 0
    h16 = head.view("<u2").astype(np.int64)
    flags, lower, upper = h16[:, 5], h16[:, 6], h16[:, 7]
    free = upper - lower - pg.ITEMID_SIZE
    no_lines = (((lower - pg.PAGE_HEADER_SIZE) >> 2) >= MAX_HEAP_TUPLES_PER_PAGE) \
        & ((flags & pg.PD_HAS_FREE_LINES) == 0)
    free[no_lines] = 0
    cand = (prune_xid != 0) & (upper != 0) & (((flags & pg.PD_PAGE_FULL) != 0) | (free < min_free))
    if not cand.any():
        return [], 0
    horizon = backend.instance.procarray.global_xmin()
    cand &= prune_xid < np.uint64(horizon)
    return bufs[np.flatnonzero(cand)].tolist(), horizon


class PagePruner:
    """The opportunistic-pruning hook: the ``prepare_pages`` of every scan of ``rel``
    (``HeapScan(backend, rel, ..., prepare_pages=PagePruner(backend, rel))``, ``seq_scan``,
    an index scan's heap fetches).  Counts the pages it pruned in ``pages_pruned``."""

    __slots__ = ("backend", "rel", "pages_pruned")

    def __init__(self, backend, rel: HeapRel):
        self.backend = backend
        self.rel = rel
        self.pages_pruned = 0

    def __call__(self, bufs, first_block: int | None = None) -> None:
        self.pages_pruned += heap_page_prune_opt(self.backend, self.rel, bufs, first_block)


def record_free_space(backend, rel: HeapRel, blocks, avails) -> None:
    """Record pages' free space in the FSM (call without a heap page locked)."""
    freespace.record_many(backend.bufmgr, rel.relfilenode, np.asarray(blocks, np.int64),
                          np.asarray(avails, np.int64))


# ---------------------------------------------------------------------------------------------
# pruning one page
def prune_page(backend, rel: HeapRel, buf: int, horizon: int) -> tuple[int, int, int]:
    """Prune the page in ``buf`` (cleanup lock held by the caller) against ``horizon``;
    returns (tuples deleted, root line pointers redirected, line pointers made unused).
    The caller records the page's new free space in the FSM after unlocking."""
    return _prune(backend, rel, buf, horizon).counts


def _prune(backend, rel: HeapRel, buf: int, horizon: int, *, block: int | None = None,
           census: bool = True, scalar: bool = False, running_from: int = 0) -> PruneResult:
    """Prune one page (see ``prune_page``).  ``census`` False (opportunistic pruning, which
    only needs ``changed`` and ``free_space``) skips counting what is left - live, recently
    dead, in progress, the LP_DEAD offsets for VACUUM.  ``scalar`` True classifies and
    plans tuple by tuple in plain Python and ``struct`` (``_scan_scalar``) instead of with
    numpy (``_scan_numpy``); the two give the same bytes and the same result.
    ``running_from``: an xid no running transaction precedes (``ProcArray.global_xmin()``
    as computed for this prune), letting the scalar path skip the proc array scan for
    older xids (``RunningAfter``); 0 = not known."""
    bm = backend.bufmgr
    # The caller got a cleanup lock (exclusive, and no other pin at that moment).  Others may
    # pin the page since - a pin needs no lock - but cannot look inside before we unlock.
    assert bm.held[buf] == EXCLUSIVE, "pruning needs a cleanup lock"
    if block is None:
        block = bm.buffer_tag(buf)[2]
    page = bm.page(buf)
    res = PruneResult()
    old_prune_xid, old_flags, _lower, upper = pg.prune_hints(page)
    if upper == 0:  # a new page
        return res
    trace = backend.settings.trace_pruning
    redirects, to_dead, to_unused, ndeleted, nhinted, new_prune_xid, kstates, latest = (
        _scan_scalar(backend, page, block, horizon, running_from, census or trace) if scalar
        else _scan_numpy(backend, page, block, horizon))
    changed = _execute(page, redirects, to_dead, to_unused, new_prune_xid)
    if changed:
        data = _prune_block_data(pg.get_prune_xid(page), redirects, to_dead, to_unused)
        PageRecord(bm).add(buf, data=data).log(
            RM_HEAP2, XLOG_HEAP2_PRUNE, 0,
            _PRUNE_MAIN.pack(latest, len(redirects), len(to_dead), len(to_unused)))
    elif nhinted or new_prune_xid != old_prune_xid or old_flags & pg.PD_PAGE_FULL:
        bm.mark_dirty_hint(buf)

    res.ndeleted = ndeleted
    res.nredirected = len(redirects)
    res.nunused = len(to_unused)
    res.ndead = len(to_dead)
    if census or trace:
        _census(res, page, np.asarray(kstates, dtype=np.uint8))
    res.free_space = pg.heap_free_space(page, MAX_HEAP_TUPLES_PER_PAGE)
    res.changed = changed
    if changed:
        st = prune_stats(backend)
        st["pages_pruned"] += 1
        st["tuples_deleted"] += res.ndeleted
        st["redirected"] += res.nredirected
        st["unused"] += res.nunused
        st["dead"] += res.ndead
    if trace:
        print(f'[prune slot {bm.slot}] "{rel.name}" block {block}: {res.ndeleted} deleted, '
              f"{res.nredirected} redirected, {res.nunused} unused, {res.ndead} dead; "
              f"{res.live} live, {res.recently_dead} recently dead left; free "
              f"{res.free_space} bytes; prune_xid {old_prune_xid} -> {new_prune_xid} "
              f"(horizon {horizon})", file=sys.stderr)
    return res


def _execute(page, redirects, to_dead, to_unused, new_prune_xid: int) -> bool:
    """Apply a prune's plan to ``page`` (heap_page_prune_execute): the line pointers,
    the compaction, ``pd_prune_xid``, ``PD_PAGE_FULL`` cleared.  The primary and redo
    (``redo_prune``) both come here, so they leave the same bytes.  True if any line
    pointer changed."""
    changed = bool(redirects or to_dead or to_unused)
    if changed:
        pg.prune_items(page, redirects, to_dead, to_unused)
    pg.set_prune_xid(page, new_prune_xid)
    flags = _U16.unpack_from(page, pg.OFF_FLAGS)[0]
    if flags & pg.PD_PAGE_FULL:
        pg.set_flags(page, flags & ~pg.PD_PAGE_FULL)
    return changed


def _prune_block_data(prune_xid: int, redirects, to_dead, to_unused) -> bytes:
    """The PRUNE record's block data: the page's new pd_prune_xid (u32), then u16 offsets:
    the redirected (root, target) pairs, the now-dead, the now-unused ones."""
    offs = [o for pair in redirects for o in pair]
    offs += to_dead
    offs += to_unused
    return struct.pack(f"<I{len(offs)}H", prune_xid, *offs)


def redo_prune(page, blk, record) -> None:
    """Redo of Heap2 PRUNE (``recovery.LOGICAL_REDO``): the same line pointer changes,
    compaction and header as ``_prune`` made (hint bits aside: the primary set those
    while classifying, unlogged)."""
    _latest, nredirected, ndead, nunused = _PRUNE_MAIN.unpack_from(record.main, 0)
    data = blk.data
    (prune_xid,) = _U32.unpack_from(data, 0)
    k = 2 * nredirected
    offs = struct.unpack_from(f"<{k + ndead + nunused}H", data, _U32.size)
    redirects = list(zip(offs[0:k:2], offs[1:k:2]))
    _execute(page, redirects, offs[k:k + ndead], offs[k + ndead:], prune_xid)


def _scan_numpy(backend, page, block: int, horizon: int):
    """``_prune``'s classification (hint bits written) and plan, vectorized.  Returns
    (redirects [(root, target)], offsets to make LP_DEAD, offsets to make LP_UNUSED,
    tuples whose storage goes, tuples hinted, the new pd_prune_xid, the states of the
    tuples that stay, the latest removed xid)."""
    n = pg.max_offset(page)
    lp_off, lp_flags, _lp_len = pg.line_pointer_arrays(page)
    normal_idx = np.flatnonzero(lp_flags == pg.LP_NORMAL)
    starts = lp_off[normal_idx].astype(np.int64)
    offsets = normal_idx + 1
    hdr, states, infomask, nhinted = _classify(backend, page, starts, horizon)
    xmax = hdr["xmax"].astype(np.int64)
    redirects, to_dead, to_unused, removed = _plan(page, n, block, lp_flags, offsets,
                                                   states, hdr, infomask, xmax)
    gone = removed[offsets]
    keep = ~gone
    kstates = states[keep]
    waiting = (kstates == RECENTLY_DEAD) | (kstates == DELETE_IN_PROGRESS)
    new_prune_xid = int(xmax[keep][waiting].min()) if waiting.any() else 0
    # HeapTupleHeaderAdvanceConflictHorizon over the DEAD tuples removed
    conflict = (gone & (states == DEAD) & ((infomask & HEAP_XMIN_INVALID) == 0)
                & (xmax != hdr["xmin"].astype(np.int64)))
    latest = int(xmax[conflict].max()) if conflict.any() else 0
    return (redirects, to_dead, to_unused, int(removed.sum()), nhinted, new_prune_xid,
            kstates, latest)


def _scan_scalar(backend, page, block: int, horizon: int, running_from: int = 0,
                 census: bool = True):
    """``_scan_numpy`` tuple by tuple: one ``struct`` read of each line pointer and tuple
    header (from a copy of the page: ``struct`` reads ``bytes`` cheaper than the shared
    array), ``VacuumJudge`` (the scalar ``satisfies_vacuum``) for a tuple the hint bits do
    not settle, and the same chain walk.  A tuple whose hint bits say LIVE (inserter committed, no
    deleter) and that is not heap-only is a chain of one that stays: only its infomask
    pair is read, and it takes no part in the walk.  For one page of an OLTP table (~60
    tuples) this costs a fraction of the ~40 numpy steps, whose cost does not shrink with
    the page.  ``census`` False (an opportunistic prune): the states of the tuples that
    stay are not collected (None in their place)."""
    inst = backend.instance
    judge = VacuumJudge(inst.procarray, inst.clog, running_from)
    data = page.tobytes()
    n = _nline(_U16.unpack_from(data, pg.OFF_LOWER)[0])
    words = struct.unpack_from(f"<{n}I", data, pg.PAGE_HEADER_SIZE)
    # offset -> (state, xmin, xmax, heap-only, HOT successor on this page or 0, infomask)
    tup: dict[int, tuple] = {}
    roots: list[int] = []   # chain roots that need a walk, ascending
    nhinted = 0
    chains = False
    im_unpack, hdr_unpack, im_pack = _U32.unpack_from, _XIDS_CTID.unpack_from, _U16.pack_into
    flags_bits, normal_bits, off_mask, im2_at, plain_mask, plain_live = (
        _LP_FLAGS_BITS, _LP_NORMAL_BITS, _LP_OFF_MASK, _INFOMASK2_OFFSET, _PLAIN_MASK,
        _PLAIN_LIVE)
    for off, v in enumerate(words, 1):
        if v & flags_bits != normal_bits:
            if v & flags_bits == _LP_REDIRECT_BITS:
                roots.append(off)
                chains = True
            continue
        # t_infomask2 | t_infomask << 16, read as one u32
        ims = im_unpack(data, (v & off_mask) + im2_at)[0]
        if ims & plain_mask == plain_live:
            continue  # settled LIVE, not heap-only: a chain of one that stays (counted below)
        at = v & off_mask
        im2 = ims & 0xFFFF
        im = ims >> 16
        ho = im2 & HEAP_ONLY_TUPLE != 0
        if im & _SETTLED_LIVE == _SETTLED_LIVE:  # heap-only, then
            s = LIVE
            x0, x1, cb, co = hdr_unpack(data, at)
        else:
            x0, x1, cb, co = hdr_unpack(data, at)
            if im & _HINT_BITS == _SETTLED_DELETED and x1:
                # inserter and deleter known committed: satisfies_vacuum's last test
                s = RECENTLY_DEAD if x1 >= horizon else DEAD
            else:
                s, h = judge(x0, x1, im, horizon)
                if h:
                    im |= h
                    im_pack(page, at + _INFOMASK_OFFSET, im)
                    nhinted += 1
        # HeapTupleHeaderIsHotUpdated: the flag counts only while xmin and xmax are valid
        hu = (im2 & HEAP_HOT_UPDATED != 0 and not im & HEAP_XMAX_INVALID
              and im & _XMIN_FLAGS != HEAP_XMIN_INVALID)
        if ho or hu:
            chains = True
        # a HOT successor is on the same page by definition
        tup[off] = (s, x0, x1, ho, co if hu and cb == block else 0, im)
        if not ho:
            roots.append(off)
    judge.done()
    removed: set[int] = set()
    redirects: list[tuple[int, int]] = []
    to_dead: list[int] = []
    to_unused: list[int] = []
    if not chains:
        for off, t in tup.items():  # every tuple is a chain of one
            if t[0] == DEAD:
                to_dead.append(off)
                removed.add(off)
    else:
        _walk_chains(n, words, tup, roots, redirects, to_dead, to_unused, removed)
    if census:
        # settled LIVE tuples that are not heap-only: the LP_NORMAL ones not looked at
        nplain = sum(1 for v in words if v & flags_bits == normal_bits) - len(tup)
        kstates = [LIVE] * nplain
    else:
        kstates = None
    new_prune_xid = 0
    latest = 0
    for off, (s, x0, x1, _ho, _nx, im) in tup.items():
        if off in removed:
            # HeapTupleHeaderAdvanceConflictHorizon
            if s == DEAD and not im & HEAP_XMIN_INVALID and x1 != x0 and x1 > latest:
                latest = x1
            continue
        if census:
            kstates.append(s)
        if s == RECENTLY_DEAD or s == DELETE_IN_PROGRESS:
            if new_prune_xid == 0 or x1 < new_prune_xid:
                new_prune_xid = x1
    return (redirects, to_dead, to_unused, len(removed), nhinted, new_prune_xid, kstates,
            latest)


def _nline(lower: int) -> int:
    return (lower - pg.PAGE_HEADER_SIZE) >> 2 if lower > pg.PAGE_HEADER_SIZE else 0


def _classify(backend, page, starts: np.ndarray, horizon: int):
    """``_prune``'s first step: ``satisfies_vacuum_batch`` on every LP_NORMAL tuple (at
    ``starts`` in ``page``), OR-ing the hint bits it learnt into the tuples.  Returns (header
    fields, states, infomask with the new hints, number of tuples hinted)."""
    inst = backend.instance
    hdr = gather_header(FlatViews(page), starts)
    states, hints = satisfies_vacuum_batch(hdr, horizon, inst.procarray, inst.clog)
    hinted = np.flatnonzero(hints)
    if hinted.size:
        im16 = page.view("<u2")
        im16[(starts[hinted] + _INFOMASK_OFFSET) >> 1] |= hints[hinted]
    return hdr, states, hdr["infomask"] | hints, int(hinted.size)


def _plan(page, n: int, block: int, lp_flags, offsets, states, hdr, infomask, xmax):
    """``_prune``'s second step: what becomes of each line pointer (the README's table).
    Returns (redirects [(root, target)], offsets to make LP_DEAD, offsets to make
    LP_UNUSED, ``removed``: by offset, whether the tuple's storage goes away)."""
    im2 = hdr["infomask2"]
    heap_only = (im2 & HEAP_ONLY_TUPLE) != 0
    # HeapTupleHeaderIsHotUpdated: the flag counts only while xmin and xmax are valid
    hot_updated = (((im2 & HEAP_HOT_UPDATED) != 0) & ((infomask & HEAP_XMAX_INVALID) == 0)
                   & ((infomask & _XMIN_FLAGS) != HEAP_XMIN_INVALID))
    removed = np.zeros(n + 1, dtype=bool)
    redirects: list[tuple[int, int]] = []
    to_dead: list[int] = []
    to_unused: list[int] = []
    if not heap_only.any() and not hot_updated.any() and not (lp_flags == pg.LP_REDIRECT).any():
        # no HOT chain on the page: every tuple is a chain of one (vectorized)
        dead_offs = offsets[states == DEAD]
        to_dead = dead_offs.tolist()
        removed[dead_offs] = True
        return redirects, to_dead, to_unused, removed
    # the chain walk of the scalar path, over the same per-offset facts
    nxt = np.where(hot_updated & (hdr["ctid_block"] == block), hdr["ctid_offset"], 0)
    tup = dict(zip(offsets.tolist(),
                   zip(states.tolist(), hdr["xmin"].tolist(), xmax.tolist(),
                       heap_only.tolist(), nxt.tolist(), infomask.tolist())))
    roots = (np.flatnonzero((lp_flags == pg.LP_REDIRECT) | (lp_flags == pg.LP_NORMAL)) + 1)
    is_root = np.ones(n + 1, dtype=bool)
    is_root[offsets[heap_only]] = False
    roots = roots[is_root[roots]].tolist()
    words = np.frombuffer(page, dtype="<u4", count=n, offset=pg.PAGE_HEADER_SIZE).tolist()
    gone: set[int] = set()
    _walk_chains(n, words, tup, roots, redirects, to_dead, to_unused, gone)
    if gone:
        removed[list(gone)] = True
    return redirects, to_dead, to_unused, removed


def _census(res: PruneResult, page, kstates) -> None:
    """What is left on the pruned page (VACUUM's counts, and the trace line)."""
    res.live = int(np.count_nonzero(kstates == LIVE))
    res.recently_dead = int(np.count_nonzero(kstates == RECENTLY_DEAD))
    res.insert_in_progress = int(np.count_nonzero(kstates == INSERT_IN_PROGRESS))
    res.delete_in_progress = int(np.count_nonzero(kstates == DELETE_IN_PROGRESS))
    _, new_flags, _ = pg.line_pointer_arrays(page)
    res.dead_offsets = np.flatnonzero(new_flags == pg.LP_DEAD).astype(np.int64) + 1


def _walk_chains(n, words, tup, roots, redirects, to_dead, to_unused, removed) -> None:
    """Decide what happens to every chain of the page (the table in the docstring).

    ``words``: the line pointers (index i = offset i+1); ``tup``: offset -> (HTSV state,
    xmin, xmax, heap-only, the offset of its HOT successor on this page or 0, infomask)
    for the LP_NORMAL tuples that matter - an LP_NORMAL offset missing from it is a LIVE
    tuple, not heap-only, not HOT-updated, i.e. a chain of one that stays and that ends
    any chain reaching it; ``roots``: the LP_REDIRECT items and the LP_NORMAL tuples of
    ``tup`` that are not heap-only, ascending.  Appends to ``redirects`` / ``to_dead`` /
    ``to_unused`` and adds to the set ``removed`` every tuple whose storage goes away.
    Plain Python: at most MAX_HEAP_TUPLES_PER_PAGE items, and only pages that have HOT
    chains come here."""
    processed: set[int] = set()
    for root in roots:
        chain: list[int] = []
        ndeadchain = 0
        off = root
        prior_xmax = -1
        while 1 <= off <= n and off not in processed:
            v = words[off - 1]
            f = (v >> _LP_FLAGS_SHIFT) & 3
            if f == pg.LP_REDIRECT:
                if chain:
                    break  # a redirect inside a chain: not this chain
                chain.append(off)
                off = v & _LP_OFF_MASK
                continue
            if f != pg.LP_NORMAL:
                break  # UNUSED or DEAD: the chain ended before
            t = tup.get(off)
            if t is None or (chain and not t[3]):
                break  # a successor must be heap-only
            s, x0, x1, _ho, nxt, _im = t
            if prior_xmax >= 0 and x0 != prior_xmax:
                break  # the slot was reused by something else: the chain is broken
            chain.append(off)
            if s == DEAD:
                ndeadchain = len(chain)
            elif s != RECENTLY_DEAD:
                break  # LIVE or in progress: it and everything after it stay
            if not nxt:
                break  # not HOT-updated (within this page)
            prior_xmax = x1
            off = nxt
        processed.add(root)
        processed.update(chain)
        root_is_redirect = (words[root - 1] >> _LP_FLAGS_SHIFT) & 3 == pg.LP_REDIRECT
        if root_is_redirect and len(chain) < 2:
            to_dead.append(root)  # points at nothing valid any more
            continue
        if ndeadchain == 0:
            continue
        if not root_is_redirect:
            removed.add(root)
        if ndeadchain == len(chain):
            to_dead.append(root)
            members = chain[1:]
        else:
            redirects.append((root, chain[ndeadchain]))
            members = chain[1:ndeadchain]
        for o in members:
            to_unused.append(o)
            removed.add(o)

    # heap-only tuples that no chain reached: a DEAD one is an aborted HOT update's version
    for off, t in tup.items():
        if t[3] and t[0] == DEAD and off not in processed:
            to_unused.append(off)
            removed.add(off)
