"""Slotted pages: PostgreSQL's page layout, shared by heap and B-tree pages.

Every block of every relation is an 8192-byte page living in the shared buffer
pool; this module lays out items inside one page and knows nothing of what the
items mean.  A page is a 1-D ``np.ndarray`` of ``uint8`` and length ``BLCKSZ``
(usually a writable view of a buffer-pool frame); every function works in place
on that view and never allocates a replacement page.  Single-page routines use
``struct`` on the buffer (numpy element access costs microseconds per field);
batch routines (checksums, header decoding) are vectorized over ``(n, BLCKSZ)``.

Interface routines (PostgreSQL's bufpage.c name in brackets):

  init_page [PageInit]            add_item [PageAddItemExtended]
  add_heap_tuple (add_item of a heap tuple + its t_ctid, one header read in the usual case)
  repair_fragmentation            delete_items [PageIndexMultiDelete]
    [PageRepairFragmentation]     free_space [PageGetFreeSpace]
  prune_items (a heap prune's line pointer changes + repair_fragmentation)
    [heap_page_prune_execute's page part]
  heap_free_space                 set_item_dead / set_item_unused /
    [PageGetHeapFreeSpace]          set_item_redirect [ItemIdSetDead ...]
  check_page_header [PageIsVerified]       compute_checksums / set_checksum /
  check_page (header + line pointers)        verify_checksums [pg_checksum_page]
  items / dump_page (inspection)  page_headers / check_page_headers (batch)

Layout::

    0        page header (24 bytes)
    24       line pointers, 4 bytes each, growing up  -> pd_lower
             free space (kept zero)
    pd_upper item storage, growing down, 8-byte aligned starts
    pd_special  special space (0 bytes for heap, B-tree opaque data for indexes)
    8192

Page header (little-endian):

    ======  ====  ===================  ============================================
    OFFSET  SIZE  FIELD                MEANING
    ======  ====  ===================  ============================================
    0       8     pd_lsn               uint64: end LSN of the last WAL record that
                                       changed the page (set by minidb.storage.xloginsert)
    8       2     pd_checksum          uint16, 0 = never set; see compute_checksums
    10      2     pd_flags             PD_HAS_FREE_LINES 0x1, PD_PAGE_FULL 0x2,
                                       PD_ALL_VISIBLE 0x4 (all hints),
                                       PD_NO_NULLS 0x8 (heap; see below)
    12      2     pd_lower             end of the line pointer array
    14      2     pd_upper             start of item storage; 0 = page is new
    16      2     pd_special           start of special space
    18      2     pd_pagesize_version  BLCKSZ | PG_PAGE_LAYOUT_VERSION (8197)
    20      4     pd_prune_xid         oldest xid that may have left prunable
                                       tuples; 0 = none (saturates at 2**32 - 1)
    ======  ====  ===================  ============================================

Line pointer (ItemIdData), one little-endian uint32 at 24 + 4 * (offset - 1):

    ======  =====  ========  ===================================================
    BITS    WIDTH  FIELD     MEANING
    ======  =====  ========  ===================================================
    0-14    15     lp_off    byte offset of the item; for LP_REDIRECT the
                             offset *number* of the target line pointer
    15-16   2      lp_flags  LP_UNUSED 0, LP_NORMAL 1, LP_REDIRECT 2, LP_DEAD 3
    17-31   15     lp_len    item length in bytes; 0 = no storage
    ======  =====  ========  ===================================================

Line pointer states and the function that performs each transition:

    ===========  ===========  ===============================  ===================
    FROM         TO           FUNCTION                         WHO / WHY
    ===========  ===========  ===============================  ===================
    (none)       NORMAL       add_item (appends a pointer)     insert
    UNUSED       NORMAL       add_item (heap: first UNUSED)    insert, reuse slot
    NORMAL       DEAD         set_item_dead(keep_storage=F)    heap pruning
    NORMAL       DEAD         set_item_dead(keep_storage=T)    index: kill item
    DEAD         DEAD         set_item_dead                    idempotent re-kill
    NORMAL       REDIRECT     set_item_redirect                prune HOT chain root
    REDIRECT     REDIRECT     set_item_redirect                re-point the chain
    REDIRECT     DEAD         set_item_dead(keep_storage=F)    whole chain dead
    DEAD         UNUSED       set_item_unused                  vacuum, after index
                                                               entries are gone
    REDIRECT     UNUSED       set_item_unused                  vacuum
    NORMAL       UNUSED       set_item_unused                  pruning a dead
                                                               heap-only tuple
    any          (removed)    delete_items                     index pages only
    ===========  ===========  ===============================  ===================

    (none) --add--> NORMAL --dead--> DEAD --unused--> UNUSED --add--> NORMAL
                      |                ^                 ^
                      +--redirect--> REDIRECT -----------+

Each transition is checked with an ``assert``.  Storage left behind by an item
that became UNUSED, REDIRECT or DEAD-without-storage stays where it is (the page
does not get emptier) until ``repair_fragmentation`` or ``delete_items`` compacts.

Invariants (``check_page`` verifies 1-4 and the padding of 5; tests check all of them):

  1. 24 <= pd_lower <= pd_upper <= pd_special <= BLCKSZ, pd_special is a multiple
     of 8, (pd_lower - 24) is a multiple of 4, pd_pagesize_version == 8196 --
     unless the page is new (pd_upper == 0), in which case it is all zero.
  2. An item has storage iff lp_len > 0; only NORMAL and DEAD items have storage;
     LP_UNUSED pointers are all-zero words.  Every storage range lies inside
     [pd_upper, pd_special), starts 8-byte aligned, and no two ranges overlap.
  3. An offset number keeps naming the same line pointer until ``delete_items``
     removes a pointer before it (index pages).  Nothing else renumbers: heap TIDs
     are stable, and ``repair_fragmentation`` moves bytes, never pointers.
  4. If some line pointer is LP_UNUSED, PD_HAS_FREE_LINES is set.  The converse
     need not hold: the flag is a hint, cleared lazily by add_item.
  4a. On a heap page with PD_NO_NULLS set no tuple has HEAP_HASNULL.  Only a bulk
     load's freshly built page sets it (``heapam._fill_page``); ``add_item`` (and
     ``add_heap_tuple``) of a heap tuple with HEAP_HASNULL clears it, so every insert,
     update and redo that places a tuple through them keeps it true, and pruning, vacuum and
     compaction only remove tuples.  A scan then knows a batch of such pages has no
     NULL without reading every tuple's t_infomask (losing the bit costs only that).
  5. The free space [pd_lower, pd_upper) is all zero, and so is every item's alignment
     padding (the bytes from its end to the next multiple of 8): every writer places
     items into zeroed space, and compaction moves them with their padding.  Page
     images are deterministic, and ``_compact`` moves a run of adjacent items as one
     slice, padding included (``check_page`` verifies the padding).
  6. Nothing here changes pd_lsn: the caller that changes a page logs the change
     (``minidb.storage.xloginsert``), which sets pd_lsn to the record's end LSN.

Departures from PostgreSQL:

  * Layout version 5, not PostgreSQL's 4 (the fields are PostgreSQL's): minidb's
    version-4 pages had a 4-byte change counter in place of pd_lsn and an 8-byte
    pd_prune_xid; such data directories are refused when opened.
  * pd_prune_xid keeps PostgreSQL's 32 bits although minidb's xids are 64-bit:
    it is a hint, and a larger xid is stored as 2**32 - 1 (pruning is then tried
    whenever the page looks full, which is still correct).
  * The checksum is minidb's own (a weighted sum of 64-bit words with a final
    mix, see ``compute_checksums``), chosen because it vectorizes over many pages
    in numpy; PostgreSQL's FNV-1a variant is built for SIMD C loops.  Like
    PostgreSQL's it is 16 bits, covers the block number, and is never 0.
  * add_item with an explicit offset on a heap page only fills an UNUSED slot or
    appends (PostgreSQL's PAI_OVERWRITE); shifting line pointers is for index
    pages (heap=False).
  * repair_fragmentation also compacts DEAD items that kept their storage (index
    pages), where PostgreSQL's heap-only version requires DEAD to be storage-free.
  * Free space and alignment padding are kept zeroed (invariant 5); PostgreSQL leaves
    garbage there.  Compaction relies on it to move adjacent items as one slice.
  * PD_NO_NULLS (invariant 4a) is minidb's: PostgreSQL's scan deforms tuple by
    tuple and looks at each one's HEAP_HASNULL anyway; a vectorized gather would
    otherwise read every tuple's t_infomask just to learn that none has a NULL.

Left out: PageIndexTupleOverwrite with a size change
(``overwrite_item`` requires the same length); PageTruncateLinePointerArray
(trailing UNUSED pointers are never truncated); large pages (lp_off and lp_len
are 15 bits, enough for BLCKSZ 8192 only); page-level compression.
"""

