"""The commit log (``pg_xact``): two status bits per transaction id.

============  =====  ===========================================================
status        bits   meaning
============  =====  ===========================================================
IN_PROGRESS   0      running, or crashed before it could record anything
COMMITTED     1      committed
ABORTED       2      rolled back, or found dead by the instance
============  =====  ===========================================================

Four xids share a byte, as in PostgreSQL (xid ``x`` is byte ``x >> 2``, bits
``2 * (x & 3)``).  The file ``DATADIR/pg_xact`` is mapped ``MAP_SHARED`` at a fixed
virtual size when the instance opens (a sparse file: only the parts in use take disk
space), so every process forked from the instance reads and writes the same bytes, and the
kernel writes them back; ``flush()`` msyncs at checkpoint and close.  Readers need no lock
(a status byte changes once, from IN_PROGRESS to a final state, and a reader that sees
the old value treats the transaction as still running, which is what the proc array says
anyway until commit finishes).  Writers take one of ``N_CLOG_LOCKS`` stripe locks because
setting two bits is a read-modify-write of a byte that other xids share.

Departure: PostgreSQL caches clog pages in an SLRU buffer pool and truncates the log as
``datfrozenxid`` advances; minidb maps the whole log (64-bit xids never wrap, there is no
freezing, so nothing is ever truncated).  Left out: sub-committed status (no
subtransactions), asynchronous-commit LSNs.

Invariants:
  1. A status moves IN_PROGRESS -> COMMITTED or IN_PROGRESS -> ABORTED, never back, never
     between the final states (asserted in ``set``).
  2. xids below ``FIRST_NORMAL_XID`` are special: 0 invalid, 1 bootstrap and 2 frozen read
     as COMMITTED.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from minidb.errors import ProgramLimitExceeded

IN_PROGRESS, COMMITTED, ABORTED = 0, 1, 2
INVALID_XID, BOOTSTRAP_XID, FROZEN_XID, FIRST_NORMAL_XID = 0, 1, 2, 3
MAX_XID = 1 << 34            # the mapped size: 4 GiB of virtual space, sparse on disk
CLOG_FILE = "pg_xact"

_SHIFT = np.array([0, 2, 4, 6], dtype=np.uint8)


class CommitLog:
    """The mapped commit log; create before forking, use from every process."""

    def __init__(self, datadir: str, locks):
        self.path = os.path.join(datadir, CLOG_FILE)
        self.locks = locks
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            size = MAX_XID // 4
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            self._mmap = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
        finally:
            os.close(fd)
        self.bytes = np.ndarray((MAX_XID // 4,), dtype=np.uint8, buffer=self._mmap)
        self._mv = memoryview(self._mmap)

    def status(self, xid: int) -> int:
        if xid < FIRST_NORMAL_XID:
            return COMMITTED if xid else ABORTED
        return (self._mv[xid >> 2] >> ((xid & 3) << 1)) & 3

    def statuses(self, xids: np.ndarray) -> np.ndarray:
        """Vectorized ``status`` (uint8 array)."""
        xids = np.asarray(xids, dtype=np.int64)
        st = (self.bytes[xids >> 2] >> _SHIFT[xids & 3]) & 3
        special = xids < FIRST_NORMAL_XID
        if special.any():
            st[special] = np.where(xids[special] == 0, ABORTED, COMMITTED)
        return st

    def set(self, xid: int, status: int) -> None:
        if xid >= MAX_XID:
            raise ProgramLimitExceeded(f"transaction id {xid} beyond the commit log's "
                                       f"{MAX_XID} entries")
        shift = (xid & 3) << 1
        with self.locks[(xid >> 2) % len(self.locks)]:  # by byte: four xids share one
            byte = self._mv[xid >> 2]
            old = (byte >> shift) & 3
            assert old in (IN_PROGRESS, status), \
                f"xid {xid}: status {old} -> {status} is not a legal transition"
            self._mv[xid >> 2] = (byte & ~(3 << shift) & 0xFF) | (status << shift)

    def flush(self) -> None:
        self._mmap.flush()

    def close(self) -> None:
        self.flush()
        self.bytes = None
        self._mv.release()
        try:
            self._mmap.close()
        except BufferError:
            pass
