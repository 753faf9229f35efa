"""Reading the log for people: ``minidb waldump`` (pg_waldump) and its ``--stats``.

One line per record, in pg_waldump's layout::

    rmgr: Heap        len (rec/tot):     55/    55, tx:          3, lsn: 0/00100048, prev 0/00100000, desc: INSERT off 1, blkref #0: rel 1663/1/16384 blk 0 FPW

``rec`` is the record's length without its full-page images, ``tot`` its whole length
(``xl_tot_len``; the next record starts at the next multiple of 8).  ``desc`` is the
operation's name (``minidb.wal.record.op_name``) followed by what the record's main data
says (``describe``: one function per resource manager, the fields each writer packs).
Block references follow (``rel SPC/DB/RELFILENODE``: minidb has one tablespace and one
database, named 1663 and 1 as PostgreSQL's ``pg_default`` and a first database would be;
the fork is named only when it is not ``main``; ``FPW`` marks a full-page image).  With
``--bkp-details`` each block reference gets its own line with the fork always named and,
for an image, the hole that was cut out and the block data's length (``(logical)``: the
data is the operation's own, for its resource manager's redo, not a page delta).  A heap
record whose block carries the operation (``minidb.heap.redo``) is described from that
data as PostgreSQL's heap_desc does: offset, xmax, the infomask bits set, flags, and the
new offset of an update (from block 1, the old page, when the new version went to another
page: block 0 is that page); a logical Btree INSERT_LEAF adds the number of items it carries.

Where the dump starts: ``--start``, else the oldest record still in ``pg_wal``.  Records
carry no page headers (minidb/wal/README.md), so the start of the oldest segment need not
be a record boundary: if no valid record starts there, the oldest record is found by
walking the ``xl_prev`` chain back from the control file's latest checkpoint until a
segment is missing.  Reading goes on
until ``--end``, ``--limit`` records, or the first invalid record; the last ends the
dump as pg_waldump ends: ``error in WAL record at X: REASON`` (X is the last valid
record's start, REASON the reader's check that failed - "invalid record length at Y:
wanted 32, got 0" is the ordinary end of the log).

``--stats`` counts instead of printing: per resource manager (``--stats=record``: per
record type) the number of records, their bytes without images, the images' bytes, and
both together, each with its share, then the totals, in pg_waldump's table.

``wal_status`` is the running log's side (the REPL's ``\\wal``): pg_stat_wal's counters,
the insert / write / flush positions and the redo point, and one backend's WAL usage.

The main-data layouts below repeat the writers' (``minidb.recovery`` for checkpoint,
commit and storage records, ``minidb.heap`` and ``minidb.index`` for page records: this
package sits below them in the layer order); tests/wal/test_waldump.py checks that each
equals its writer's.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field

from minidb.wal import control as ctlfile
from minidb.wal import record as rec
from minidb.wal.reader import EndOfWal, MissingSegment, WalReader
from minidb.wal.xlog import WAL_WRITTEN

SPCNODE, DBNODE = 1663, 1
FORK_NAMES = {0: "main", 1: "fsm", 2: "vm", 3: "init"}

# main data of each kind of record (the writers' structs, repeated: see the docstring)
CHECKPOINT = struct.Struct("<QQQBd")   # redo, next_xid, next_oid, full_page_writes, time
XACT = struct.Struct("<qI")            # commit time (us since the epoch), number of relations
SMGR_CREATE = struct.Struct("<QB")     # relfilenode, fork
SMGR_TRUNCATE = struct.Struct("<QBI")  # relfilenode, fork, new number of blocks
OFFNUM = struct.Struct("<H")           # Heap INSERT / DELETE / LOCK, Btree INSERT_*: offset;
                                       # MULTI_INSERT: tuples; Heap2 VACUUM: items made unused;
                                       # Btree DELETE / VACUUM: items deleted
UPDATE = struct.Struct("<HH")          # Heap UPDATE / HOT_UPDATE: old offset, new offset
PRUNE = struct.Struct("<QHHH")         # latestRemovedXid, nredirected, ndead, nunused
SPLIT = struct.Struct("<IHH")          # level, first offset going right, new item's offset
NEWROOT = struct.Struct("<II")         # root block, its level
CLOG_PAGE = struct.Struct("<q")        # CLOG ZEROPAGE: page number
CLOG_TRUNC = struct.Struct("<qq")      # CLOG TRUNCATE: first page kept, oldest xid kept
# logical block data of the heap's records (minidb.heap.redo)
HEAP_INSERT = struct.Struct("<HB")     # INSERT: offset, flags; then the tuple
HEAP_XMAX = struct.Struct("<HBQIHHIH")  # DELETE / LOCK / UPDATE / HOT_UPDATE: offset, flags,
                                        # xmax, cmax, infobits set, infomask2, t_ctid
HEAP_F_CMAX, HEAP_F_NEW_TUPLE = 0x01, 0x08   # flag bits: cmax written, new version follows
# Btree INSERT_LEAF: its logical block data starts with the item count (minidb.index.redo)


def _ts(seconds: float) -> str:
    """PostgreSQL's timestamptz_to_str in UTC: ``2026-12-01 15:45:25.123456 UTC``."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(whole)) + \
        f".{int(round((seconds - whole) * 1e6)) % 1000000:06d} UTC"