from __future__ import annotations

import struct
from itertools import chain, repeat
from operator import and_ as _and

import numpy as np

from minidb.config import BLCKSZ
from minidb.errors import DataCorrupted, InternalError, ProgramLimitExceeded
from minidb.storage.htup import HEAP_HASNULL

# -- constants ---------------------------------------------------------------------------------

PAGE_HEADER_SIZE = 24
ITEMID_SIZE = 4
MAXALIGN = 8  # as on 64-bit PostgreSQL builds: item starts are 8-byte aligned
PG_PAGE_LAYOUT_VERSION = 5  # PostgreSQL's field layout (its version 4) with minidb's number
PAGESIZE_VERSION = BLCKSZ | PG_PAGE_LAYOUT_VERSION

LP_UNUSED = 0  # free slot, no storage
LP_NORMAL = 1  # points at an item, has storage
LP_REDIRECT = 2  # HOT redirect: lp_off is a target offset number, no storage
LP_DEAD = 3  # dead; heap: no storage, index: keeps storage

PD_HAS_FREE_LINES = 0x1  # some line pointer may be LP_UNUSED
PD_PAGE_FULL = 0x2  # an UPDATE found no room here: pruning may be worthwhile
PD_ALL_VISIBLE = 0x4  # every tuple is visible to every snapshot
PD_NO_NULLS = 0x8  # heap: no tuple on the page has HEAP_HASNULL (invariant 4a)
PD_VALID_FLAG_BITS = 0xF

_LP_OFF_MASK = 0x7FFF
_LP_FLAGS_SHIFT = 15
_LP_LEN_SHIFT = 17
_LP_MAX = 0x7FFF  # 15-bit lp_off and lp_len
_LP_FLAGS_MASK = 3 << _LP_FLAGS_SHIFT

# header field offsets (the table in the docstring)
_OFF_LSN = 0
_OFF_CHECKSUM = 8
_OFF_FLAGS = 10
_OFF_INFOMASK = 32  # a heap tuple's t_infomask (HEAP_HASNULL is in its low byte)
_OFF_LOWER = 12
_OFF_UPPER = 14
_OFF_SPECIAL = 16
_OFF_VERSION = 18
_OFF_PRUNE_XID = 20
MAX_PRUNE_XID = 0xFFFFFFFF
OFF_LOWER = _OFF_LOWER  # for modules that read pd_lower straight from the pool
OFF_PRUNE_XID = _OFF_PRUNE_XID  # for the point path's PageIsPrunable test
OFF_FLAGS = _OFF_FLAGS  # for scans that read pd_flags of many pages at once

_HEADER = struct.Struct("<QHHHHHHI")
assert _HEADER.size == PAGE_HEADER_SIZE
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_LOWER_UPPER = struct.Struct("<HH")
_LOWER_UPPER_SPECIAL = struct.Struct("<HHH")


def maxalign(n: int) -> int:
    """Round ``n`` up to a multiple of MAXALIGN (PostgreSQL's MAXALIGN macro)."""
    return (n + (MAXALIGN - 1)) & ~(MAXALIGN - 1)


def _lp_pack(lp_off: int, lp_flags: int, lp_len: int) -> int:
    return lp_off | (lp_flags << _LP_FLAGS_SHIFT) | (lp_len << _LP_LEN_SHIFT)


def _lp_pos(off: int) -> int:
    """Byte position of line pointer ``off`` (1-based)."""
    return PAGE_HEADER_SIZE + ITEMID_SIZE * (off - 1)


def _nline(lower: int) -> int:
    return (lower - PAGE_HEADER_SIZE) >> 2 if lower > PAGE_HEADER_SIZE else 0


def _bytes_view(data) -> memoryview:
    """A flat byte memoryview of ``data`` (bytes, bytearray, memoryview, uint8 ndarray)."""
    mv = memoryview(data)
    if mv.format != "B" or mv.ndim != 1:
        if not mv.c_contiguous:
            mv = memoryview(np.ascontiguousarray(data))
        mv = mv.cast("B")
    return mv


# -- header ------------------------------------------------------------------------------------

def init_page(page, special_size: int = 0) -> None:
    """Format ``page`` as an empty page with ``special_size`` bytes of special space [PageInit]."""
    special = BLCKSZ - maxalign(special_size)
    if special_size < 0 or special < PAGE_HEADER_SIZE:
        raise InternalError(f"invalid special space size {special_size} for a {BLCKSZ}-byte page")
    np.frombuffer(page, dtype=np.uint8)[:] = 0
    _HEADER.pack_into(page, 0, 0, 0, 0, PAGE_HEADER_SIZE, special, special, PAGESIZE_VERSION, 0)


def page_is_new(page) -> bool:
    """True if the page was never initialised (pd_upper == 0) [PageIsNew]."""
    return _U16.unpack_from(page, _OFF_UPPER)[0] == 0


def get_lower(page) -> int:
    return _U16.unpack_from(page, _OFF_LOWER)[0]


def get_upper(page) -> int:
    return _U16.unpack_from(page, _OFF_UPPER)[0]


def get_special(page) -> int:
    return _U16.unpack_from(page, _OFF_SPECIAL)[0]


def get_flags(page) -> int:
    return _U16.unpack_from(page, _OFF_FLAGS)[0]


def set_flags(page, flags: int) -> None:
    """Store pd_flags (hints: does not bump pd_lsn)."""
    if flags & ~PD_VALID_FLAG_BITS:
        raise InternalError(f"invalid page flags 0x{flags:x}")
    _U16.pack_into(page, _OFF_FLAGS, flags)


def get_prune_xid(page) -> int:
    return _U32.unpack_from(page, _OFF_PRUNE_XID)[0]


_PRUNE_HINTS = struct.Struct("<10xHHH4xI")   # pd_flags, pd_lower, pd_upper, pd_prune_xid


