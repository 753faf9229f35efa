"""The WAL record format: header, block references, images, CRC-32C (xlogrecord.h).

A record is, byte for byte (little-endian, unaligned after the 8-aligned start)::

    header (32)      xl_tot_len u32 | pad u32 | xl_xid u64 | xl_prev u64 |
                     xl_info u8 | xl_rmid u8 | pad u16 | xl_crc u32
    block count      u8
    per block        id u8 | fork_flags u8 | data_len u32 | relfilenode u64 | block u32
      (18 bytes)     fork in the low 4 bits; HAS_IMAGE 0x10, HAS_DATA 0x20, WILL_INIT 0x40
      if HAS_IMAGE   image_len u16 | hole_offset u16 | hole_length u16
    main data len    u32
    payloads         per block: image bytes (hole cut out), then block data; then main data

``xl_tot_len`` counts the whole record; the next record starts at the next multiple of 8.
The CRC-32C (Castagnoli, the ``crc32c`` package: hardware instructions where the CPU has
them) runs over everything after the header, then over header bytes 0..27, as
PostgreSQL's does (so ``xl_prev`` is covered though it is filled in last).

Block data of minidb's page records is either a *page delta* (PostgreSQL's generic WAL): a
list of fragments ``offset u16 | length u16 | bytes`` that redo pastes into the page; or,
with ``BKPBLOCK_LOGICAL`` (0x80 of fork_flags, a bit PostgreSQL does not use), the
operation's own description of the change (a heap insert's tuple and offset, ...), which
redo hands to the resource manager's routine for that opcode.  A block that carries an image
needs no data: redo restores the image.

Departures from PostgreSQL: a 32-byte header with a 64-bit xid (28 bytes used); block
headers carry the relfilenode (8 bytes) every time (no SAME_REL) and a 32-bit data length;
no origin / top-level-xid blocks, no compression.
"""

from __future__ import annotations

import struct

import crc32c as _crc32c
import numpy as np

from minidb.config import BLCKSZ

# resource managers (PostgreSQL's ids)
RM_XLOG, RM_XACT, RM_SMGR, RM_CLOG, RM_HEAP2, RM_HEAP, RM_BTREE = 0, 1, 2, 3, 9, 10, 11
RM_SEQ = 15
RM_NAMES = {RM_XLOG: "XLOG", RM_XACT: "Transaction", RM_SMGR: "Storage", RM_CLOG: "CLOG",
            RM_HEAP2: "Heap2", RM_HEAP: "Heap", RM_BTREE: "Btree", RM_SEQ: "Sequence"}

# XLOG opcodes
XLOG_CHECKPOINT_SHUTDOWN = 0x00
XLOG_CHECKPOINT_ONLINE = 0x10
XLOG_NOOP = 0x20
XLOG_FPI_FOR_HINT = 0xA0
XLOG_FPI = 0xB0
# Transaction
XLOG_XACT_COMMIT = 0x00
XLOG_XACT_ABORT = 0x20
# CLOG (the commit log's own records)
CLOG_ZEROPAGE = 0x00
CLOG_TRUNCATE = 0x10
# Storage
XLOG_SMGR_CREATE = 0x10
XLOG_SMGR_TRUNCATE = 0x20
# Heap
XLOG_HEAP_INSERT = 0x00
XLOG_HEAP_DELETE = 0x10
XLOG_HEAP_UPDATE = 0x20
XLOG_HEAP_HOT_UPDATE = 0x40
XLOG_HEAP_LOCK = 0x60
XLOG_HEAP_INPLACE = 0x70   # an in-place change of a catalog row (relpages, reltuples)
XLOG_HEAP_INIT_PAGE = 0x80
# Heap2
XLOG_HEAP2_PRUNE = 0x10
XLOG_HEAP2_VACUUM = 0x20
XLOG_HEAP2_MULTI_INSERT = 0x50
# Btree
XLOG_BTREE_INSERT_LEAF = 0x00
XLOG_BTREE_INSERT_UPPER = 0x10
XLOG_BTREE_SPLIT_L = 0x30
XLOG_BTREE_SPLIT_R = 0x40
XLOG_BTREE_DELETE = 0x70
XLOG_BTREE_NEWROOT = 0xA0
XLOG_BTREE_VACUUM = 0xC0
XLOG_BTREE_BUILD = 0xF0   # minidb: a page written by CREATE INDEX (PostgreSQL logs XLOG_FPI)
# Sequence: the sequence's page, as the values it may hand out before the next record
XLOG_SEQ_LOG = 0x00