def _xlog_desc(r: rec.Record) -> str:
    if r.info in (rec.XLOG_CHECKPOINT_SHUTDOWN, rec.XLOG_CHECKPOINT_ONLINE) and \
            len(r.main) >= CHECKPOINT.size:
        redo, next_xid, next_oid, fpw, when = CHECKPOINT.unpack_from(r.main, 0)
        kind = "shutdown" if r.info == rec.XLOG_CHECKPOINT_SHUTDOWN else "online"
        return (f"redo {rec.format_lsn(redo)}; tli 1; prev tli 1; "
                f"fpw {'true' if fpw else 'false'}; xid {next_xid >> 32}:"
                f"{next_xid & 0xFFFFFFFF}; oid {next_oid}; time {_ts(when)}; {kind}")
    return ""


def _xact_desc(r: rec.Record) -> str:
    if len(r.main) < XACT.size:
        return ""
    when_us, n = XACT.unpack_from(r.main, 0)
    out = _ts(when_us / 1e6)
    if n:
        rels = struct.unpack_from(f"<{n}Q", r.main, XACT.size)
        out += "; rels: " + " ".join(f"base/{rfn}" for rfn in rels)
    at = XACT.size + 8 * n
    if len(r.main) >= at + 4:   # subtransaction xids (minidb.txn.xact.pack_xact)
        (k,) = struct.unpack_from("<I", r.main, at)
        subs = struct.unpack_from(f"<{k}Q", r.main, at + 4)
        out += "; subxacts: " + " ".join(str(x) for x in subs)
    return out


def _smgr_desc(r: rec.Record) -> str:
    if r.info == rec.XLOG_SMGR_CREATE and len(r.main) >= SMGR_CREATE.size:
        rfn, fork = SMGR_CREATE.unpack_from(r.main, 0)
        return _relpath(rfn, fork)
    if r.info == rec.XLOG_SMGR_TRUNCATE and len(r.main) >= SMGR_TRUNCATE.size:
        rfn, fork, nblocks = SMGR_TRUNCATE.unpack_from(r.main, 0)
        return f"{_relpath(rfn, fork)} to {nblocks} blocks"
    return ""


def _clog_desc(r: rec.Record) -> str:
    if r.info == rec.CLOG_ZEROPAGE and len(r.main) >= CLOG_PAGE.size:
        return f"page {CLOG_PAGE.unpack_from(r.main, 0)[0]}"
    if r.info == rec.CLOG_TRUNCATE and len(r.main) >= CLOG_TRUNC.size:
        page, xid = CLOG_TRUNC.unpack_from(r.main, 0)
        return f"page {page}; oldestXact {xid}"
    return ""


def _heap_desc(r: rec.Record) -> str:
    op = r.info & 0x70
    blk = r.blocks[0] if r.blocks else None
    if op == rec.XLOG_HEAP_UPDATE and len(r.blocks) > 1:
        blk = r.blocks[1]   # block 0 is the new version's page, block 1 the old version's
    if blk is not None and blk.logical:
        got = _heap_logical_desc(op, r, blk.data)
        if got:
            return got
    if op in (rec.XLOG_HEAP_UPDATE, rec.XLOG_HEAP_HOT_UPDATE) and len(r.main) >= UPDATE.size:
        old, new = UPDATE.unpack_from(r.main, 0)
        return f"off {old} ; new off {new}"
    if len(r.main) >= OFFNUM.size:
        return f"off {OFFNUM.unpack_from(r.main, 0)[0]}"
    return ""


