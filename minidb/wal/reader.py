"""Reading the log back (xlogreader.c): records in order from an LSN, with the checks.

``WalReader(datadir, segsize).read(lsn, expect_prev)`` returns the decoded record at
``lsn`` or raises ``EndOfWal`` with the reason, checked in PostgreSQL's order:

1. the segment file holding ``lsn`` exists (a missing segment while later ones exist is
   ``MissingSegment``, an error: the log has a hole);
2. ``xl_tot_len`` is at least the header size ("invalid record length at X: wanted 32,
   got N" - all zeros is the usual end of the log) and at most ``MAX_RECORD``;
3. ``xl_prev`` equals the previous record's start ("record with incorrect prev-link");
4. the CRC-32C matches ("incorrect resource manager data checksum in record at X");
5. the resource manager id is known and the block references decode.

Whether an invalid record is the end of the log or damage in its middle is the caller's
question (``minidb.recovery``): PostgreSQL treats every invalid record as the end.
"""

from __future__ import annotations

import os

from minidb.wal import record as rec
from minidb.wal.xlog import WAL_DIR, parse_segment_name, segment_name

MAX_RECORD = 64 << 20


class EndOfWal(Exception):
    """No valid record at the position asked for (``reason`` says which check failed)."""

    def __init__(self, lsn: int, reason: str):
        super().__init__(reason)
        self.lsn = lsn
        self.reason = reason


class MissingSegment(Exception):
    pass


class WalReader:
    def __init__(self, datadir: str, segsize: int):
        self.dir = os.path.join(datadir, WAL_DIR)
        self.segsize = segsize
        self._cache: dict[int, bytes | None] = {}
        self._present = self.segments()

    def segments(self) -> list[int]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return sorted(s for s in (parse_segment_name(n, self.segsize) for n in names)
                      if s is not None)

    def segment_path(self, segno: int) -> str:
        return os.path.join(self.dir, segment_name(segno, self.segsize))

    def _segment(self, segno: int) -> bytes | None:
        if segno not in self._cache:
            if len(self._cache) > 4:
                self._cache.pop(next(iter(self._cache)))
            try:
                with open(self.segment_path(segno), "rb") as f:
                    self._cache[segno] = f.read()
            except FileNotFoundError:
                self._cache[segno] = None
        return self._cache[segno]

    def read_bytes(self, lsn: int, n: int) -> bytes:
        out = bytearray()
        pos = lsn
        while len(out) < n:
            segno = pos // self.segsize
            data = self._segment(segno)
            if data is None:
                if any(s > segno for s in self._present):
                    raise MissingSegment(
                        f'could not open file "{self.segment_path(segno)}": the log has a '
                        f"hole at {rec.format_lsn(pos)} (later segments exist)")
                raise EndOfWal(pos, f'segment "{segment_name(segno, self.segsize)}" does not '
                                    f"exist")
            off = pos - segno * self.segsize
            take = data[off:off + n - len(out)]
            if not take:
                raise EndOfWal(pos, f"segment file ends at {rec.format_lsn(pos)}")
            out += take
            pos += len(take)
        return bytes(out)

    def read(self, lsn: int, expect_prev: int | None) -> rec.Record:
        head = self.read_bytes(lsn, rec.HEADER_SIZE)
        (tot,) = rec.U32.unpack_from(head, 0)
        if tot < rec.HEADER_SIZE:
            raise EndOfWal(lsn, f"invalid record length at {rec.format_lsn(lsn)}: wanted "
                                f"{rec.HEADER_SIZE}, got {tot}")
        if tot > MAX_RECORD:
            raise EndOfWal(lsn, f"record length {tot} at {rec.format_lsn(lsn)} too long")
        buf = head + self.read_bytes(lsn + rec.HEADER_SIZE, tot - rec.HEADER_SIZE)
        try:
            return rec.decode(buf, lsn, expect_prev)
        except rec.InvalidRecord as e:
            raise EndOfWal(lsn, str(e)) from None

    def records(self, start: int, expect_prev: int | None = None):
        """Yield records from ``start`` until the first invalid one; then ``self.end`` is
        the end of the last valid record and ``self.stop_reason`` why reading stopped."""
        lsn, prev = start, expect_prev
        self.end, self.last = start, 0
        self.stop_reason = ""
        while True:
            try:
                r = self.read(lsn, prev)
            except EndOfWal as e:
                self.stop_reason = e.reason
                return
            yield r
            self.end, self.last = r.end, r.lsn
            lsn, prev = r.end, r.lsn

    def segment_of(self, lsn: int) -> str:
        return self.segment_path(lsn // self.segsize)
