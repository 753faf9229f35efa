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
checked again under the cleanup lock.

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

Departures from PostgreSQL: 64-bit xids, so no freezing during pruning and no
``latestRemovedXid`` (no WAL, no standbys); no visibility map; the ``PD_HAS_FREE_LINES``
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
from minidb.storage.htup import (HEAP_HOT_UPDATED, HEAP_ONLY_TUPLE, HEAP_XMAX_INVALID,
                                 HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID)
from minidb.storage import freespace
from minidb.storage import page as pg
from minidb.storage.xloginsert import PageRecord
from minidb.wal.record import RM_HEAP2, XLOG_HEAP2_PRUNE
from minidb.storage.bufmgr import EXCLUSIVE
from minidb.txn.visibility import (DEAD, DELETE_IN_PROGRESS, INSERT_IN_PROGRESS, LIVE,
                                   RECENTLY_DEAD, satisfies_vacuum, satisfies_vacuum_batch)

_PRUNE_MAIN = struct.Struct("<QHHH")  # PRUNE main data: horizon, nredirected, ndead, nunused

# Prune only pages with less free space than this fraction of a block (or than fillfactor
# keeps free, if more): PostgreSQL's BLCKSZ / 10 in heap_page_prune_opt.
PRUNE_MIN_FREE_DIVISOR = 10

_INFOMASK_OFFSET = 32  # t_infomask inside the tuple header (layout.py)
_TUPLE_HEADER = struct.Struct("<QQIIIHHH")  # xmin xmax cmin cmax ctid.block ctid.offset im2 im
_U16 = struct.Struct("<H")
_LP_OFF_MASK = 0x7FFF  # line pointer word: lp_off (15 bits), lp_flags (2), lp_len (15)
_LP_FLAGS_SHIFT = 15
_SETTLED_LIVE = HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID  # inserter committed, no deleter
_XMIN_FLAGS = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID

_STAT_NAMES = ("attempted", "pages_pruned", "tuples_deleted", "redirected", "unused", "dead",
               "skipped_busy")


def prune_stats(backend) -> dict[str, int]:
    """This backend's pruning counters (created on first use)."""
    st = getattr(backend, "prune_stats", None)
    if st is None:
        st = dict.fromkeys(_STAT_NAMES, 0)
        backend.prune_stats = st
    return st