def _heap_logical_desc(op: int, r: rec.Record, data: bytes) -> str:
    """A heap record whose block carries the operation (PostgreSQL's heap_desc words):
    ``off N flags 0xFF`` and the tuple's length for an insert; the old version's offset,
    xmax, the infomask bits set and flags, then ``; new off N`` for an update."""
    if op == rec.XLOG_HEAP_INSERT:
        if len(data) < HEAP_INSERT.size:
            return ""
        off, flags = HEAP_INSERT.unpack_from(data, 0)
        return f"off {off} flags 0x{flags:02X} tuple {len(data) - HEAP_INSERT.size} bytes"
    if len(data) < HEAP_XMAX.size:
        return ""
    off, flags, xmax, cmax, infobits, _im2, _cblk, _coff = HEAP_XMAX.unpack_from(data, 0)
    out = f"off {off} xmax {xmax} infobits 0x{infobits:04X} flags 0x{flags:02X}"
    if flags & HEAP_F_CMAX:
        out += f" cmax {cmax}"
    if op in (rec.XLOG_HEAP_UPDATE, rec.XLOG_HEAP_HOT_UPDATE):
        if flags & HEAP_F_NEW_TUPLE and len(data) >= HEAP_XMAX.size + OFFNUM.size:
            new = OFFNUM.unpack_from(data, HEAP_XMAX.size)[0]
            out += f" ; new off {new} tuple {len(data) - HEAP_XMAX.size - OFFNUM.size} bytes"
        elif len(r.main) >= UPDATE.size:   # the new version went to another page
            out += f" ; new off {UPDATE.unpack_from(r.main, 0)[1]} on another page"
            new_blk = r.blocks[0]
            if len(r.blocks) > 1 and new_blk.logical and len(new_blk.data) > HEAP_INSERT.size:
                out += f" tuple {len(new_blk.data) - HEAP_INSERT.size} bytes"
    return out


def _heap2_desc(r: rec.Record) -> str:
    op = r.info & 0x70
    if op == rec.XLOG_HEAP2_PRUNE and len(r.main) >= PRUNE.size:
        latest, nredirected, ndead, nunused = PRUNE.unpack_from(r.main, 0)
        return (f"latestRemovedXid {latest} nredirected {nredirected} ndead {ndead} "
                f"nunused {nunused}")
    if len(r.main) >= OFFNUM.size:
        n = OFFNUM.unpack_from(r.main, 0)[0]
        if op == rec.XLOG_HEAP2_MULTI_INSERT:
            return f"{n} tuples"
        if op == rec.XLOG_HEAP2_VACUUM:
            return f"nunused {n}"
    return ""


def _btree_desc(r: rec.Record) -> str:
    op = r.info & 0xF0
    if op in (rec.XLOG_BTREE_SPLIT_L, rec.XLOG_BTREE_SPLIT_R) and len(r.main) >= SPLIT.size:
        level, first_right, new_off = SPLIT.unpack_from(r.main, 0)
        return f"level {level}, firstrightoff {first_right}, newitemoff {new_off}"
    if op == rec.XLOG_BTREE_NEWROOT and len(r.main) >= NEWROOT.size:
        root, level = NEWROOT.unpack_from(r.main, 0)
        return f"lev {level}, root {root}"
    if len(r.main) >= OFFNUM.size:
        n = OFFNUM.unpack_from(r.main, 0)[0]
        if op in (rec.XLOG_BTREE_INSERT_LEAF, rec.XLOG_BTREE_INSERT_UPPER):
            blk = r.blocks[0] if r.blocks else None
            if blk is not None and blk.logical and len(blk.data) >= OFFNUM.size:
                return f"off {n} items {OFFNUM.unpack_from(blk.data, 0)[0]}"
            return f"off {n}"
        if op in (rec.XLOG_BTREE_DELETE, rec.XLOG_BTREE_VACUUM):
            return f"ndeleted {n}"
    return ""


DESCRIBERS = {rec.RM_XLOG: _xlog_desc, rec.RM_XACT: _xact_desc, rec.RM_SMGR: _smgr_desc,
              rec.RM_CLOG: _clog_desc,
              rec.RM_HEAP: _heap_desc, rec.RM_HEAP2: _heap2_desc, rec.RM_BTREE: _btree_desc}


def _relpath(rfn: int, fork: int) -> str:
    return f"base/{rfn}" + ("" if fork == 0 else f"_{FORK_NAMES.get(fork, fork)}")


def identify(r: rec.Record) -> str:
    """The record type's name (rm_identify): ``INSERT+INIT``, ``COMMIT``, ``SPLIT_L``."""
    return rec.op_name(r.rmid, r.info)


def describe(r: rec.Record) -> str:
    """``desc:`` of a record: its type's name, then what its main data says (rm_desc)."""
    fn = DESCRIBERS.get(r.rmid)
    text = fn(r) if fn is not None else ""
    return f"{identify(r)} {text}".rstrip()


def rec_len(r: rec.Record) -> int:
    """The record's length without its full-page images (pg_waldump's ``rec``)."""
    return r.tot_len - r.fpi_len


