"""Relation files: create, extend, read, write, truncate, drop, count blocks, fsync.

PostgreSQL's ``smgr.c``/``md.c`` in one small class.  A relation is identified on disk by
its *relfilenode* (an integer never reused), and each relation has forks: the main data
and the free-space map.  Files live at::

    DATADIR/base/<relfilenode>        main fork
    DATADIR/base/<relfilenode>_fsm    free-space map fork

Every access is positional (``os.preadv`` / ``os.pwritev``), so file descriptors inherited
by forked processes can be shared without a shared file offset getting in the way.  Reads go
straight into the caller's buffers (slots of the shared buffer pool), several consecutive
blocks with one system call, as PostgreSQL 17's ``io_combine_limit`` reads do.

Invariants:
  1. A file's size is always a whole number of blocks: ``extend`` writes whole zero pages
     at the end (as PostgreSQL's ``smgrzeroextend``), so ``nblocks`` is ``size // BLCKSZ``.
  2. Only callers holding the relation's extension lock call ``extend`` (the buffer manager
     does), so two processes never extend into the same block.
  3. A short read is an error naming the file and block, never a partly filled page.
  4. Nothing shrinks a main fork but ``truncate`` (which nobody calls on one: VACUUM does not
     truncate heaps, TRUNCATE gives the table a new relfilenode, B-tree pages are never
     freed), so ``has_block`` may trust a size it saw before.
  5. Every change of a file's size (``create``, ``extend``, ``truncate``, ``unlink``) bumps
     the shared *size generation* of its relation and fork (``rel_size_gen[(rfn << 1 |
     fork) % 1024]`` in shared memory, incremented under the ``relsize`` lock) after the
     change.  So a size this process saw stays right while the generation it read *before*
     asking the file is still the one in shared memory.

Relation sizes are cached (PostgreSQL keeps ``smgr_cached_nblocks``, trusted only in
recovery because other backends extend the file behind its back; here they say so).
``nblocks`` reads the size generation (one shared-memory word), and asks the file
(``fstat``, ~1.5 us) only when it changed since the cached answer: another process extended,
truncated or dropped a relation of the same stripe.  The extender itself stores its new size
with the generation it set.  A standalone ``Smgr`` (tools, tests without an instance; no
shared segment attached) asks the file every time.

Left out: segmenting files at 1 GB, tablespaces, asynchronous I/O.  The I/O model of
``minidb.storage.iomodel`` hooks in here: when the instance set ``iomodel``, every read
is charged to it after the real read (simulated OS cache, read-ahead, disk queue) and
every write puts its pages in the simulated OS cache.
"""

from __future__ import annotations

import errno
import os

import minidb.fileio as fileio
from minidb.config import BLCKSZ
from minidb.errors import IOError_

MAIN_FORKNUM = 0
FSM_FORKNUM = 1
_FORK_SUFFIX = {MAIN_FORKNUM: "", FSM_FORKNUM: "_fsm"}
GRAVEYARD = 64


