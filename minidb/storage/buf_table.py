"""The buffer mapping table: buffer tag -> buffer id, in shared memory (``buf_table.c``).

A *tag* names one block of one fork of one relation, packed into an int64::

    bits 63..34  relfilenode   bits 33..32  fork   bits 31..0  block number

The table is a chained hash over numpy arrays: ``map_heads[bucket]`` holds the first buffer
of the bucket's chain and ``buf_next[buffer]`` the next one.  Chaining *through the buffer
descriptors* is a departure from PostgreSQL's dynahash (and from open addressing): a buffer
carries at most one tag, so the table can never fill, needs no tombstones and no resizing.
It means a buffer cannot be in two chains at once, so a tag change holds the old and the
new partition locks together (PostgreSQL did the same until 9.5 rewrote BufferAlloc).

Partitions: bucket ``b`` belongs to partition ``(b >> 4) % npartitions`` and the bucket of
a tag is ``16 * group_hash + (block & 15)``, where the group hash covers everything but
the low four bits of the block number.  So sixteen consecutive blocks of a relation always
fall in one partition, and a scan that pins a run of 256 pages takes 16 partition locks,
not 128.  (PostgreSQL hashes every block independently: one lookup at a time needs no
grouping; minidb looks pages up in vectorized batches, and this is what makes them cheap.)

Invariants:
  1. A buffer is in the chain of bucket ``bucket(tag[b])`` iff ``tag[b] >= 0``.
  2. Every chain is only read or written under the lock of its bucket's partition.
  3. ``buf_part[b] == partition(tag[b])`` (partition 0 for an untagged buffer).
"""

from __future__ import annotations

import numpy as np

_GOLDEN = 0x9E3779B97F4A7C15
_M64 = (1 << 64) - 1
_GOLDEN_NP = np.uint64(_GOLDEN)
_SHIFT_NP = np.uint64(29)
_FOUR = np.int64(4)

FORK_SHIFT = 32
RFN_SHIFT = 34
BLOCK_MASK = 0xFFFFFFFF


def make_tag(rfn: int, fork: int, block: int) -> int:
    return (rfn << RFN_SHIFT) | (fork << FORK_SHIFT) | block


def tag_parts(tag: int) -> tuple[int, int, int]:
    return tag >> RFN_SHIFT, (tag >> FORK_SHIFT) & 3, tag & BLOCK_MASK


class BufTable:
    """Hashing, lookup, insert and delete over the shared arrays (caller holds the lock)."""

    def __init__(self, seg, npartitions: int):
        self.heads = seg.map_heads
        self.next = seg.buf_next
        self.tags = seg.buf_tag
        nbuckets = len(self.heads)
        self.group_mask = nbuckets // 16 - 1
        self.npart = npartitions
        # memoryviews: scalar access through them is about twice as fast as numpy indexing
        self._heads = memoryview(self.heads)
        self._next = memoryview(self.next)
        self._tags = memoryview(self.tags)

    # -- hashing -------------------------------------------------------------------------
    def hash(self, tag: int) -> tuple[int, int]:
        """(bucket, partition) of one tag."""
        h = ((tag >> 4) * _GOLDEN) & _M64
        g = (h ^ (h >> 29)) & self.group_mask
        return (g << 4) | (tag & 15), g % self.npart

    def hash_vec(self, tags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g = (tags >> _FOUR).astype(np.uint64) * _GOLDEN_NP
        g = ((g ^ (g >> _SHIFT_NP)) & np.uint64(self.group_mask)).astype(np.int64)
        return (g << _FOUR) | (tags & 15), g % self.npart

    # -- chain operations (partition lock held) ---------------------------------------------
    def lookup(self, tag: int, bucket: int) -> int:
        tags, nxt = self._tags, self._next
        b = self._heads[bucket]
        while b >= 0:
            if tags[b] == tag:
                return b
            b = nxt[b]
        return -1

    def insert(self, bucket: int, buf: int) -> None:
        self._next[buf] = self._heads[bucket]
        self._heads[bucket] = buf

    def delete(self, bucket: int, buf: int) -> None:
        heads, nxt = self._heads, self._next
        b = heads[bucket]
        if b == buf:
            heads[bucket] = nxt[buf]
        else:
            while b >= 0 and nxt[b] != buf:
                b = nxt[b]
            if b < 0:
                raise AssertionError(f"buffer {buf} not in the chain of bucket {bucket}")
            nxt[b] = nxt[buf]
        nxt[buf] = -1

    def probe_vec(self, tags: np.ndarray, buckets: np.ndarray) -> np.ndarray:
        """Buffer ids of many tags at once (-1 where absent); locks of their partitions held."""
        res = np.full(len(tags), -1, dtype=np.int64)
        cur = self.heads[buckets].astype(np.int64)
        active = np.flatnonzero(cur >= 0)
        while active.size:
            c = cur[active]
            hit = self.tags[c] == tags[active]
            res[active[hit]] = c[hit]
            active = active[~hit]
            nxt = self.next[c[~hit]]
            cur[active] = nxt
            active = active[nxt >= 0]
        return res