def block_refs(r: rec.Record, detailed: bool = False) -> str:
    """The block references: ``, blkref #N: rel 1663/1/R blk B FPW`` each (pg_waldump's
    short form), or one ``\\tblkref`` line each with the fork and image details."""
    out = []
    for blk in r.blocks:
        rel = f"rel {SPCNODE}/{DBNODE}/{blk.relfilenode}"
        fork = FORK_NAMES.get(blk.fork, str(blk.fork))
        if detailed:
            line = f"\n\tblkref #{blk.id}: {rel} fork {fork} blk {blk.block}"
            if blk.has_image:
                line += (f" (FPW); hole: offset: {blk.hole_off}, length: {blk.hole_len}, "
                         f"image: {len(blk.image)} bytes")
            if blk.data:
                line += f"; data: {len(blk.data)} bytes" + (" (logical)" if blk.logical else "")
            if blk.will_init:
                line += "; will init"
            out.append(line)
        else:
            line = f", blkref #{blk.id}: {rel}"
            line += f" blk {blk.block}" if blk.fork == 0 else f" fork {fork} blk {blk.block}"
            if blk.has_image:
                line += " FPW"
            out.append(line)
    return "".join(out)


def format_record(r: rec.Record, detailed: bool = False) -> str:
    """One record as pg_waldump prints it."""
    return (f"rmgr: {rec.RM_NAMES[r.rmid]:<11} len (rec/tot): {rec_len(r):6d}/{r.tot_len:8d}, "
            f"tx: {r.xid:10d}, lsn: {rec.format_lsn(r.lsn)}, prev {rec.format_lsn(r.prev)}, "
            f"desc: {describe(r)}" + block_refs(r, detailed))


# -- reading --------------------------------------------------------------------------------------

class DumpError(Exception):
    """The dump cannot start or ended at an invalid record (pg_waldump's fatal errors)."""


def segment_size(datadir: str) -> int:
    """The data directory's WAL segment size: the control file's, else the size of a
    segment file."""
    try:
        cd = ctlfile.read_control(datadir)
    except Exception:
        cd = None
    if cd is not None and cd.wal_segment_size:
        return cd.wal_segment_size
    d = os.path.join(datadir, "pg_wal")
    try:
        names = sorted(n for n in os.listdir(d) if len(n) == 24)
    except FileNotFoundError:
        names = []
    if not names:
        raise DumpError(f'could not find any WAL file in directory "{d}"')
    return os.path.getsize(os.path.join(d, names[0]))


def oldest_record(reader: WalReader, datadir: str) -> int:
    """The start of the oldest record still in pg_wal: the start of the oldest segment if
    a valid record begins there (the CRC makes a false match implausible), else the
    xl_prev chain walked back from the latest checkpoint as far as it stays valid."""
    segs = reader.segments()
    if not segs:
        raise DumpError(f'could not find any WAL file in directory "{reader.dir}"')
    try:
        cd = ctlfile.read_control(datadir)
    except Exception:
        cd = None
    oldest = segs[0] * reader.segsize
    try:
        reader.read(oldest, None)
        return oldest      # a record starts the segment (always so for a new directory's)
    except (EndOfWal, MissingSegment):
        pass
    if cd is None or not cd.checkpoint:
        return oldest
    lsn = cd.checkpoint
    try:
        r = reader.read(lsn, None)
    except (EndOfWal, MissingSegment):
        return segs[0] * reader.segsize
    while r.prev and r.prev // reader.segsize >= segs[0]:
        try:
            p = reader.read(r.prev, None)
        except (EndOfWal, MissingSegment):
            break
        if p.end != r.lsn:
            break
        r = p
    return r.lsn


@dataclass
class DumpOptions:
    start: int | None = None
    end: int | None = None
    limit: int | None = None
    rmgrs: tuple = ()        # names, as RM_NAMES spells them (compared without case)
    xid: int | None = None
    detailed: bool = False