@dataclass
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
    dead_offsets: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
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
    min_free = min_free_space(settings)
    if type(bufs) is int or (type(bufs) is np.ndarray and bufs.size == 1):
        # One page (an index scan's heap fetch): conditions 2 and 3 as scalars - the
        # numpy batch test below costs ~40 us, as much as a whole index lookup.
        b = int(bufs) if type(bufs) is int else int(bufs.reshape(-1)[0])
        page = bm.seg.buf_pages[b]
        pxid = pg.get_prune_xid(page)
        if not pxid:
            return 0
        upper = pg.get_upper(page)
        if upper == 0 or not _needs_space(pg.get_flags(page), pg.get_lower(page), upper,
                                          min_free):
            return 0
        # the cheap bound first (GlobalVis): the exact horizon only for a page to prune
        procarray = backend.instance.procarray
        if pxid >= procarray.vis_horizon(pxid, backend.slot):
            return 0
        horizon = procarray.global_xmin()
        cands = [b]
    else:
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
            page = bm.page(b)
            pxid = pg.get_prune_xid(page)
            if (pxid == 0 or pxid >= horizon
                    or not _needs_space(pg.get_flags(page), pg.get_lower(page),
                                        pg.get_upper(page), min_free)):
                continue
            block = bm.buffer_tag(b)[2]
            r = _prune(backend, rel, b, horizon, block=block, census=False, scalar=scalar)
        finally:
            bm.unlock(b)
        if r.changed:
            pruned_blocks.append(block)
            pruned_free.append(r.free_space)
    if pruned_blocks:
        freespace.record_many(bm, rel.relfilenode, np.array(pruned_blocks),
                              np.array(pruned_free))
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
           census: bool = True, scalar: bool = False) -> PruneResult:
    """Prune one page (see ``prune_page``).  ``census`` False (opportunistic pruning, which
    only needs ``changed`` and ``free_space``) skips counting what is left - live, recently
    dead, in progress, the LP_DEAD offsets for VACUUM.  ``scalar`` True classifies and
    plans tuple by tuple in plain Python and ``struct`` (``_scan_scalar``) instead of with
    numpy (``_scan_numpy``); the two give the same bytes and the same result."""
    bm = backend.bufmgr
    # The caller got a cleanup lock (exclusive, and no other pin at that moment).  Others may
    # pin the page since - a pin needs no lock - but cannot look inside before we unlock.
    assert bm.held[buf] == EXCLUSIVE, "pruning needs a cleanup lock"
    if block is None:
        block = bm.buffer_tag(buf)[2]
    page = bm.page(buf)
    res = PruneResult()
    if pg.page_is_new(page):
        return res
    old_prune_xid = pg.get_prune_xid(page)
    old_flags = pg.get_flags(page)
    scan = _scan_scalar if scalar else _scan_numpy
    redirects, to_dead, to_unused, ndeleted, nhinted, new_prune_xid, kstates = scan(
        backend, page, block, horizon)
    wr = PageRecord(bm).add(buf) if (redirects or to_dead or to_unused) else None
    changed = _apply(page, redirects, to_dead, to_unused)

    pg.set_prune_xid(page, new_prune_xid)
    pg.set_flags(page, pg.get_flags(page) & ~pg.PD_PAGE_FULL)
    if changed:
        wr = wr or PageRecord(bm).add(buf)
        wr.log(RM_HEAP2, XLOG_HEAP2_PRUNE, 0,
               _PRUNE_MAIN.pack(horizon, len(redirects), len(to_dead), len(to_unused)))
    elif nhinted or new_prune_xid != old_prune_xid or old_flags & pg.PD_PAGE_FULL:
        bm.mark_dirty_hint(buf)

    res.ndeleted = ndeleted
    res.nredirected = len(redirects)
    res.nunused = len(to_unused)
    res.ndead = len(to_dead)
    trace = backend.settings.trace_pruning
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


def _scan_numpy(backend, page, block: int, horizon: int):
    """``_prune``'s classification (hint bits written) and plan, vectorized.  Returns
    (redirects [(root, target)], offsets to make LP_DEAD, offsets to make LP_UNUSED,
    tuples whose storage goes, tuples hinted, the new pd_prune_xid, the states of the
    tuples that stay)."""
    n = pg.max_offset(page)
    lp_off, lp_flags, _lp_len = pg.line_pointer_arrays(page)
    normal_idx = np.flatnonzero(lp_flags == pg.LP_NORMAL)
    starts = lp_off[normal_idx].astype(np.int64)
    offsets = normal_idx + 1
    hdr, states, infomask, nhinted = _classify(backend, page, starts, horizon)
    xmax = hdr["xmax"].astype(np.int64)
    redirects, to_dead, to_unused, removed = _plan(n, block, lp_flags, lp_off, offsets,
                                                   states, hdr, infomask, xmax)
    keep = ~removed[offsets]
    kstates = states[keep]
    waiting = (kstates == RECENTLY_DEAD) | (kstates == DELETE_IN_PROGRESS)
    new_prune_xid = int(xmax[keep][waiting].min()) if waiting.any() else 0
    return (redirects, to_dead, to_unused, int(removed.sum()), nhinted, new_prune_xid,
            kstates)


