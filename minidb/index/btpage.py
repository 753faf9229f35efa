"""B-tree pages: the special area, the metapage, index tuples, and searching one page.

Every B-tree page is a standard slotted page (``minidb.storage.page``) with a 16-byte
special area (PostgreSQL's ``BTPageOpaqueData``) at its end.  Block 0 is the metapage;
every other block is a leaf or an internal page.

Special area, little-endian, at ``BLCKSZ - 16``::

    OFFSET  SIZE  FIELD          MEANING
    0       4     btpo_prev      left sibling's block, 0 = leftmost (block 0 is the meta)
    4       4     btpo_next      right sibling's block ("right link"), 0 = rightmost
    8       4     btpo_level     0 for leaves, parent = child + 1
    12      2     btpo_flags     BTP_* below
    14      2     btpo_cycleid   always 0 (VACUUM scans physically, see vacuum.py)

Flags: BTP_LEAF 0x1, BTP_ROOT 0x2, BTP_DELETED 0x4, BTP_META 0x8, BTP_HALF_DEAD 0x10,
BTP_SPLIT_END 0x20, BTP_HAS_GARBAGE 0x40 (some item may be LP_DEAD), BTP_INCOMPLETE_SPLIT
0x80 (this page split and the right half has no downlink in the parent yet).

Index tuple (``IndexTupleData``), **big-endian** so that the 6 TID bytes compare as the
TID order under ``memcmp``::

    OFFSET  SIZE  FIELD
    0       4     t_tid block     leaf: heap block; pivot: child block (the downlink)
    4       2     t_tid offset    leaf: heap offset; pivot: 0
    6       2     t_info          size in the low 13 bits; INDEX_PIVOT 0x2000;
                                  INDEX_HAS_NULL 0x8000 (some key column is NULL)
    8       ...   key             leaf: the encoded key (``keys.py``)
                                  pivot: a *sort key*: encoded key + 6-byte heap TID

Sort key.  The order of the tree is the order of *sort keys*: a leaf item's sort key is
``key + tid`` (its key bytes then its 6 TID bytes), so every leaf item is unique and equal
keys are kept in heap TID order (PostgreSQL 12's heapkeyspace, "heap TID as a tiebreaker
column").  A pivot tuple (an internal page's item, or any page's high key) stores a sort
key whole.  Keys are prefix-free (``keys.py``), so ``key + tid`` orders first by key.

Page contents, on every level:

* a page that is not the rightmost of its level holds its *high key* at offset 1
  (P_HIKEY): every sort key on the page is < the high key, and every sort key of the
  pages to its right is >= it; data items start at offset 2 (P_FIRSTDATAKEY).  On the
  rightmost page data start at offset 1 and there is no upper bound;
* on internal pages the first data item is "minus infinity": its key bytes are empty and
  only its downlink is used.  Item i's downlink leads to the child whose sort keys lie in
  [key(i), key(i+1)) (the high key standing in for key(i+1) after the last item).

Invariants of the tree (``check.check_btree`` verifies each):

  1. Sort keys strictly increase within a page, and every sort key on a page is < its
     high key; the first sort key of a right sibling is >= the left page's high key.
  2. Items move only rightward: a split moves the upper part of a page to a new page
     inserted to its right; nothing ever moves left.  So a search that starts left of
     its key finds it by following right links (Lehman & Yao).
  3. Left and right links mirror each other on every level; the rightmost page of a
     level has no high key; the root has no siblings and is the metapage's root.
  4. The downlinks of level L, in order, are the pages of level L-1 in right-link order,
     except right halves of a split still flagged BTP_INCOMPLETE_SPLIT on their left
     neighbour; the child of a downlink holds sort keys in [its separator, the next
     separator) and its high key is that next separator once the split is complete.
  5. An item marked LP_DEAD points at a heap chain dead to every snapshot.

The metapage is a slotted page with BTP_META and one item, the metadata::

    OFFSET  SIZE  FIELD
    0       4     btm_magic      0x053162 (PostgreSQL's BTREE_MAGIC)
    4       4     btm_version    4 (PostgreSQL 12+'s: heap TID is a key column)
    8       4     btm_root       block of the root page
    12      4     btm_level      level of the root
    16      4     btm_fastroot   = btm_root (the fast root is not implemented)
    20      4     btm_fastlevel  = btm_level

(PostgreSQL writes the metadata right after the page header and moves pd_lower past it;
minidb keeps it a normal item so the generic page checks apply to the metapage too.)

Searching a page (``binsearch_leaf``, ``binsearch_internal``) reads line pointers and item
bytes with ``struct`` on a ``bytes`` copy of the page, never decoding the whole page: about
log2(items) sort keys are sliced out and compared.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from minidb.config import BLCKSZ
from minidb.errors import DataCorrupted
from minidb.storage import page as pg

# -- constants ---------------------------------------------------------------------------------

BTP_LEAF = 0x1
BTP_ROOT = 0x2
BTP_DELETED = 0x4
BTP_META = 0x8
BTP_HALF_DEAD = 0x10
BTP_SPLIT_END = 0x20
BTP_HAS_GARBAGE = 0x40
BTP_INCOMPLETE_SPLIT = 0x80
FLAG_NAMES = ((BTP_LEAF, "LEAF"), (BTP_ROOT, "ROOT"), (BTP_DELETED, "DELETED"),
              (BTP_META, "META"), (BTP_HALF_DEAD, "HALF_DEAD"), (BTP_SPLIT_END, "SPLIT_END"),
              (BTP_HAS_GARBAGE, "HAS_GARBAGE"), (BTP_INCOMPLETE_SPLIT, "INCOMPLETE_SPLIT"))

SPECIAL_SIZE = 16
SPECIAL_OFF = BLCKSZ - SPECIAL_SIZE
P_NONE = 0           # no sibling (block 0 is the metapage, never a sibling)
P_HIKEY = 1
BTREE_METAPAGE = 0
BTREE_MAGIC = 0x053162
BTREE_VERSION = 4

INDEX_SIZE_MASK = 0x1FFF
INDEX_PIVOT = 0x2000
INDEX_HAS_NULL = 0x8000
ITUP_HEADER_SIZE = 8
TID_SIZE = 6

# Room for item storage on an index page: page minus header and special area.
PAGE_ROOM = SPECIAL_OFF - pg.PAGE_HEADER_SIZE
# BTMaxItemSize: a page must hold a high key and two items, each with its line pointer.
BT_MAX_ITEM_SIZE = ((PAGE_ROOM // 3) - pg.ITEMID_SIZE) & ~(pg.MAXALIGN - 1)
LEAF_FILLFACTOR = 90       # BTREE_DEFAULT_FILLFACTOR
NONLEAF_FILLFACTOR = 70    # BTREE_NONLEAF_FILLFACTOR

OPAQUE = struct.Struct("<IIIHH")
ITUP = struct.Struct(">IHH")
TID_BE = struct.Struct(">IH")
META = struct.Struct("<IIIIII")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_LOWER = pg.OFF_LOWER  # pd_lower's offset in the page header


# -- special area ------------------------------------------------------------------------------

def init_page(page, level: int, flags: int) -> None:
    """Format an empty B-tree page (no siblings)."""
    pg.init_page(page, special_size=SPECIAL_SIZE)
    OPAQUE.pack_into(page, SPECIAL_OFF, P_NONE, P_NONE, level, flags, 0)


def opaque(data) -> tuple[int, int, int, int, int]:
    """(btpo_prev, btpo_next, btpo_level, btpo_flags, btpo_cycleid)."""
    return OPAQUE.unpack_from(data, SPECIAL_OFF)


def set_opaque(page, prev: int, nxt: int, level: int, flags: int) -> None:
    OPAQUE.pack_into(page, SPECIAL_OFF, prev, nxt, level, flags, 0)


def get_flags(data) -> int:
    return _U16.unpack_from(data, SPECIAL_OFF + 12)[0]


def set_flags(page, flags: int) -> None:
    _U16.pack_into(page, SPECIAL_OFF + 12, flags)


def set_prev(page, prev: int) -> None:
    _U32.pack_into(page, SPECIAL_OFF, prev)


def flag_names(flags: int) -> str:
    return "|".join(n for bit, n in FLAG_NAMES if flags & bit) or "-"


# -- metapage ----------------------------------------------------------------------------------

@dataclass
class Meta:
    magic: int
    version: int
    root: int
    level: int
    fastroot: int
    fastlevel: int


def init_meta_page(page, root: int, level: int) -> None:
    init_page(page, 0, BTP_META)
    pg.add_item(page, META.pack(BTREE_MAGIC, BTREE_VERSION, root, level, root, level),
                heap=False)


def read_meta(data, what: str = "index") -> Meta:
    if not get_flags(data) & BTP_META or pg.max_offset(data) != 1:
        raise DataCorrupted(f'index "{what}" is not a btree: block 0 is not a metapage')
    lp_off, _flags, lp_len = pg.get_item_id(data, 1)
    if lp_len != META.size:
        raise DataCorrupted(f'index "{what}" has a metapage item of {lp_len} bytes')
    m = Meta(*META.unpack_from(data, lp_off))
    if m.magic != BTREE_MAGIC:
        raise DataCorrupted(f'index "{what}" is not a btree (magic 0x{m.magic:x})')
    if m.version != BTREE_VERSION:
        raise DataCorrupted(f'index "{what}" has btree version {m.version}, expected '
                            f'{BTREE_VERSION}')
    return m


def write_meta(page, root: int, level: int) -> None:
    pg.overwrite_item(page, 1, META.pack(BTREE_MAGIC, BTREE_VERSION, root, level, root, level))


# -- index tuples ------------------------------------------------------------------------------

def leaf_tuple(key: bytes, block: int, offset: int, has_null: bool = False) -> bytes:
    size = ITUP_HEADER_SIZE + len(key)
    return ITUP.pack(block, offset, size | (INDEX_HAS_NULL if has_null else 0)) + key


def pivot_tuple(sortkey: bytes, child: int) -> bytes:
    """A pivot: separator sort key and downlink (child 0 for a high key)."""
    return ITUP.pack(child, 0, (ITUP_HEADER_SIZE + len(sortkey)) | INDEX_PIVOT) + sortkey


def leaf_item_limit_ok(keylen: int) -> bool:
    """A leaf item may become a pivot (key + TID) on a split: both must fit the limit."""
    return pg.maxalign(ITUP_HEADER_SIZE + keylen + TID_SIZE) <= BT_MAX_ITEM_SIZE


def tid_bytes(block: int, offset: int) -> bytes:
    return TID_BE.pack(block, offset)


# -- reading items from a page (a bytes copy or the live page) -------------------------------

def nitems(data) -> int:
    lower = _U16.unpack_from(data, _LOWER)[0]
    return (lower - pg.PAGE_HEADER_SIZE) >> 2


def first_data(nxt: int) -> int:
    """P_FIRSTDATAKEY: 1 on the rightmost page of a level, else 2 (after the high key)."""
    return 1 if nxt == P_NONE else 2


def _lp(data, off: int) -> tuple[int, int]:
    w = _U32.unpack_from(data, pg.PAGE_HEADER_SIZE + 4 * (off - 1))[0]
    return w & 0x7FFF, w >> 17


def lp_word(data, off: int) -> int:
    return _U32.unpack_from(data, pg.PAGE_HEADER_SIZE + 4 * (off - 1))[0]


def lp_is_dead(word: int) -> bool:
    return (word >> 15) & 3 == pg.LP_DEAD


def item_bytes(data, off: int) -> bytes:
    start, length = _lp(data, off)
    return bytes(data[start:start + length])


def leaf_sortkey(data, off: int) -> bytes:
    start, length = _lp(data, off)
    return bytes(data[start + 8:start + length]) + bytes(data[start:start + 6])


def leaf_key(data, off: int) -> bytes:
    start, length = _lp(data, off)
    return bytes(data[start + 8:start + length])


def pivot_key(data, off: int) -> bytes:
    """The sort key stored in a pivot tuple (an internal item or a high key)."""
    start, length = _lp(data, off)
    return bytes(data[start + 8:start + length])


def item_tid(data, off: int) -> tuple[int, int]:
    start, _length = _lp(data, off)
    return TID_BE.unpack_from(data, start)


def item_tid_bytes(data, off: int) -> bytes:
    start, _length = _lp(data, off)
    return bytes(data[start:start + 6])


def downlink(data, off: int) -> int:
    start, _length = _lp(data, off)
    return _U32_BE.unpack_from(data, start)[0]


_U32_BE = struct.Struct(">I")


# A leaf item's sort key is key + TID, but a probe need not build it: with k the item's
# key bytes, key + TID < bound exactly when k < bound and either bound does not start
# with k (they differ inside k) or it does and the TID is below the rest of the bound.
# (k >= bound: k == bound or bound a prefix of k makes key + TID the longer, so greater;
# a difference inside both decides alone.)  So a probe slices the key once and touches
# the TID only when the bound extends the key; a key at least as long as the bound
# (the item's length - 8 >= len(bound), read from the line pointer) never has the bound
# extending it, so the prefix test is skipped for it (an equality lookup's keys).

def binsearch_leaf(data, bound: bytes, lo: int, hi: int) -> int:
    """The first offset in [lo, hi] whose leaf sort key is >= ``bound``; hi + 1 if none."""
    hi += 1
    u32 = _U32.unpack_from
    startswith = bound.startswith
    lb = len(bound) + 8     # an item of this length or longer: bound cannot extend its key
    while lo < hi:
        mid = (lo + hi) >> 1
        w = u32(data, 20 + 4 * mid)[0]
        start = w & 0x7FFF
        n = w >> 17
        k = data[start + 8:start + n]
        if k < bound and (n >= lb or not startswith(k)
                          or data[start:start + 6] < bound[n - 8:]):
            lo = mid + 1
        else:
            hi = mid
    return lo


def gallop_leaf(data, bound: bytes, lo: int, hi: int) -> int:
    """``binsearch_leaf`` for an answer expected near ``lo`` (the end of an equality
    range): probe lo, lo+1, lo+3, lo+7 ... then binary-search the last gap."""
    step = 1
    prev = lo
    u32 = _U32.unpack_from
    startswith = bound.startswith
    lb = len(bound) + 8
    while lo <= hi:
        w = u32(data, 20 + 4 * lo)[0]
        start = w & 0x7FFF
        n = w >> 17
        k = data[start + 8:start + n]
        if not (k < bound and (n >= lb or not startswith(k)
                               or data[start:start + 6] < bound[n - 8:])):
            return binsearch_leaf(data, bound, prev, lo - 1) if lo > prev else lo
        prev = lo + 1
        lo += step
        step <<= 1
    return binsearch_leaf(data, bound, prev, hi)


def internal_page_items(data) -> tuple[list[bytes], list[int]]:
    """The pivot keys (the minus-infinity first data item left out) and the downlinks
    (all of them, in order) of an internal page, as lists: with them, the downlink
    ``binsearch_internal`` picks for ``bound`` is ``children[bisect_right(keys, bound)]``
    at offset ``first_data + bisect_right(keys, bound)``."""
    nxt = OPAQUE.unpack_from(data, SPECIAL_OFF)[1]
    first = first_data(nxt)
    n = nitems(data)
    if n < first:
        return [], []
    words = np.frombuffer(data, dtype="<u4", count=n - first + 1,
                          offset=pg.PAGE_HEADER_SIZE + 4 * (first - 1))
    starts = (words & 0x7FFF).tolist()
    ends = [s + (w >> 17) for s, w in zip(starts, words.tolist())]
    children = [int.from_bytes(data[s:s + 4], "big") for s in starts]
    keys = [data[s + 8:e] for s, e in zip(starts[1:], ends[1:])]
    return keys, children


def binsearch_internal(data, bound: bytes, first: int, maxoff: int) -> int:
    """The last offset in [first, maxoff] whose pivot key is <= ``bound``, the first data
    item counting as minus infinity (_bt_binsrch on a non-leaf page)."""
    lo, hi = first + 1, maxoff + 1
    u32 = _U32.unpack_from
    while lo < hi:
        mid = (lo + hi) >> 1
        w = u32(data, 20 + 4 * mid)[0]
        start = w & 0x7FFF
        if data[start + 8:start + (w >> 17)] <= bound:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def leaf_items(data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lp_off, lp_flags, lp_len) of every line pointer of a page copy, as numpy arrays."""
    n = nitems(data)
    w = np.frombuffer(data, dtype="<u4", count=n, offset=pg.PAGE_HEADER_SIZE)
    return w & 0x7FFF, (w >> 15) & 3, w >> 17


def page_tids(data, offsets: np.ndarray, lp_off: np.ndarray) -> np.ndarray:
    """The heap TIDs of the leaf items at ``offsets`` as int64 ``block << 16 | offset``
    (vectorized: one gather of 6 bytes per item)."""
    if not len(offsets):
        return np.empty(0, dtype=np.int64)
    arr = np.frombuffer(data, dtype=np.uint8)
    starts = lp_off[offsets - 1].astype(np.int64)
    b = arr[starts[:, None] + np.arange(6)].astype(np.int64)
    return ((b[:, 0] << 40) | (b[:, 1] << 32) | (b[:, 2] << 24) | (b[:, 3] << 16)
            | (b[:, 4] << 8) | b[:, 5])