def records(datadir: str, opts: DumpOptions, on_skip=None):
    """Yield the records the options select.  Raises ``DumpError`` with pg_waldump's
    wording at the first invalid record (unless ``end`` or ``limit`` stopped first)."""
    reader = WalReader(datadir, segment_size(datadir))
    first = oldest_record(reader, datadir)
    wanted = {name.lower() for name in opts.rmgrs}
    start = first if opts.start is None else opts.start
    lsn, prev, last = (first if start >= first else start), None, None
    n = 0
    skipping = start > lsn
    while True:
        if opts.end is not None and lsn >= opts.end:
            return
        try:
            r = reader.read(lsn, prev)
        except (EndOfWal, MissingSegment) as e:
            if last is None:
                raise DumpError(f"could not find a valid record after "
                                f"{rec.format_lsn(start)}: {e}") from None
            raise DumpError(f"error in WAL record at {rec.format_lsn(last)}: {e}") from None
        if skipping:
            if r.lsn < start:
                lsn, prev = r.end, r.lsn
                continue
            skipping = False
            if r.lsn != start and on_skip is not None:
                on_skip(f"first record is after {rec.format_lsn(start)}, at "
                        f"{rec.format_lsn(r.lsn)}, skipping over {r.lsn - start} bytes")
        if opts.end is not None and r.lsn >= opts.end:
            return
        last = r.lsn
        lsn, prev = r.end, r.lsn
        if wanted and rec.RM_NAMES[r.rmid].lower() not in wanted:
            continue
        if opts.xid is not None and r.xid != opts.xid:
            continue
        yield r
        n += 1
        if opts.limit is not None and n >= opts.limit:
            return


# -- statistics -------------------------------------------------------------------------------------

@dataclass
class Stats:
    """pg_waldump --stats: counts and bytes per resource manager or record type."""
    per_record: bool = False
    rows: dict = field(default_factory=dict)   # name -> [count, rec bytes, fpi bytes]

    def add(self, r: rec.Record) -> None:
        name = rec.RM_NAMES[r.rmid]
        if self.per_record:
            name += "/" + identify(r)
        row = self.rows.setdefault(name, [0, 0, 0])
        row[0] += 1
        row[1] += rec_len(r)
        row[2] += r.fpi_len

    def totals(self) -> tuple[int, int, int]:
        return (sum(v[0] for v in self.rows.values()), sum(v[1] for v in self.rows.values()),
                sum(v[2] for v in self.rows.values()))

    def lines(self) -> list[str]:
        n_all, rec_all, fpi_all = self.totals()
        tot_all = rec_all + fpi_all

        def pct(a, b):
            return 100.0 * a / b if b else 0.0

        out = [f"{'Type':<27} {'N':>20} {'(%)':>8} {'Record size':>20} {'(%)':>8} "
               f"{'FPI size':>20} {'(%)':>8} {'Combined size':>20} {'(%)':>8}",
               f"{'----':<27} {'-':>20} {'---':>8} {'-----------':>20} {'---':>8} "
               f"{'--------':>20} {'---':>8} {'-------------':>20} {'---':>8}"]
        order = {name: i for i, name in enumerate(rec.RM_NAMES[k] for k in sorted(rec.RM_NAMES))}
        for name in sorted(self.rows, key=lambda s: (order.get(s.split("/")[0], 99), s)):
            n, rl, fl = self.rows[name]
            out.append(f"{name:<27} {n:20d} ({pct(n, n_all):6.02f}) "
                       f"{rl:20d} ({pct(rl, rec_all):6.02f}) "
                       f"{fl:20d} ({pct(fl, fpi_all):6.02f}) "
                       f"{rl + fl:20d} ({pct(rl + fl, tot_all):6.02f})")
        out.append(f"{'':<27} {'--------':>20} {'':>8} {'--------':>20} {'':>8} "
                   f"{'--------':>20} {'':>8} {'--------':>20}")
        out.append(f"{'Total':<27} {n_all:20d} {'':<9}"
                   f"{rec_all:20d} {f'[{pct(rec_all, tot_all):.02f}%]':<9}"
                   f"{fpi_all:20d} {f'[{pct(fpi_all, tot_all):.02f}%]':<9}"
                   f"{tot_all:20d} {'[100%]':<6}")
        return out


# -- the running log's counters (the REPL's \wal) ---------------------------------------------------

def wal_status(shared, handle=None) -> dict:
    """pg_stat_wal's counters of an open instance (``SharedWAL``), its positions
    (pg_current_wal_insert_lsn / _lsn / _flush_lsn, the redo point) and, with ``handle``
    (a backend's ``WalHandle``), that backend's own WAL usage."""
    out: dict = dict(shared.stats())
    out["insert_lsn"] = rec.format_lsn(shared.insert_lsn())
    out["write_lsn"] = rec.format_lsn(int(shared.ctl[WAL_WRITTEN]))
    out["flush_lsn"] = rec.format_lsn(shared.flushed_lsn())
    out["redo_lsn"] = rec.format_lsn(shared.redo_lsn())
    if handle is not None:
        records, fpi, nbytes = handle.usage()
        out["session_records"] = records
        out["session_fpi"] = fpi
        out["session_bytes"] = nbytes
    return out