def _scan_scalar(backend, page, block: int, horizon: int):
    """``_scan_numpy`` tuple by tuple: one ``struct`` read of each line pointer and tuple
    header, the scalar ``satisfies_vacuum`` for a tuple the hint bits do not settle, and
    the same chain walk.  For one page of an OLTP table (~60 tuples) this costs about a
    third of the ~40 numpy steps, whose cost does not shrink with the page."""
    inst = backend.instance
    procarray, clog = inst.procarray, inst.clog
    n = pg.max_offset(page)
    words = struct.unpack_from(f"<{n}I", page, pg.PAGE_HEADER_SIZE)
    size = n + 1
    flags = [0] * size
    redirect_to = [0] * size
    st = [255] * size
    xmin_l = [0] * size
    xmax_l = [0] * size
    only = [False] * size
    hot = [False] * size
    next_off = [0] * size
    offs: list[int] = []
    nhinted = 0
    chains = False
    hdr_unpack, im_pack = _TUPLE_HEADER.unpack_from, _U16.pack_into
    for off, v in enumerate(words, 1):
        f = (v >> _LP_FLAGS_SHIFT) & 3
        flags[off] = f
        if f != pg.LP_NORMAL:
            if f == pg.LP_REDIRECT:
                redirect_to[off] = v & _LP_OFF_MASK
                chains = True
            continue
        at = v & _LP_OFF_MASK
        x0, x1, _cmin, _cmax, cb, co, im2, im = hdr_unpack(page, at)
        if im & _SETTLED_LIVE == _SETTLED_LIVE:
            s = LIVE
        else:
            s, h = satisfies_vacuum(x0, x1, im, horizon, procarray, clog)
            if h:
                im |= h
                im_pack(page, at + _INFOMASK_OFFSET, im)
                nhinted += 1
        offs.append(off)
        st[off], xmin_l[off], xmax_l[off] = s, x0, x1
        ho = im2 & HEAP_ONLY_TUPLE != 0
        only[off] = ho
        # HeapTupleHeaderIsHotUpdated: the flag counts only while xmin and xmax are valid
        hu = (im2 & HEAP_HOT_UPDATED != 0 and not im & HEAP_XMAX_INVALID
              and im & _XMIN_FLAGS != HEAP_XMIN_INVALID)
        if ho or hu:
            chains = True
        hot[off] = hu and cb == block
        next_off[off] = co
    removed = [False] * size
    redirects: list[tuple[int, int]] = []
    to_dead: list[int] = []
    to_unused: list[int] = []
    if not chains:
        for off in offs:  # every tuple is a chain of one
            if st[off] == DEAD:
                to_dead.append(off)
                removed[off] = True
    else:
        _walk_chain_lists(n, flags, redirect_to, st, xmin_l, xmax_l, only, hot, next_off,
                          offs, redirects, to_dead, to_unused, removed)
    kstates = []
    new_prune_xid = 0
    for off in offs:
        if removed[off]:
            continue
        s = st[off]
        kstates.append(s)
        if s == RECENTLY_DEAD or s == DELETE_IN_PROGRESS:
            x = xmax_l[off]
            if new_prune_xid == 0 or x < new_prune_xid:
                new_prune_xid = x
    return (redirects, to_dead, to_unused, sum(removed), nhinted, new_prune_xid, kstates)


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


def _plan(n: int, block: int, lp_flags, lp_off, offsets, states, hdr, infomask, xmax):
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
    else:
        _walk_chains(n, block, lp_flags, lp_off, offsets, states, hdr["xmin"], xmax,
                     heap_only, hot_updated, hdr["ctid_block"], hdr["ctid_offset"],
                     redirects, to_dead, to_unused, removed)
    return redirects, to_dead, to_unused, removed


def _apply(page, redirects, to_dead, to_unused) -> bool:
    """``_prune``'s third step: change the line pointers and compact the page; True if
    anything changed."""
    for off in to_unused:
        pg.set_item_unused(page, off)
    for off in to_dead:
        pg.set_item_dead(page, off, keep_storage=False)
    for root, target in redirects:
        pg.set_item_redirect(page, root, target)
    changed = bool(to_unused or to_dead or redirects)
    if changed:
        pg.repair_fragmentation(page)
    return changed


def _census(res: PruneResult, page, kstates) -> None:
    """What is left on the pruned page (VACUUM's counts, and the trace line)."""
    res.live = int(np.count_nonzero(kstates == LIVE))
    res.recently_dead = int(np.count_nonzero(kstates == RECENTLY_DEAD))
    res.insert_in_progress = int(np.count_nonzero(kstates == INSERT_IN_PROGRESS))
    res.delete_in_progress = int(np.count_nonzero(kstates == DELETE_IN_PROGRESS))
    _, new_flags, _ = pg.line_pointer_arrays(page)
    res.dead_offsets = np.flatnonzero(new_flags == pg.LP_DEAD).astype(np.int64) + 1