OPNAMES = {
    RM_XLOG: {0x00: "CHECKPOINT_SHUTDOWN", 0x10: "CHECKPOINT_ONLINE", 0x20: "NOOP",
              0xA0: "FPI_FOR_HINT", 0xB0: "FPI"},
    RM_XACT: {0x00: "COMMIT", 0x20: "ABORT"},
    RM_SMGR: {0x10: "CREATE", 0x20: "TRUNCATE"},
    RM_CLOG: {0x00: "ZEROPAGE", 0x10: "TRUNCATE"},
    RM_HEAP: {0x00: "INSERT", 0x10: "DELETE", 0x20: "UPDATE", 0x40: "HOT_UPDATE",
              0x60: "LOCK", 0x70: "INPLACE"},
    RM_HEAP2: {0x10: "PRUNE", 0x20: "VACUUM", 0x50: "MULTI_INSERT"},
    RM_BTREE: {0x00: "INSERT_LEAF", 0x10: "INSERT_UPPER", 0x30: "SPLIT_L", 0x40: "SPLIT_R",
               0x70: "DELETE", 0xA0: "NEWROOT", 0xC0: "VACUUM", 0xF0: "BUILD"},
    RM_SEQ: {0x00: "LOG"},
}


def opcode(rmid: int, info: int) -> int:
    """The operation bits of ``info`` (the heap managers keep an INIT_PAGE flag beside them)."""
    return info & 0x70 if rmid in (RM_HEAP, RM_HEAP2) else info & 0xF0


def op_name(rmid: int, info: int) -> str:
    if rmid in (RM_HEAP, RM_HEAP2):
        name = OPNAMES[rmid].get(info & 0x70, f"UNKNOWN 0x{info:02x}")
        return name + ("+INIT" if info & XLOG_HEAP_INIT_PAGE else "")
    return OPNAMES.get(rmid, {}).get(info & 0xF0, f"UNKNOWN 0x{info:02x}")


# block reference flags (the caller's, XLogRegisterBuffer's REGBUF_*)
REGBUF_FORCE_IMAGE = 0x01
REGBUF_NO_IMAGE = 0x02
REGBUF_WILL_INIT = 0x04 | REGBUF_NO_IMAGE
REGBUF_STANDARD = 0x08    # the page has a standard layout: the hole may be cut out
REGBUF_LOGICAL = 0x10     # the block data is the operation's own (redo by its manager)
# bits of fork_flags in the record
BKPBLOCK_FORK_MASK = 0x0F
BKPBLOCK_HAS_IMAGE = 0x10
BKPBLOCK_HAS_DATA = 0x20
BKPBLOCK_WILL_INIT = 0x40
BKPBLOCK_LOGICAL = 0x80   # minidb: block data for the resource manager's redo, not a delta

HEADER = struct.Struct("<I4xQQBB2xI")
HEADER_SIZE = HEADER.size            # 32
CRC_OFFSET = 28
BLOCK_HEADER = struct.Struct("<BBIQI")   # 18
IMAGE_HEADER = struct.Struct("<HHH")     # 6
U32 = struct.Struct("<I")
FRAG = struct.Struct("<HH")
MAX_BLOCKS = 32
ALIGN = 8


def align(n: int) -> int:
    return (n + ALIGN - 1) & ~(ALIGN - 1)


def crc32c(data, value: int = 0) -> int:
    return _crc32c.crc32c(data, value)


crc32c_raw = _crc32c.crc32c   # the same function without the wrapper (per-record paths)