def prune_hints(page) -> tuple[int, int, int, int]:
    """(pd_prune_xid, pd_flags, pd_lower, pd_upper) in one read: what opportunistic pruning
    looks at first."""
    flags, lower, upper, pxid = _PRUNE_HINTS.unpack_from(page, 0)
    return pxid, flags, lower, upper


def set_prune_xid(page, xid: int) -> None:
    """Store pd_prune_xid (a hint; an xid beyond 32 bits is stored as 2**32 - 1)."""
    _U32.pack_into(page, _OFF_PRUNE_XID, min(xid, MAX_PRUNE_XID))


def get_lsn(page) -> int:
    """pd_lsn: the end LSN of the last WAL record that changed the page."""
    return _U64.unpack_from(page, _OFF_LSN)[0]


def set_lsn(page, lsn: int) -> None:
    """Store pd_lsn [PageSetLSN]."""
    _U64.pack_into(page, _OFF_LSN, lsn)


def bump_lsn(page) -> None:
    """Add one to pd_lsn: for tests and tools that change pages without the log."""
    _U64.pack_into(page, _OFF_LSN, _U64.unpack_from(page, _OFF_LSN)[0] + 1)


def get_checksum(page) -> int:
    return _U16.unpack_from(page, _OFF_CHECKSUM)[0]


def max_offset(page) -> int:
    """Number of line pointers [PageGetMaxOffsetNumber]."""
    return _nline(_U16.unpack_from(page, _OFF_LOWER)[0])


# -- line pointers -----------------------------------------------------------------------------

def _check_offset(page, off: int) -> int:
    """Raise DataCorrupted unless 1 <= off <= max_offset; return max_offset."""
    n = _nline(_U16.unpack_from(page, _OFF_LOWER)[0])
    if not 1 <= off <= n:
        raise DataCorrupted(f"invalid offset number {off}: page has {n} line pointers")
    return n


def get_item_id(page, off: int) -> tuple[int, int, int]:
    """(lp_off, lp_flags, lp_len) of line pointer ``off`` (1-based)."""
    _check_offset(page, off)
    v = _U32.unpack_from(page, _lp_pos(off))[0]
    return v & _LP_OFF_MASK, (v >> _LP_FLAGS_SHIFT) & 3, v >> _LP_LEN_SHIFT


def set_item_id(page, off: int, lp_off: int, lp_flags: int, lp_len: int) -> None:
    """Store line pointer ``off`` verbatim (no state checks; bumps pd_lsn)."""
    _check_offset(page, off)
    if not (0 <= lp_off <= _LP_MAX and 0 <= lp_flags <= 3 and 0 <= lp_len <= _LP_MAX):
        raise InternalError(f"line pointer field out of range: off={lp_off} flags={lp_flags} "
                            f"len={lp_len}")
    _U32.pack_into(page, _lp_pos(off), _lp_pack(lp_off, lp_flags, lp_len))


def get_item(page, off: int) -> memoryview:
    """The bytes of item ``off`` as a writable memoryview into the page [PageGetItem].

    Empty for items without storage (UNUSED, REDIRECT, heap DEAD)."""
    lower, upper, special = _LOWER_UPPER_SPECIAL.unpack_from(page, _OFF_LOWER)
    n = _nline(lower)
    if not 1 <= off <= n:
        raise DataCorrupted(f"invalid offset number {off}: page has {n} line pointers")
    v = _U32.unpack_from(page, _lp_pos(off))[0]
    lp_off = v & _LP_OFF_MASK
    lp_len = v >> _LP_LEN_SHIFT
    if lp_len and (lp_off < upper or lp_off + lp_len > special):
        raise DataCorrupted(f"corrupted line pointer {off}: offset {lp_off}, length {lp_len}, "
                            f"storage is [{upper}, {special})")
    return memoryview(page)[lp_off:lp_off + lp_len]


def item_state(page, off: int) -> tuple[int, memoryview | None]:
    """(lp_flags, the item's bytes as ``get_item`` gives them) of line pointer ``off`` in
    one read of the header and one of the pointer; (-1, None) when ``off`` is past the
    last pointer, (flags, None) for a pointer that is not LP_NORMAL.  For a writer that
    must tell "no such item" from "not a normal item" (``minidb.heap.modify``)."""
    lower, upper, special = _LOWER_UPPER_SPECIAL.unpack_from(page, _OFF_LOWER)
    if not 1 <= off <= ((lower - PAGE_HEADER_SIZE) >> 2):
        return -1, None
    v = _U32.unpack_from(page, PAGE_HEADER_SIZE + ITEMID_SIZE * (off - 1))[0]
    flags = (v >> _LP_FLAGS_SHIFT) & 3
    if flags != LP_NORMAL:
        return flags, None
    lp_off = v & _LP_OFF_MASK
    lp_len = v >> _LP_LEN_SHIFT
    if lp_len and (lp_off < upper or lp_off + lp_len > special):
        raise DataCorrupted(f"corrupted line pointer {off}: offset {lp_off}, length {lp_len}, "
                            f"storage is [{upper}, {special})")
    return flags, memoryview(page)[lp_off:lp_off + lp_len]


def items(page) -> list[tuple[int, int, int, int]]:
    """(offset, lp_off, lp_flags, lp_len) for every line pointer, for page dumps."""
    n = max_offset(page)
    words = struct.unpack_from(f"<{n}I", page, PAGE_HEADER_SIZE)
    return [(i + 1, v & _LP_OFF_MASK, (v >> _LP_FLAGS_SHIFT) & 3, v >> _LP_LEN_SHIFT)
            for i, v in enumerate(words)]