def _walk_chains(n, block, lp_flags, lp_off, offsets, states, xmin, xmax, heap_only,
                 hot_updated, ctid_block, ctid_offset, redirects, to_dead, to_unused,
                 removed) -> None:
    """Decide what happens to every chain of the page (the table in the docstring).

    Appends to ``redirects`` / ``to_dead`` / ``to_unused`` and sets ``removed[off]`` for
    every tuple whose storage goes away.  Python over per-offset lists: at most
    MAX_HEAP_TUPLES_PER_PAGE items, and only pages that have HOT chains come here."""
    flags = [0] + lp_flags.tolist()
    redirect_to = [0] + lp_off.tolist()
    # per-offset tuple facts (index 0 unused; items that are not LP_NORMAL keep defaults)
    st = [255] * (n + 1)
    xmin_l = [0] * (n + 1)
    xmax_l = [0] * (n + 1)
    only = [False] * (n + 1)
    hot = [False] * (n + 1)
    next_off = [0] * (n + 1)
    offs = offsets.tolist()
    for k, off, s, x0, x1, ho, hu, cb, co in zip(range(len(offs)), offs, states.tolist(),
                                                xmin.tolist(), xmax.tolist(),
                                                heap_only.tolist(), hot_updated.tolist(),
                                                ctid_block.tolist(), ctid_offset.tolist()):
        st[off], xmin_l[off], xmax_l[off], only[off] = s, x0, x1, ho
        hot[off] = hu and cb == block  # a HOT successor is on the same page by definition
        next_off[off] = co
    _walk_chain_lists(n, flags, redirect_to, st, xmin_l, xmax_l, only, hot, next_off, offs,
                      redirects, to_dead, to_unused, removed)


def _walk_chain_lists(n, flags, redirect_to, st, xmin_l, xmax_l, only, hot, next_off, offs,
                      redirects, to_dead, to_unused, removed) -> None:
    """The chain walk of ``_walk_chains`` over per-offset lists (index 0 unused): line
    pointer flags, redirect targets, HTSV states, xmin, xmax, heap-only, HOT-updated
    within the page, t_ctid offset; ``offs`` the LP_NORMAL offsets in order."""
    processed = [False] * (n + 1)

    for root in range(1, n + 1):
        f = flags[root]
        if not (f == pg.LP_REDIRECT or (f == pg.LP_NORMAL and not only[root])):
            continue
        chain: list[int] = []
        ndeadchain = 0
        off = root
        prior_xmax = -1
        while 1 <= off <= n and not processed[off]:
            f = flags[off]
            if f == pg.LP_REDIRECT:
                if chain:
                    break  # a redirect inside a chain: not this chain
                chain.append(off)
                off = redirect_to[off]
                continue
            if f != pg.LP_NORMAL:
                break  # UNUSED or DEAD: the chain ended before
            if chain and not only[off]:
                break  # a successor must be heap-only
            if prior_xmax >= 0 and xmin_l[off] != prior_xmax:
                break  # the slot was reused by something else: the chain is broken
            chain.append(off)
            s = st[off]
            if s == DEAD:
                ndeadchain = len(chain)
            elif s != RECENTLY_DEAD:
                break  # LIVE or in progress: it and everything after it stay
            if not hot[off]:
                break
            prior_xmax = xmax_l[off]
            off = next_off[off]
        processed[root] = True
        for o in chain:
            processed[o] = True
        root_is_redirect = flags[root] == pg.LP_REDIRECT
        if root_is_redirect and len(chain) < 2:
            to_dead.append(root)  # points at nothing valid any more
            continue
        if ndeadchain == 0:
            continue
        if not root_is_redirect:
            removed[root] = True
        if ndeadchain == len(chain):
            to_dead.append(root)
            members = chain[1:]
        else:
            redirects.append((root, chain[ndeadchain]))
            members = chain[1:ndeadchain]
        for o in members:
            to_unused.append(o)
            removed[o] = True

    # heap-only tuples that no chain reached: a DEAD one is an aborted HOT update's version
    for off in offs:
        if only[off] and not processed[off] and st[off] == DEAD:
            to_unused.append(off)
            removed[off] = True