def format_lsn(lsn: int) -> str:
    """PostgreSQL's %X/%08X form."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:08X}"


def parse_lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


# -- page images --------------------------------------------------------------------------------

def page_image(page) -> tuple[bytes, int, int]:
    """(image bytes, hole offset, hole length) of a standard page: [pd_lower, pd_upper) is
    cut out when the header is sane (a new or odd page is stored whole)."""
    mv = memoryview(page).cast("B") if not isinstance(page, np.ndarray) else \
        memoryview(np.ascontiguousarray(page)).cast("B")
    lower, upper = struct.unpack_from("<HH", mv, 12)
    if 24 <= lower < upper <= BLCKSZ:
        return bytes(mv[:lower]) + bytes(mv[upper:]), lower, upper - lower
    return bytes(mv), 0, 0


class PageImage:
    """A page image not copied yet: the page (a byte memoryview) and its hole.  ``build``
    copies the two parts around the hole straight into the record (``page_image`` makes
    the image bytes first: three copies of the page more)."""
    __slots__ = ("page", "hole_off", "hole_len")

    def __init__(self, page: memoryview, hole_off: int, hole_len: int):
        self.page, self.hole_off, self.hole_len = page, hole_off, hole_len


def page_image_ref(page) -> PageImage:
    """``page_image`` without the copy: the same hole rule, the bytes taken by ``build``
    (the page must not change until then: its content lock is held, or it is a copy)."""
    mv = memoryview(page).cast("B") if not isinstance(page, np.ndarray) else \
        memoryview(np.ascontiguousarray(page)).cast("B")
    lower, upper = struct.unpack_from("<HH", mv, 12)
    if 24 <= lower < upper <= BLCKSZ:
        return PageImage(mv, lower, upper - lower)
    return PageImage(mv, 0, 0)


def restore_image(page, image: bytes, hole_off: int, hole_len: int) -> None:
    """Write an image back into a page (the hole zeroed)."""
    arr = page if isinstance(page, np.ndarray) else np.frombuffer(page, dtype=np.uint8)
    img = np.frombuffer(image, dtype=np.uint8)
    if hole_len:
        arr[:hole_off] = img[:hole_off]
        arr[hole_off:hole_off + hole_len] = 0
        arr[hole_off + hole_len:] = img[hole_off:]
    else:
        arr[:] = img


def _runs_in_word(mask: int) -> tuple:
    """The fragments (first, last + 1) of the changed bytes of one 8-byte word whose
    changed bytes are the set bits of ``mask``, merged as ``page_delta`` merges."""
    runs: list[list[int]] = []
    for i in range(8):
        if mask >> i & 1:
            if runs and i - runs[-1][1] <= 4:
                runs[-1][1] = i + 1
            else:
                runs.append([i, i + 1])
    return tuple((s, e) for s, e in runs)


# a word's XOR with every byte folded onto its low bit (0x01 per changed byte) -> its runs
_LOW_BITS = 0x0101010101010101
_WORD_RUNS = {sum(1 << 8 * i for i in range(8) if m >> i & 1): _runs_in_word(m)
              for m in range(1, 256)}
_DELTA_WORDWISE_MAX = 20   # more changed 8-byte words than this: bytewise (measured crossover)


def page_delta(before: np.ndarray, after: np.ndarray) -> bytes:
    """Fragments (offset, length, bytes) turning ``before`` into ``after``; runs separated
    by at most 4 unchanged bytes are merged (a fragment header costs 4).

    The pages are compared as 1,024 8-byte words.  An OLTP record changes few of them (a
    median of 11 for TPC-B's heap and index records: a tuple header, a line pointer, a
    new tuple); each changed word's XOR is folded to one bit per changed byte and its
    runs looked up in a table, so the work after the comparison is per changed word,
    not per byte of the page (the bytewise comparison's numpy steps cost ~20 us a
    record).  More changed words than ``_DELTA_WORDWISE_MAX`` (a long new tuple, a
    compacted page) go bytewise, faster there.  Both give the
    same fragments."""
    bw, aw = before.view(np.uint64), after.view(np.uint64)
    w = (bw != aw).nonzero()[0]
    if not w.size:
        return b""
    if w.size > _DELTA_WORDWISE_MAX:
        return _page_delta_bytes(before, after)
    out = bytearray()
    pack = FRAG.pack
    mv = after.data
    table = _WORD_RUNS
    s = e = -8
    for base, x in zip((w << 3).tolist(), (bw[w] ^ aw[w]).tolist()):
        x |= x >> 4
        x |= x >> 2
        x |= x >> 1
        for rs, re_ in table[x & _LOW_BITS]:
            i = base + rs
            if i - e > 4:                 # more than 4 unchanged bytes since the last
                if e >= 0:
                    out += pack(s, e - s)
                    out += mv[s:e]
                s = i
            e = base + re_
    out += pack(s, e - s)
    out += mv[s:e]
    return bytes(out)


def _page_delta_bytes(before: np.ndarray, after: np.ndarray) -> bytes:
    """``page_delta`` byte by byte (numpy over the whole page)."""
    d = np.flatnonzero(before != after)
    if not d.size:
        return b""
    brk = np.flatnonzero(np.diff(d) > 5)
    starts = np.concatenate((d[:1], d[brk + 1])).tolist()
    ends = (np.concatenate((d[brk], d[-1:])) + 1).tolist()
    out = bytearray()
    for s, e in zip(starts, ends):
        out += FRAG.pack(s, e - s)
        out += after[s:e].tobytes()
    return bytes(out)


def apply_delta(page: np.ndarray, delta: bytes) -> None:
    pos, n = 0, len(delta)
    while pos < n:
        off, length = FRAG.unpack_from(delta, pos)
        pos += 4
        page[off:off + length] = np.frombuffer(delta, dtype=np.uint8, count=length, offset=pos)
        pos += length


# -- assembling and decoding --------------------------------------------------------------------

class BlockRef:
    """One decoded block reference."""
    __slots__ = ("id", "fork", "relfilenode", "block", "image", "hole_off", "hole_len",
                 "data", "will_init", "logical")

    def __init__(self, id, fork, relfilenode, block, image, hole_off, hole_len, data,
                 will_init, logical=False):
        self.id, self.fork, self.relfilenode, self.block = id, fork, relfilenode, block
        self.image, self.hole_off, self.hole_len = image, hole_off, hole_len
        self.data, self.will_init, self.logical = data, will_init, logical

    @property
    def has_image(self) -> bool:
        return self.image is not None


class Record:
    """One decoded record (XLogReaderState's decoded view)."""
    __slots__ = ("lsn", "end", "tot_len", "xid", "prev", "info", "rmid", "blocks", "main")

    def __init__(self, lsn, end, tot_len, xid, prev, info, rmid, blocks, main):
        self.lsn, self.end, self.tot_len, self.xid, self.prev = lsn, end, tot_len, xid, prev
        self.info, self.rmid, self.blocks, self.main = info, rmid, blocks, main

    @property
    def fpi_len(self) -> int:
        return sum(len(b.image) for b in self.blocks if b.image is not None)


def _block_flags(fork: int, flags: int, data, image: bool) -> int:
    """A block header's fork_flags byte (BKPBLOCK_*), for ``assemble`` and ``build``."""
    ff = fork & BKPBLOCK_FORK_MASK
    if flags & REGBUF_WILL_INIT == REGBUF_WILL_INIT:
        ff |= BKPBLOCK_WILL_INIT
    if image:
        ff |= BKPBLOCK_HAS_IMAGE
    elif data:
        ff |= BKPBLOCK_HAS_DATA
        if flags & REGBUF_LOGICAL:
            ff |= BKPBLOCK_LOGICAL
    return ff


def assemble(blocks: list, main: bytes, images: list) -> tuple[bytes, int]:
    """The record body after the header, for ``blocks`` (relfilenode, fork, block,
    page, flags, data) where ``images[i]`` is None or (image, hole_off, hole_len).
    Returns (body, number of images)."""
    heads = [bytes([len(blocks)])]
    payload = []
    nimg = 0
    for i, (rfn, fork, blk, _page, flags, data) in enumerate(blocks):
        img = images[i]
        ff = _block_flags(fork, flags, data, img is not None)
        if img is not None:
            data = b""  # the image makes the block data unnecessary
            nimg += 1
        heads.append(BLOCK_HEADER.pack(i, ff, len(data), rfn, blk))
        if img is not None:
            heads.append(IMAGE_HEADER.pack(len(img[0]), img[1], img[2]))
            payload.append(img[0])
        if data:
            payload.append(bytes(data))
    heads.append(U32.pack(len(main)))
    return b"".join(heads) + b"".join(payload) + bytes(main), nimg


_HEAD_CRC = struct.Struct("<I4xQQBB2x")   # header bytes 0..27: what its CRC covers
_PAD = bytes(ALIGN)
_NO_BLOCKS = bytes(HEADER_SIZE + 1)       # the header's room and a block count of 0
# the header's room, a block count of 1, that block's header, the main data length
_ONE_BLOCK = struct.Struct(f"<{HEADER_SIZE}xB{BLOCK_HEADER.format[1:]}I")


def build(blocks, main, images) -> tuple[bytearray, int, int]:
    """The whole record in one buffer, as ``finish(assemble(...))`` gives it plus the zero
    padding to the next multiple of 8, but with the header still zero (the position, so
    ``xl_prev``, is not reserved yet: ``seal`` fills it in).  ``images`` may be None (no
    block has an image); an image is (bytes, hole_off, hole_len) or a ``PageImage``.
    Returns (record, xl_tot_len, number of images).

    One buffer, grown in place: the header's room first, block headers, main data length,
    payloads, main data, padding - no list of pieces joined twice, and the CRC then runs
    over the one buffer (``body_crc``, ``seal``)."""
    nimg = 0
    if not blocks:
        buf = bytearray(_NO_BLOCKS)
        buf += U32.pack(len(main))
    elif images is None and len(blocks) == 1:
        # the usual record: one block with its data, no image - its headers in one pack
        rfn, fork, blk, _page, flags, data = blocks[0]
        ff = fork & BKPBLOCK_FORK_MASK            # _block_flags(fork, flags, data, False)
        if flags & REGBUF_WILL_INIT == REGBUF_WILL_INIT:
            ff |= BKPBLOCK_WILL_INIT
        if data:
            ff |= (BKPBLOCK_HAS_DATA | BKPBLOCK_LOGICAL if flags & REGBUF_LOGICAL
                   else BKPBLOCK_HAS_DATA)
        buf = bytearray(_ONE_BLOCK.pack(1, 0, ff, len(data), rfn, blk, len(main)))
        buf += data
    elif images is None:
        # several blocks, none with an image (a heap UPDATE to another page: two logical
        # blocks): the block headers, then the block data in order
        buf = bytearray(HEADER_SIZE)
        buf.append(len(blocks))
        i = 0
        for rfn, fork, blk, _page, flags, data in blocks:
            buf += BLOCK_HEADER.pack(i, _block_flags(fork, flags, data, False), len(data),
                                     rfn, blk)
            i += 1
        buf += U32.pack(len(main))
        for blk in blocks:
            if blk[5]:
                buf += blk[5]
    else:
        buf = bytearray(HEADER_SIZE)
        buf.append(len(blocks))
        payload = []
        for i, (rfn, fork, blk, _page, flags, data) in enumerate(blocks):
            img = images[i] if images is not None else None
            ff = _block_flags(fork, flags, data, img is not None)
            if img is not None:
                data = b""  # the image makes the block data unnecessary
                nimg += 1
            buf += BLOCK_HEADER.pack(i, ff, len(data), rfn, blk)
            if img is not None:
                if type(img) is PageImage:
                    mv, ho, hl = img.page, img.hole_off, img.hole_len
                    buf += IMAGE_HEADER.pack(len(mv) - hl, ho, hl)
                    if hl:
                        payload.append(mv[:ho])
                        payload.append(mv[ho + hl:])
                    else:
                        payload.append(mv)
                else:
                    buf += IMAGE_HEADER.pack(len(img[0]), img[1], img[2])
                    payload.append(img[0])
            if data:
                payload.append(data)
        buf += U32.pack(len(main))
        for part in payload:
            buf += part
    buf += main
    tot = len(buf)
    pad = -tot & (ALIGN - 1)
    if pad:
        buf += _PAD[:pad]
    return buf, tot, nimg


def body_crc(buf: bytearray, tot: int) -> int:
    """CRC-32C of a built record's body (everything after the header)."""
    return _crc32c.crc32c(memoryview(buf)[HEADER_SIZE:tot])


def seal(buf: bytearray, tot: int, xid: int, prev: int, info: int, rmid: int,
         body_crc: int) -> None:
    """Write the header of a record from ``build``, its CRC continuing ``body_crc``
    (``body_crc(buf, tot)``, computed before the position was known) over header bytes
    0..27, as ``finish`` does."""
    crc = _crc32c.crc32c(_HEAD_CRC.pack(tot, xid, prev, info, rmid), body_crc)
    HEADER.pack_into(buf, 0, tot, xid, prev, info, rmid, crc)


def finish(body: bytes, xid: int, prev: int, info: int, rmid: int) -> bytes:
    """Header + body with xl_prev and the CRC filled in."""
    tot = HEADER_SIZE + len(body)
    head = HEADER.pack(tot, xid, prev, info, rmid, 0)
    crc = crc32c(head[:CRC_OFFSET], crc32c(body))
    return head[:CRC_OFFSET] + U32.pack(crc) + body


class InvalidRecord(Exception):
    """A record failed a check (the message says which)."""


def decode(buf: bytes, lsn: int, expect_prev: int | None) -> Record:
    """Decode and verify a whole record (``buf`` = exactly xl_tot_len bytes)."""
    tot, xid, prev, info, rmid, crc = HEADER.unpack_from(buf, 0)
    if expect_prev is not None and prev != expect_prev:
        raise InvalidRecord(f"record with incorrect prev-link {format_lsn(prev)} at "
                            f"{format_lsn(lsn)}")
    body = buf[HEADER_SIZE:tot]
    if crc32c(buf[:CRC_OFFSET], crc32c(body)) != crc:
        raise InvalidRecord(f"incorrect resource manager data checksum in record at "
                            f"{format_lsn(lsn)}")
    if rmid not in RM_NAMES:
        raise InvalidRecord(f"invalid resource manager ID {rmid} at {format_lsn(lsn)}")
    # block headers
    heads = []
    try:
        nblocks = body[0]
        pos = 1
        if nblocks > MAX_BLOCKS:
            raise InvalidRecord(f"record at {format_lsn(lsn)} has {nblocks} block references")
        for _ in range(nblocks):
            bid, ff, dlen, rfn, blk = BLOCK_HEADER.unpack_from(body, pos)
            pos += BLOCK_HEADER.size
            img = None
            if ff & BKPBLOCK_HAS_IMAGE:
                img = IMAGE_HEADER.unpack_from(body, pos)
                pos += IMAGE_HEADER.size
            heads.append((bid, ff, dlen, rfn, blk, img))
        (mlen,) = U32.unpack_from(body, pos)
        pos += 4
        blocks = []
        for bid, ff, dlen, rfn, blk, img in heads:
            image = None
            hole_off = hole_len = 0
            if img is not None:
                ilen, hole_off, hole_len = img
                image = body[pos:pos + ilen]
                pos += ilen
            data = body[pos:pos + dlen]
            pos += dlen
            blocks.append(BlockRef(bid, ff & BKPBLOCK_FORK_MASK, rfn, blk, image, hole_off,
                                   hole_len, data, bool(ff & BKPBLOCK_WILL_INIT),
                                   bool(ff & BKPBLOCK_LOGICAL)))
        main = body[pos:pos + mlen]
        if pos + mlen != len(body):
            raise InvalidRecord(f"record at {format_lsn(lsn)} has {len(body) - pos - mlen} "
                                f"bytes of trailing garbage")
    except (struct.error, IndexError):
        raise InvalidRecord(f"record at {format_lsn(lsn)} is too short for its "
                            f"block references") from None
    return Record(lsn, lsn + align(tot), tot, xid, prev, info, rmid, blocks, main)