class Smgr:
    """Per-process file access for one data directory (file descriptors are cached)."""

    def __init__(self, datadir: str):
        self.base = os.path.join(datadir, "base")
        os.makedirs(self.base, mode=0o700, exist_ok=True)
        self._fds: dict[tuple[int, int], int] = {}
        # descriptors of unlinked relations, closed only when GRAVEYARD more have come: a
        # thread of this process may still be in a pread on one, and closing it at once
        # would let the number be reused by another file under that thread's feet
        self._graveyard: list[int] = []
        self._seen_nblocks: dict[int, int] = {}   # rfn -> main-fork size seen (has_block)
        self.iomodel = None  # minidb.storage.iomodel.IOModel when io_model is not none
        # the size cache (invariant 5): rfn << 1 | fork -> (nblocks, generation read before
        # the fstat); empty and unused until ``share_sizes`` attaches the shared generations.
        # The key holds one bit of fork: main and FSM are the only forks (a visibility map
        # would need a wider one)
        self._sizes: dict[int, tuple[int, int]] = {}
        self._gen = None        # memoryview of the segment's rel_size_gen
        self._gen_arr = None
        self._gen_mask = 0
        self._gen_lock = None
        self.size_asks = 0      # system calls made to learn a size (tests count them)

    def share_sizes(self, seg, locks) -> None:
        """Cache sizes, kept right across processes by ``seg.rel_size_gen`` (the buffer
        manager attaches its segment; again after a crash restart's new segment)."""
        arr = seg.rel_size_gen
        if self._gen_arr is arr:
            return
        self._sizes.clear()
        self._gen_arr = arr
        self._gen_mask = len(arr) - 1   # a power of two
        self._gen_lock = locks.relsize
        self._gen = memoryview(arr)

    def _changed(self, rfn: int, fork: int, n: int | None) -> None:
        """A file's size changed (to ``n`` blocks; None: gone): bump its generation, so
        every process asks the file again, and remember ``n`` here."""
        key = rfn << 1 | fork
        gen = self._gen
        if gen is None:
            return
        i = key & self._gen_mask
        with self._gen_lock:
            g = gen[i] + 1
            gen[i] = g
        if n is None:
            self._sizes.pop(key, None)
        else:
            self._sizes[key] = (n, g)

    def path(self, rfn: int, fork: int = MAIN_FORKNUM) -> str:
        return os.path.join(self.base, f"{rfn}{_FORK_SUFFIX[fork]}")

    def _fd(self, rfn: int, fork: int, create: bool = False) -> int:
        fd = self._fds.get((rfn, fork))
        if fd is None:
            flags = os.O_RDWR | (os.O_CREAT if create else 0)
            try:
                fd = fileio.open(self.path(rfn, fork), flags, 0o600)
            except FileNotFoundError:
                raise IOError_(f'could not open file "{self.path(rfn, fork)}": '
                               "no such file (relation dropped?)") from None
            self._fds[(rfn, fork)] = fd
        return fd

    # -- relation-level operations -------------------------------------------------------------
    def create(self, rfn: int, fork: int = MAIN_FORKNUM) -> None:
        path = self.path(rfn, fork)
        try:
            fd = fileio.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise
        except OSError as e:
            raise fileio.write_error(path, e, "create file") from e
        self._fds[(rfn, fork)] = fd
        self._changed(rfn, fork, 0)

    def exists(self, rfn: int, fork: int = MAIN_FORKNUM) -> bool:
        return (rfn, fork) in self._fds or os.path.exists(self.path(rfn, fork))

    def nblocks(self, rfn: int, fork: int = MAIN_FORKNUM) -> int:
        """The number of blocks of a fork (0 for a fork never created), from the cache
        while the relation's size generation is unchanged (invariant 5)."""
        gen = self._gen
        if gen is None:
            return self._ask_nblocks(rfn, fork)
        key = rfn << 1 | fork
        g = gen[key & self._gen_mask]
        hit = self._sizes.get(key)
        if hit is not None and hit[1] == g:
            return hit[0]
        n = self._ask_nblocks(rfn, fork)
        self._sizes[key] = (n, g)  # g was read before the fstat: a later change shows
        return n

    def _ask_nblocks(self, rfn: int, fork: int) -> int:
        self.size_asks += 1  # a system call: fstat, or a stat of a fork maybe never made
        if fork != MAIN_FORKNUM and not self.exists(rfn, fork):
            return 0
        return fileio.size(self._fd(rfn, fork, create=fork != MAIN_FORKNUM)) // BLCKSZ

    def has_block(self, rfn: int, block: int) -> bool:
        """``block < nblocks(rfn)`` for the main fork, with an fstat only for a block at
        or beyond the largest size seen before (invariant 4): an index scan checks every
        TID it follows this way, and the system call was a tenth of a heap fetch."""
        if block < self._seen_nblocks.get(rfn, 0):
            return True
        n = self.nblocks(rfn)
        self._seen_nblocks[rfn] = n
        return block < n

    def extend(self, rfn: int, fork: int, first_block: int, count: int = 1) -> None:
        """Write ``count`` zero pages starting at ``first_block`` (which must be the end).
        A main fork is never created here (``create`` does): extending a dropped relation
        is an error, not a new file nobody names."""
        fd = self._fd(rfn, fork, create=fork != MAIN_FORKNUM)
        size = fileio.size(fd)
        if size != first_block * BLCKSZ:
            raise IOError_(f'could not extend file "{self.path(rfn, fork)}": expected '
                           f"{first_block} blocks, file has {size / BLCKSZ:g}")
        try:
            got = fileio.pwrite(fd, bytes(BLCKSZ * count), size)
            err = OSError(errno.ENOSPC, f"wrote only {got} of {BLCKSZ * count} bytes")
        except OSError as e:
            got, err = -1, e
        if got != BLCKSZ * count:
            try:
                fileio.ftruncate(fd, size)  # keep the file a whole number of blocks (inv. 1)
            finally:
                self._changed(rfn, fork, None)  # a reader may have seen the partial size
            raise fileio.write_error(self.path(rfn, fork), err, "extend file",
                                     f" by {count} block{'s' if count != 1 else ''}") from None
        self._changed(rfn, fork, first_block + count)

    def truncate(self, rfn: int, fork: int, nblocks: int) -> None:
        if fork != MAIN_FORKNUM and not self.exists(rfn, fork):
            return
        if fork == MAIN_FORKNUM:
            self._seen_nblocks.pop(rfn, None)
        try:
            fileio.ftruncate(self._fd(rfn, fork), nblocks * BLCKSZ)
        finally:
            self._changed(rfn, fork, None)  # even a failed one: ask the file next time

    def _retire(self, fd: int) -> None:
        self._graveyard.append(fd)
        while len(self._graveyard) > GRAVEYARD:
            fileio.close(self._graveyard.pop(0))

    def unlink(self, rfn: int) -> None:
        self._seen_nblocks.pop(rfn, None)
        for fork in _FORK_SUFFIX:
            fd = self._fds.pop((rfn, fork), None)
            if fd is not None:
                self._retire(fd)
            try:
                fileio.unlink(self.path(rfn, fork))
            except FileNotFoundError:
                pass
            self._changed(rfn, fork, None)

    def forget(self, rfn: int) -> None:
        """Close cached descriptors of a relation another process dropped."""
        self._seen_nblocks.pop(rfn, None)
        for fork in _FORK_SUFFIX:
            self._sizes.pop(rfn << 1 | fork, None)
            fd = self._fds.pop((rfn, fork), None)
            if fd is not None:
                self._retire(fd)

    # -- block I/O --------------------------------------------------------------------------
    def read_blocks(self, rfn: int, fork: int, first_block: int, buffers: list) -> None:
        """Read consecutive blocks into ``buffers`` (writable 8 KiB memoryviews/arrays)."""
        fd = self._fd(rfn, fork)
        want = BLCKSZ * len(buffers)
        try:
            got = fileio.preadv(fd, buffers, first_block * BLCKSZ)
        except OSError as e:
            raise IOError_(f'could not read block {first_block} in file '
                           f'"{self.path(rfn, fork)}": {os.strerror(e.errno or errno.EIO)}') from e
        if got != want:
            bad = first_block + got // BLCKSZ
            raise IOError_(f'could not read block {bad} in file "{self.path(rfn, fork)}": '
                           f"read only {got % BLCKSZ} of {BLCKSZ} bytes")
        if self.iomodel is not None:
            self.iomodel.read(rfn, fork, first_block, len(buffers), self.nblocks(rfn, fork))

    def write_blocks(self, rfn: int, fork: int, first_block: int, buffers: list) -> None:
        """Write consecutive blocks.  The write-back of a buffer whose relation file is
        gone (a committed DROP or TRUNCATE removed it while another backend still held
        the buffer) is discarded: its relation no longer exists."""
        try:
            fd = self._fd(rfn, fork)
        except IOError_:
            if not os.path.exists(self.path(rfn, MAIN_FORKNUM)):
                return
            raise
        try:
            got = fileio.pwritev(fd, buffers, first_block * BLCKSZ)
        except OSError as e:
            raise fileio.write_error(self.path(rfn, fork), e,
                                     f"write block {first_block} in file") from e
        if got != BLCKSZ * len(buffers):
            raise fileio.write_error(
                self.path(rfn, fork), OSError(errno.ENOSPC, f"wrote only {got} bytes"),
                f"write block {first_block} in file")
        if self.iomodel is not None:
            self.iomodel.wrote(rfn, fork, first_block, len(buffers))

    def fsync_all(self) -> None:
        for fd in self._fds.values():
            fileio.fsync(fd)

    def fsync_rels(self, rfns) -> int:
        """fsync every fork of the given relations that exists (checkpoint); returns the
        number of files synced."""
        n = 0
        for rfn in sorted(rfns):
            for fork in _FORK_SUFFIX:
                if not self.exists(rfn, fork):
                    continue
                try:
                    fileio.fsync(self._fd(rfn, fork))
                except IOError_:
                    continue  # dropped meanwhile
                n += 1
        return n

    def close(self) -> None:
        for fd in list(self._fds.values()) + self._graveyard:
            fileio.close(fd)
        self._fds.clear()
        self._graveyard.clear()