def line_pointer_arrays(page) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lp_off, lp_flags, lp_len) of all line pointers as numpy arrays (index i = offset i+1)."""
    n = max_offset(page)
    words = np.frombuffer(page, dtype="<u4", count=n, offset=PAGE_HEADER_SIZE)
    return (words & _LP_OFF_MASK, (words >> _LP_FLAGS_SHIFT) & 3, words >> _LP_LEN_SHIFT)


def _unused_first(page, n: int) -> tuple[int, bool]:
    """(the first LP_UNUSED offset or 0, whether another one follows it) among the ``n``
    line pointers.  One pass in C over the pointer array read as one integer (word i at
    bits 32i..32i+31): a pointer is UNUSED iff both its flag bits (15 and 16) are clear,
    so ``free`` has bit 32i+15 set exactly for the UNUSED ones - no per-pointer Python, no
    numpy steps (~1 us each) for the usual page of a few dozen pointers."""
    if n <= 0:
        return 0, False
    x = int.from_bytes(page[PAGE_HEADER_SIZE:PAGE_HEADER_SIZE + ITEMID_SIZE * n], "little")
    free = ~x & ~(x >> 1) & _FLAG15_BITS & ((1 << (32 * n)) - 1)
    if not free:
        return 0, False
    low = free & -free
    return 1 + (low.bit_length() - 1 - _LP_FLAGS_SHIFT) // 32, free != low


# bit 15 of every line pointer word a page can have
_FLAG15_BITS = int.from_bytes(
    (1 << _LP_FLAGS_SHIFT).to_bytes(ITEMID_SIZE, "little") * (BLCKSZ // ITEMID_SIZE), "little")


# -- free space --------------------------------------------------------------------------------

def free_space(page) -> int:
    """Bytes available for one new item, after reserving its line pointer [PageGetFreeSpace]."""
    lower, upper = _LOWER_UPPER.unpack_from(page, _OFF_LOWER)
    space = upper - lower - ITEMID_SIZE
    return space if space > 0 else 0


def heap_free_space(page, max_items: int) -> int:
    """free_space, or 0 if no line pointer can be had [PageGetHeapFreeSpace]."""
    lower, upper = _LOWER_UPPER.unpack_from(page, _OFF_LOWER)
    space = upper - lower - ITEMID_SIZE
    if space <= 0:
        return 0
    n = _nline(lower)
    if n >= max_items:
        if not get_flags(page) & PD_HAS_FREE_LINES or not _unused_first(page, n)[0]:
            return 0
    return space


# -- adding and changing items -----------------------------------------------------------------

def add_item(page, data, *, offset: int | None = None, heap: bool = True,
             max_items: int | None = None) -> int:
    """Place ``data`` on the page and return its offset number [PageAddItemExtended].

    heap, offset None:  reuse the first LP_UNUSED pointer if PD_HAS_FREE_LINES,
                        else append a pointer.
    heap, offset given: fill that LP_UNUSED slot, or append if offset == max+1.
    index (heap=False): insert a pointer AT ``offset`` (default: append), shifting
                        the following pointers up by one.
    On ProgramLimitExceeded (no room, too many items) the page is unchanged."""
    item = _bytes_view(data)
    size = item.nbytes
    if size == 0:
        raise InternalError("cannot add an empty item: lp_len 0 means 'no storage'")
    lower, upper, special = _LOWER_UPPER_SPECIAL.unpack_from(page, _OFF_LOWER)
    if upper == 0:
        raise InternalError("cannot add an item to an uninitialised page")
    n = _nline(lower)
    aligned = maxalign(size)
    if aligned + ITEMID_SIZE > special - PAGE_HEADER_SIZE:
        limit = (special - PAGE_HEADER_SIZE - ITEMID_SIZE) & ~(MAXALIGN - 1)
        raise ProgramLimitExceeded(
            f"item of {size} bytes is too large for a page (maximum {limit} bytes)")
    flags = _U16.unpack_from(page, _OFF_FLAGS)[0]
    new_flags = flags
    if heap and flags & PD_NO_NULLS and (size <= _OFF_INFOMASK or item[_OFF_INFOMASK]
                                         & HEAP_HASNULL):
        new_flags &= ~PD_NO_NULLS  # invariant 4a
    reuse = False  # fill an existing LP_UNUSED pointer instead of adding one
    if offset is None:
        if heap and flags & PD_HAS_FREE_LINES:
            first, more = _unused_first(page, n)
            if first:
                offset, reuse = first, True
            if not more:
                new_flags &= ~PD_HAS_FREE_LINES  # none remains (or the hint was stale)
        if not reuse:
            offset = n + 1
    else:
        if not 1 <= offset <= n + 1:
            raise InternalError(f"cannot add item at offset {offset}: page has {n} line pointers")
        if heap and offset <= n:
            if (_U32.unpack_from(page, _lp_pos(offset))[0] >> _LP_FLAGS_SHIFT) & 3 != LP_UNUSED:
                raise InternalError(f"heap line pointer {offset} is in use")
            reuse = True
            if not _unused_first(page, n)[1]:   # ``offset`` is the only one
                new_flags &= ~PD_HAS_FREE_LINES
    if not reuse and max_items is not None and n >= max_items:
        raise ProgramLimitExceeded(f"cannot put more than {max_items} items on a page")
    new_lower = lower if reuse else lower + ITEMID_SIZE
    new_upper = upper - aligned
    if new_lower > new_upper:
        need = aligned + (0 if reuse else ITEMID_SIZE)
        raise ProgramLimitExceeded(
            f"page full: item of {size} bytes needs {need} bytes "
            f"(aligned item{'' if reuse else ' + line pointer'}), {upper - lower} free")

    # -- no failure past this point: mutate ----------------------------------------------------
    mv = memoryview(page)
    if not reuse and offset <= n:  # index insert: open a hole in the pointer array
        start = _lp_pos(offset)
        mv[start + ITEMID_SIZE:lower + ITEMID_SIZE] = mv[start:lower]  # memmove
    mv[new_upper:new_upper + size] = item  # padding up to old upper is free space: zero
    _U32.pack_into(page, _lp_pos(offset), _lp_pack(new_upper, LP_NORMAL, size))
    _LOWER_UPPER.pack_into(page, _OFF_LOWER, new_lower, new_upper)
    if new_flags != flags:
        _U16.pack_into(page, _OFF_FLAGS, new_flags)
    return offset


_FLAGS_LOWER_UPPER_SPECIAL = struct.Struct("<HHHH")   # pd_flags @10, then @12, @14, @16
_CTID_AT = 24                                          # t_ctid's place in a heap tuple
_CTID = struct.Struct("<IH")
_LP_NORMAL_BITS = LP_NORMAL << _LP_FLAGS_SHIFT


def add_heap_tuple(page, data, block: int, max_items: int) -> tuple[int, int, int]:
    """``add_item(page, data, max_items=max_items)`` for a heap tuple (``data``: bytes or
    bytearray of at least a tuple header), then its t_ctid set to (``block``, offset) in
    the page, as heap_insert and heap_update place a new version.  Returns (offset, its
    start (the new pd_upper), pd_flags after), so the caller can log the placed bytes
    without reading the page header and line pointer back.  The common case - no
    LP_UNUSED pointer to reuse, room for a new one - is done here with one read of the
    header; every other case goes through ``add_item`` (same result, same errors)."""
    size = len(data)
    flags, lower, upper, special = _FLAGS_LOWER_UPPER_SPECIAL.unpack_from(page, _OFF_FLAGS)
    aligned = (size + (MAXALIGN - 1)) & ~(MAXALIGN - 1)
    n = (lower - PAGE_HEADER_SIZE) >> 2 if lower > PAGE_HEADER_SIZE else 0
    new_upper = upper - aligned
    if (flags & PD_HAS_FREE_LINES or n >= max_items or size <= _OFF_INFOMASK
            or lower < PAGE_HEADER_SIZE or lower + ITEMID_SIZE > new_upper or upper > special):
        off = add_item(page, data, max_items=max_items)
        new_upper = _U16.unpack_from(page, _OFF_UPPER)[0]
        flags = _U16.unpack_from(page, _OFF_FLAGS)[0]
    else:
        off = n + 1
        memoryview(page)[new_upper:new_upper + size] = data
        _U32.pack_into(page, lower, new_upper | _LP_NORMAL_BITS | (size << _LP_LEN_SHIFT))
        _LOWER_UPPER.pack_into(page, _OFF_LOWER, lower + ITEMID_SIZE, new_upper)
        if flags & PD_NO_NULLS and data[_OFF_INFOMASK] & HEAP_HASNULL:
            flags &= ~PD_NO_NULLS  # invariant 4a
            _U16.pack_into(page, _OFF_FLAGS, flags)
    _CTID.pack_into(page, new_upper + _CTID_AT, block, off)
    return off, new_upper, flags


def overwrite_item(page, off: int, data) -> None:
    """Replace the bytes of item ``off`` in place; the length must not change."""
    item = _bytes_view(data)
    dest = get_item(page, off)
    if item.nbytes != len(dest) or not len(dest):
        raise InternalError(f"cannot overwrite item {off} of {len(dest)} bytes "
                            f"with {item.nbytes} bytes")
    dest[:] = item


def set_item_dead(page, off: int, keep_storage: bool) -> None:
    """NORMAL/REDIRECT/DEAD -> DEAD.  Heap: keep_storage=False (a 4-byte stub that
    index entries still point at); index: keep_storage=True (the LP_DEAD hint)."""
    lp_off, flags, lp_len = get_item_id(page, off)
    assert flags != LP_UNUSED, f"line pointer {off}: UNUSED -> DEAD"
    if keep_storage:
        assert flags != LP_REDIRECT, f"line pointer {off}: REDIRECT has no storage to keep"
        word = _lp_pack(lp_off, LP_DEAD, lp_len)
    else:
        word = _lp_pack(0, LP_DEAD, 0)
    _U32.pack_into(page, _lp_pos(off), word)


def set_item_unused(page, off: int) -> None:
    """NORMAL/REDIRECT/DEAD -> UNUSED; the slot can be reused by add_item."""
    _lp_off, flags, _lp_len = get_item_id(page, off)
    assert flags != LP_UNUSED, f"line pointer {off} is already UNUSED"
    _U32.pack_into(page, _lp_pos(off), 0)
    _U16.pack_into(page, _OFF_FLAGS, _U16.unpack_from(page, _OFF_FLAGS)[0] | PD_HAS_FREE_LINES)


def set_item_redirect(page, off: int, target_off: int) -> None:
    """NORMAL/REDIRECT -> REDIRECT to line pointer ``target_off`` on the same page."""
    _lp_off, flags, _lp_len = get_item_id(page, off)
    assert flags in (LP_NORMAL, LP_REDIRECT), f"line pointer {off}: state {flags} -> REDIRECT"
    n = max_offset(page)
    if not 1 <= target_off <= n or target_off == off:
        raise InternalError(f"invalid redirect target {target_off} for line pointer {off} "
                            f"(page has {n} line pointers)")
    _U32.pack_into(page, _lp_pos(off), _lp_pack(target_off, LP_REDIRECT, 0))


# -- compaction --------------------------------------------------------------------------------

_ZERO_VIEW = memoryview(bytes(BLCKSZ))
_PAD = [b""] + [bytes(MAXALIGN - k) for k in range(1, MAXALIGN)]  # padding, by length % 8
_LP_HAS_STORAGE_BIT = LP_NORMAL << _LP_FLAGS_SHIFT  # set for NORMAL and DEAD
_STORED_ALIGNED = _LP_HAS_STORAGE_BIT | (MAXALIGN - 1)  # that bit, and lp_off's low 3 bits


def _compact_check(words: list[int], lower: int, upper: int, special: int) -> None:
    """Raise the DataCorrupted that describes the first problem of ``words`` (called by
    ``_compact`` once its own checks failed: the messages name the pointers)."""
    stored = []
    total = 0
    for i, v in enumerate(words):
        lp_len = v >> _LP_LEN_SHIFT
        if lp_len:
            lp_off = v & _LP_OFF_MASK
            if not v & _LP_HAS_STORAGE_BIT:
                raise DataCorrupted(f"corrupted line pointer {i + 1}: state "
                                    f"{(v >> _LP_FLAGS_SHIFT) & 3} with length {lp_len}")
            if lp_off < upper or lp_off + lp_len > special:
                raise DataCorrupted(f"corrupted line pointer {i + 1}: offset {lp_off}, "
                                    f"length {lp_len}, storage is [{upper}, {special})")
            stored.append((lp_off, lp_len, i))
            total += maxalign(lp_len)
    if total > special - lower:
        raise DataCorrupted(f"corrupted item lengths: total {total}, available {special - lower}")
    stored.sort(reverse=True)
    for (off_hi, _len_hi, i_hi), (off_lo, len_lo, i_lo) in zip(stored, stored[1:]):
        if off_lo + len_lo > off_hi:
            raise DataCorrupted(f"line pointers {i_lo + 1} and {i_hi + 1} overlap")
    raise InternalError("_compact_check found nothing wrong")


def _compact(page, words: list[int], lower: int, upper: int, special: int) -> int:
    """Move the storage of every pointer in ``words`` (pointer i = offset i+1) against
    pd_special, in the same physical order, rewriting lp_off in ``words``; zero what
    is freed.  Validates the pointers first (nothing is written if corrupt).  Returns
    the new pd_upper; the caller writes ``words`` and the header.

    The bytes are those of ``_compact_rebuild`` (the new storage area built whole, every
    item followed by zero padding), reached by moving only what moves: one pass over the
    items from pd_special down (``_compact_moves``) checks each one as the rebuild does
    (storage inside [pd_upper, pd_special), NORMAL or DEAD, no overlap, the total fits;
    and an aligned start, invariant 2, which the rebuild does not need) and computes its
    new place; items already there (in an opportunistic prune, those
    above the highest item that lost its storage) are not touched, and consecutive items
    that move by the same distance are contiguous and move as one slice, padding
    included.  That relies on invariant 5 - alignment padding is zero, as every writer
    leaves it and ``check_page`` verifies; the rebuild would write those zeros.  The
    pass takes the items in offset order when their lp_off run monotonically that way
    (add_item fills a heap page downwards, a bulk load upwards), or, on a bulk-loaded
    page to which add_item appended items below the others (a pgbench_accounts page
    after its first HOT updates), the loaded ones in reverse and then the appended ones;
    else sorted (a page whose freed line pointers were reused).  Any order the pass
    accepts is the descending one, so the guess changes only the cost.  A page that
    fails a check goes to ``_compact_rebuild``, which raises the error naming the
    problem."""
    given = words[:]
    n = len(words)
    # the direction the item storage runs in, from the first and last items with storage
    first, last = 0, n - 1
    while first < last and not words[first] >> _LP_LEN_SHIFT:
        first += 1
    while last > first and not words[last] >> _LP_LEN_SHIFT:
        last -= 1
    if n and (words[first] & _LP_OFF_MASK) < (words[last] & _LP_OFF_MASK):
        order = zip(range(n - 1, -1, -1), reversed(given))
    else:
        second = first + 1
        while second < last and not words[second] >> _LP_LEN_SHIFT:
            second += 1
        if second < last and (words[first] & _LP_OFF_MASK) < (words[second] & _LP_OFF_MASK):
            # upwards, then downwards: a bulk-loaded page (stored upwards) whose later
            # items were added below the others (add_item).  From the last item back to
            # the highest one (``peak``) the storage rises; the items up to the peak,
            # in reverse, then the rest in order (the pass checks that this descends)
            peak = last
            top = words[last] & _LP_OFF_MASK
            for i in range(last - 1, first, -1):
                v = words[i]
                if v >> _LP_LEN_SHIFT:
                    if (v & _LP_OFF_MASK) < top:
                        break
                    top = v & _LP_OFF_MASK
                    peak = i
            order = chain(zip(range(peak, -1, -1), reversed(given[:peak + 1])),
                          zip(range(peak + 1, n), given[peak + 1:]))
        else:
            order = enumerate(given)
    done = _compact_moves(words, order, upper, special)
    if done is None:
        words[:] = given
        offs = list(map(_and, words, repeat(_LP_OFF_MASK)))  # (pointers without storage
        order = sorted(range(n), key=offs.__getitem__, reverse=True)  # are skipped)
        done = _compact_moves(words, zip(order, map(given.__getitem__, order)), upper,
                              special)
    if done is None or done[0] < lower:
        words[:] = given
        return _compact_rebuild(page, words, lower, upper, special)
    new_upper, runs = done
    mv = memoryview(page)
    if runs:
        data = page.tobytes() if isinstance(page, np.ndarray) else bytes(page)
        for lo, hi, d in runs:
            mv[lo + d:hi + d] = data[lo:hi]
    if new_upper > lower:
        mv[lower:new_upper] = _ZERO_VIEW[:new_upper - lower]  # free space stays zero
    return new_upper


def _compact_moves(words: list[int], order, upper: int, special: int):
    """``_compact``'s pass over the pointers given by ``order``, pairs (index into
    ``words``, pointer word) that must come in descending lp_off (those without storage
    anywhere): (new pd_upper, runs to move as (source start, source end, shift)), lp_off
    rewritten in ``words`` for the items that move; None if the order is not descending
    or a check fails (``words`` then partly rewritten: the caller restores it).

    Two loops: the items already in place (from pd_special down to the first gap), where
    the lowest start so far is the next item's new end, then the items that move.  An
    item's shift never shrinks going down (starts are aligned, so the gap above an item
    is at least its padded length), so once one moves, every later one does."""
    pos = special  # next item's new end
    # module constants as locals: these loops run once per item of the page
    len_shift, off_mask, stored_aligned, has_storage, pad, unpad = (
        _LP_LEN_SHIFT, _LP_OFF_MASK, _STORED_ALIGNED, _LP_HAS_STORAGE_BIT, MAXALIGN - 1,
        ~(MAXALIGN - 1))
    order = iter(order)
    for i, v in order:
        ln = v >> len_shift
        if not ln:
            continue
        off = v & off_mask
        if off + ln > pos or v & stored_aligned != has_storage:
            return None  # overlap, out of order, not NORMAL / DEAD, or an unaligned start
        pos -= (ln + pad) & unpad
        if pos != off:  # the first item that moves
            shift = pos - off
            words[i] = v + shift
            run_lo, run_hi = off, off + ((ln + pad) & unpad)
            break
    else:
        return (pos, []) if pos >= upper else None
    runs = []
    low = off      # the lowest start so far
    for i, v in order:
        ln = v >> len_shift
        if not ln:
            continue
        off = v & off_mask
        if off + ln > low or v & stored_aligned != has_storage:
            return None
        a = (ln + pad) & unpad
        pos -= a
        low = off
        d = pos - off
        words[i] = v + d
        if d != shift:
            runs.append((run_lo, run_hi, shift))
            shift = d
            run_hi = off + a
        run_lo = off
    if low < upper:
        return None
    runs.append((run_lo, run_hi, shift))
    return pos, runs


def _compact_rebuild(page, words: list[int], lower: int, upper: int, special: int) -> int:
    """``_compact`` by building the whole new storage area.

    The new storage area is built as one ``bytes`` - the items in ascending lp_off
    order, each followed by its zero padding, sliced from one copy of the page - and
    written over [new pd_upper, pd_special) at once, as PostgreSQL's compactify_tuples
    copies through a scratch buffer when the items are not presorted.  Per item: a
    ``bytes`` slice, two appends and the checks (storage inside [pd_upper, pd_special),
    NORMAL or DEAD, no overlap).  ``_compact`` comes here when one of its checks fails;
    the tests compare the two."""
    given = words[:]  # for the error message, if the checks below fail
    stored = [(v & _LP_OFF_MASK, v >> _LP_LEN_SHIFT, i) for i, v in enumerate(words)
              if v >> _LP_LEN_SHIFT]
    stored.sort()
    total = sum([(ln + (MAXALIGN - 1)) & ~(MAXALIGN - 1) for _o, ln, _i in stored])
    new_upper = special - total
    data = bytes(page)
    parts = []
    append = parts.append
    pos = new_upper
    end = upper  # the lowest start the next item may have
    ok = total <= special - lower
    if ok:
        for lp_off, lp_len, i in stored:
            v = words[i]
            if lp_off < end or not v & _LP_HAS_STORAGE_BIT:
                ok = False
                break
            end = lp_off + lp_len
            append(data[lp_off:end])
            append(_PAD[lp_len & (MAXALIGN - 1)])
            if lp_off != pos:
                words[i] = (v & ~_LP_OFF_MASK) | pos
            pos += (lp_len + (MAXALIGN - 1)) & ~(MAXALIGN - 1)
    if not ok or end > special:
        _compact_check(given, lower, upper, special)
    mv = memoryview(page)
    if parts:
        mv[new_upper:special] = b"".join(parts)
    if new_upper > lower:
        mv[lower:new_upper] = _ZERO_VIEW[:new_upper - lower]  # free space stays zero
    return new_upper


def repair_fragmentation(page) -> None:
    """Compact item storage against pd_special without renumbering anything
    [PageRepairFragmentation]; set PD_HAS_FREE_LINES iff some pointer is UNUSED."""
    lower, upper, special = _LOWER_UPPER_SPECIAL.unpack_from(page, _OFF_LOWER)
    n = _nline(lower)
    words = list(struct.unpack_from(f"<{n}I", page, PAGE_HEADER_SIZE))
    _repair(page, words, n, lower, upper, special)


def prune_items(page, redirects, dead, unused) -> None:
    """A heap prune's page change [heap_page_prune_execute]: each (root, target) of
    ``redirects`` becomes LP_REDIRECT to target, each offset of ``dead`` LP_DEAD without
    storage, each of ``unused`` LP_UNUSED, then ``repair_fragmentation`` - the same bytes
    as set_item_redirect / set_item_dead(keep_storage=False) / set_item_unused one by one
    and then repair_fragmentation, with one read and one write of the line pointers."""
    lower, upper, special = _LOWER_UPPER_SPECIAL.unpack_from(page, _OFF_LOWER)
    n = _nline(lower)
    words = list(struct.unpack_from(f"<{n}I", page, PAGE_HEADER_SIZE))
    for off in unused:
        if not 1 <= off <= n:
            raise DataCorrupted(f"invalid offset number {off}: page has {n} line pointers")
        assert words[off - 1] & _LP_FLAGS_MASK, f"line pointer {off} is already UNUSED"
        words[off - 1] = 0
    for off in dead:
        if not 1 <= off <= n:
            raise DataCorrupted(f"invalid offset number {off}: page has {n} line pointers")
        assert words[off - 1] & _LP_FLAGS_MASK, f"line pointer {off}: UNUSED -> DEAD"
        words[off - 1] = LP_DEAD << _LP_FLAGS_SHIFT
    for off, target in redirects:
        if not 1 <= off <= n:
            raise DataCorrupted(f"invalid offset number {off}: page has {n} line pointers")
        flags = (words[off - 1] >> _LP_FLAGS_SHIFT) & 3
        assert flags in (LP_NORMAL, LP_REDIRECT), f"line pointer {off}: state {flags} -> REDIRECT"
        if not 1 <= target <= n or target == off:
            raise InternalError(f"invalid redirect target {target} for line pointer {off} "
                                f"(page has {n} line pointers)")
        words[off - 1] = target | (LP_REDIRECT << _LP_FLAGS_SHIFT)
    _repair(page, words, n, lower, upper, special)


def _repair(page, words: list[int], n: int, lower: int, upper: int, special: int) -> None:
    """repair_fragmentation of a page whose line pointers are ``words`` (not yet written)."""
    new_upper = _compact(page, words, lower, upper, special)
    struct.pack_into(f"<{n}I", page, PAGE_HEADER_SIZE, *words)
    _U16.pack_into(page, _OFF_UPPER, new_upper)
    flags = _U16.unpack_from(page, _OFF_FLAGS)[0]
    # some pointer is LP_UNUSED (an all-zero word, by invariant 2: the second test only
    # when none is, to see an UNUSED one with stray bits the same way)
    if 0 in words or not all(map(_and, words, repeat(_LP_FLAGS_MASK))):
        flags |= PD_HAS_FREE_LINES
    else:
        flags &= ~PD_HAS_FREE_LINES
    _U16.pack_into(page, _OFF_FLAGS, flags)


def delete_items(page, offsets) -> None:
    """Remove the given line pointers and their storage; later pointers move down so
    offsets stay dense [PageIndexMultiDelete].  For index pages: renumbers items."""
    lower, upper, special = _LOWER_UPPER_SPECIAL.unpack_from(page, _OFF_LOWER)
    n = _nline(lower)
    doomed = {int(o) for o in offsets}
    if not doomed:
        return
    for o in doomed:
        if not 1 <= o <= n:
            raise DataCorrupted(f"invalid offset number {o}: page has {n} line pointers")
    words = [v for i, v in enumerate(struct.unpack_from(f"<{n}I", page, PAGE_HEADER_SIZE))
             if i + 1 not in doomed]
    new_lower = PAGE_HEADER_SIZE + ITEMID_SIZE * len(words)
    new_upper = _compact(page, words, new_lower, upper, special)
    struct.pack_into(f"<{len(words)}I", page, PAGE_HEADER_SIZE, *words)
    mv = memoryview(page)
    mv[new_lower:lower] = bytes(lower - new_lower)  # the vacated pointers become free space
    _LOWER_UPPER.pack_into(page, _OFF_LOWER, new_lower, new_upper)


# -- verification and inspection ---------------------------------------------------------------

def _header_problems(lower: int, upper: int, special: int, version: int, flags: int) -> list[str]:
    problems = []
    if version != PAGESIZE_VERSION:
        problems.append(f"pd_pagesize_version {version} (expected {PAGESIZE_VERSION})")
    if not PAGE_HEADER_SIZE <= lower <= upper <= special <= BLCKSZ:
        problems.append(f"pd_lower {lower}, pd_upper {upper}, pd_special {special} out of order")
    if special % MAXALIGN:
        problems.append(f"pd_special {special} not {MAXALIGN}-byte aligned")
    if (lower - PAGE_HEADER_SIZE) % ITEMID_SIZE:
        problems.append(f"pd_lower {lower} does not end a line pointer")
    if flags & ~PD_VALID_FLAG_BITS:
        problems.append(f"pd_flags 0x{flags:x} has unknown bits")
    return problems


def _all_zero(page) -> bool:
    return not np.frombuffer(page, dtype=np.uint64).any()


def check_page_header(page, what: str) -> None:
    """Raise DataCorrupted if the header is impossible; an all-zero page is valid
    [PageIsVerified, without the checksum]."""
    _lsn, _cks, flags, lower, upper, special, version, _xid = _HEADER.unpack_from(page, 0)
    if (version == PAGESIZE_VERSION and PAGE_HEADER_SIZE <= lower <= upper <= special <= BLCKSZ
            and not special % MAXALIGN and not (lower - PAGE_HEADER_SIZE) % ITEMID_SIZE
            and not flags & ~PD_VALID_FLAG_BITS):
        return      # a valid header (what _header_problems finds nothing wrong with)
    if upper == 0:
        if _all_zero(page):
            return
        raise DataCorrupted(f"invalid page in {what}: pd_upper is 0 but the page is not all zero")
    problems = _header_problems(lower, upper, special, version, flags)
    if problems:
        raise DataCorrupted(f"invalid page in {what}: {'; '.join(problems)}")


def check_page(page, what: str) -> None:
    """check_page_header plus invariants 2, 4 and 5's padding on every line pointer (for
    tests and check_heap/check_btree; O(items) Python)."""
    check_page_header(page, what)
    if page_is_new(page):
        return
    lower, upper, special = _LOWER_UPPER_SPECIAL.unpack_from(page, _OFF_LOWER)
    n = _nline(lower)
    ranges = []
    has_unused = False
    for off, lp_off, flags, lp_len in items(page):
        if flags == LP_UNUSED:
            has_unused = True
            if lp_off or lp_len:
                raise DataCorrupted(f"invalid page in {what}: UNUSED line pointer {off} "
                                    f"has offset {lp_off}, length {lp_len}")
        elif flags == LP_REDIRECT:
            if lp_len or not 1 <= lp_off <= n or lp_off == off:
                raise DataCorrupted(f"invalid page in {what}: REDIRECT line pointer {off} "
                                    f"to {lp_off}, length {lp_len}")
        elif flags == LP_NORMAL and not lp_len:
            raise DataCorrupted(f"invalid page in {what}: NORMAL line pointer {off} has no storage")
        if lp_len:
            if lp_off < upper or lp_off + lp_len > special or lp_off % MAXALIGN:
                raise DataCorrupted(f"invalid page in {what}: line pointer {off} storage "
                                    f"[{lp_off}, {lp_off + lp_len}) outside [{upper}, {special}) "
                                    f"or unaligned")
            ranges.append((lp_off, lp_off + lp_len, off))
            pad_end = min(maxalign(lp_off + lp_len), special)
            if any(page[lp_off + lp_len:pad_end]):
                raise DataCorrupted(f"invalid page in {what}: line pointer {off}: alignment "
                                    f"padding after the item is not zero")
    ranges.sort()
    for (_s1, e1, o1), (s2, _e2, o2) in zip(ranges, ranges[1:]):
        if s2 < e1:
            raise DataCorrupted(f"invalid page in {what}: items {o1} and {o2} overlap")
    if has_unused and not get_flags(page) & PD_HAS_FREE_LINES:
        raise DataCorrupted(f"invalid page in {what}: UNUSED line pointer but no "
                            f"PD_HAS_FREE_LINES")


_STATE_NAMES = {LP_UNUSED: "UNUSED", LP_NORMAL: "NORMAL", LP_REDIRECT: "REDIRECT",
                LP_DEAD: "DEAD"}


def dump_page(page) -> str:
    """The header and every line pointer, one per line (item contents are the caller's)."""
    lsn, cks, flags, lower, upper, special, version, xid = _HEADER.unpack_from(page, 0)
    names = [n for bit, n in ((PD_HAS_FREE_LINES, "HAS_FREE_LINES"), (PD_PAGE_FULL, "PAGE_FULL"),
                              (PD_ALL_VISIBLE, "ALL_VISIBLE"), (PD_NO_NULLS, "NO_NULLS"))
             if flags & bit]
    lines = [f"lsn={lsn} checksum={cks} flags=0x{flags:x}({'|'.join(names)}) lower={lower} "
             f"upper={upper} special={special} version=0x{version:x} prune_xid={xid} "
             f"free={free_space(page)}"]
    if upper == 0:
        return lines[0] + " (new page)"
    for off, lp_off, lp_flags, lp_len in items(page):
        if lp_flags == LP_REDIRECT:
            lines.append(f"  {off:4d}: REDIRECT -> {lp_off}")
        else:
            lines.append(f"  {off:4d}: {_STATE_NAMES[lp_flags]:<8} off={lp_off} len={lp_len}")
    return "\n".join(lines)


# -- batch header decoding ---------------------------------------------------------------------

# One page as a numpy record: viewing an (n, BLCKSZ) uint8 array with this dtype gives
# the n headers as zero-copy field arrays (pages.view(PAGE_DTYPE)[:, 0]["pd_lower"]).
PAGE_DTYPE = np.dtype({
    "names": ["pd_lsn", "pd_checksum", "pd_flags", "pd_lower", "pd_upper", "pd_special",
              "pd_pagesize_version", "pd_prune_xid"],
    "formats": ["<u8", "<u2", "<u2", "<u2", "<u2", "<u2", "<u2", "<u4"],
    "offsets": [_OFF_LSN, _OFF_CHECKSUM, _OFF_FLAGS, _OFF_LOWER, _OFF_UPPER, _OFF_SPECIAL,
                _OFF_VERSION, _OFF_PRUNE_XID],
    "itemsize": BLCKSZ,
})


def _as_page_matrix(pages) -> np.ndarray:
    pages = np.asarray(pages)
    if pages.dtype != np.uint8 or pages.shape[-1] != BLCKSZ:
        raise InternalError(f"expected uint8 pages of {BLCKSZ} bytes, got {pages.dtype} "
                            f"{pages.shape}")
    return np.ascontiguousarray(pages.reshape(-1, BLCKSZ))


def page_headers(pages) -> np.ndarray:
    """Headers of an (n, BLCKSZ) batch as a structured array of shape (n,); a view of
    ``pages`` when it is C-contiguous (writes to the fields then change the pages)."""
    return _as_page_matrix(pages).view(PAGE_DTYPE)[:, 0]


def check_page_headers(pages) -> np.ndarray:
    """Vectorized check_page_header: bool array, True where the header is possible or
    the page is all zero."""
    pages = _as_page_matrix(pages)
    h = pages.view(PAGE_DTYPE)[:, 0]
    lower = h["pd_lower"].astype(np.int32)
    upper = h["pd_upper"].astype(np.int32)
    special = h["pd_special"].astype(np.int32)
    ok = ((h["pd_pagesize_version"] == PAGESIZE_VERSION)
          & (PAGE_HEADER_SIZE <= lower) & (lower <= upper) & (upper <= special)
          & (special <= BLCKSZ) & (special % MAXALIGN == 0)
          & ((lower - PAGE_HEADER_SIZE) % ITEMID_SIZE == 0)
          & ((h["pd_flags"] & np.uint16(0xFFFF & ~PD_VALID_FLAG_BITS)) == 0))
    new = np.flatnonzero(upper == 0)
    if len(new):
        ok[new] = ~pages[new].view(np.uint64).any(axis=1)
    return ok


# -- checksums ---------------------------------------------------------------------------------
#
# checksum(page, blockno), with the page read as 1024 little-endian uint64 words w_i and
# pd_checksum taken as 0:
#     s = sum_i w_i * K_i                     (mod 2**64; K_i distinct odd constants)
#     s ^= (blockno + 1) * 0x9E3779B97F4A7C15   (a page copied to the wrong block fails)
#     s ^= s >> 29; s *= 0xBF58476D1CE4E5B9; s ^= s >> 32; s ^= s >> 16
#     checksum = s & 0xFFFF, or 1 if that is 0 (0 marks "never set")
# Odd K_i are invertible mod 2**64, so changing any one word always changes s; the
# fold is a bijection on 64 bits, so only the final truncation to 16 bits can hide a
# change (about 1 corruption in 65536 goes unnoticed, as with any 16-bit checksum).
# The sum is one numpy matrix-vector product over the whole batch.  One page
# (``page_checksum``: a write, a single-block read) takes the same dot product over its
# 1024 words and does the rest in Python integers, which is several times cheaper than the
# batch routine's dozen numpy operations on one-element arrays; the value is the same.

_NWORDS = BLCKSZ // 8
_CHECKSUM_K = np.random.default_rng(0x6D696E6964620001).integers(
    0, 2**64, size=_NWORDS, dtype=np.uint64, endpoint=False) | np.uint64(1)
assert len(np.unique(_CHECKSUM_K)) == _NWORDS
_WORD1_MASK = np.uint64(0xFFFFFFFFFFFF0000)  # word 1 without bytes 8-9 (pd_checksum)
_BLOCK_MIX = np.uint64(0x9E3779B97F4A7C15)
_FOLD_MUL = np.uint64(0xBF58476D1CE4E5B9)


def _checksum_words(words: np.ndarray, blocknos) -> np.ndarray:
    """Checksums of an (n, 1024) uint64 matrix of pages."""
    with np.errstate(over="ignore"):
        s = words @ _CHECKSUM_K
        w1 = words[:, 1]
        s += ((w1 & _WORD1_MASK) - w1) * _CHECKSUM_K[1]  # as if pd_checksum were 0
        b = np.asarray(blocknos).astype(np.uint64)
        s ^= (b + np.uint64(1)) * _BLOCK_MIX
        s ^= s >> np.uint64(29)
        s *= _FOLD_MUL
        s ^= s >> np.uint64(32)
        s ^= s >> np.uint64(16)
    c = (s & np.uint64(0xFFFF)).astype(np.uint16)
    c[c == 0] = 1
    return c


_K1 = int(_CHECKSUM_K[1])
_M64 = (1 << 64) - 1


def page_checksum(page, blockno: int, words: np.ndarray | None = None) -> int:
    """The checksum of one page (``compute_checksums`` for a batch of one, in scalar code
    around one dot product), as if pd_checksum were 0.  ``words``: the page already viewed
    as its 1,024 uint64 words, if the caller keeps such a view.  (``ndarray.dot`` and
    the second word read with ``struct`` cost less than ``@`` and a numpy scalar; the
    same value.)"""
    w = np.frombuffer(page, dtype="<u8", count=_NWORDS) if words is None else words
    s = (int(w.dot(_CHECKSUM_K)) - (_U64.unpack_from(page, 8)[0] & 0xFFFF) * _K1) & _M64
    s ^= ((blockno + 1) * 0x9E3779B97F4A7C15) & _M64
    s ^= s >> 29
    s = (s * 0xBF58476D1CE4E5B9) & _M64
    s ^= s >> 32
    s ^= s >> 16
    return (s & 0xFFFF) or 1


def verify_page_checksum(page, blockno: int) -> bool:
    """``verify_checksums`` for one page: the stored checksum matches, or the page is all
    zero (new)."""
    w = np.frombuffer(page, dtype="<u8", count=_NWORDS)
    if page_checksum(page, blockno) == int(w[1]) & 0xFFFF:
        return True
    return not w.any()


def _words(pages) -> np.ndarray:
    return _as_page_matrix(pages).view("<u8")


def compute_checksums(pages, blocknos) -> np.ndarray:
    """uint16 checksums of an (n, BLCKSZ) batch, as if pd_checksum were 0 (input untouched)."""
    return _checksum_words(_words(pages), blocknos)


def set_checksum(page, blockno: int) -> None:
    """Compute the checksum of one page and store it in pd_checksum."""
    _U16.pack_into(page, _OFF_CHECKSUM, page_checksum(page, blockno))


def verify_checksums(pages, blocknos) -> np.ndarray:
    """bool per page: stored checksum matches, or the page is all zero (new)."""
    words = _words(pages)
    stored = (words[:, 1] & np.uint64(0xFFFF)).astype(np.uint16)
    ok = _checksum_words(words, blocknos) == stored
    bad = np.flatnonzero(~ok)
    if len(bad):
        ok[bad] = ~words[bad].any(axis=1)
    return ok
