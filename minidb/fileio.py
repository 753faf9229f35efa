"""The one file-I/O seam: every durable write of the engine goes through this module.

Relation files (``storage/smgr.py``), the write-ahead log (``minidb.wal``) and the control
file call these functions instead of ``os``: ``open``, ``close``, ``pread``, ``preadv``,
``pwrite``, ``pwritev``, ``fsync``, ``fdatasync``, ``ftruncate``, ``size``, ``unlink``,
``rename``, ``fsync_dir``.  By default they are the ``os`` calls themselves (``OSFiles``).
A test installs another layer with ``set_layer``:

``CrashFiles`` (the crash-test layer, in the spirit of SQLite's crash VFS and RocksDB's
FaultInjectionTestFS) performs every operation on the real files, so the engine reads back
what it wrote, and meanwhile keeps, per file, its *durable image* (the content as of its
last fsync) and the list of writes and truncations since.  ``crash(rng)`` "loses power":
from then on every call raises ``SimulatedCrash`` (so the process under test stops in
its tracks, wherever it was), and each file is rewritten as its durable image plus an
arbitrary subset of the unsynced operations, applied in order, each one kept, dropped, or
- for a write - *torn*: only some of the 512-byte sectors it covers reach the disk.
``crash_after(n)`` arms the crash to happen at the n-th write or sync from now.

``FaultFiles`` (the fault-injection layer) performs every operation on the real files too,
and makes chosen ones fail as a full or failing disk would: ``fail(op, nth, errno, match)``
makes the ``nth`` next operation of kind ``op`` on a file whose path contains ``match`` raise
``OSError(errno)`` - ``"write"`` (a write within the file), ``"extend"`` (a write past its
end, or an ``ftruncate`` that grows it: how ENOSPC shows), ``"fsync"`` (``fsync`` and
``fdatasync``), ``"create"`` (an ``open`` that creates the file).  The failed operation
changes nothing.  So every write path (relation files, the WAL, the commit log, the control
file) is tested against ENOSPC and EIO without root or a full tmpfs (tests/test_enospc.py).

Simplifications (documented in minidb/wal/README.md): creating, renaming and unlinking a
file are durable at once (as on a file system that journals metadata synchronously), so
``fsync_dir`` only counts; a file first seen by the layer (installed while descriptors were
already open: they are named through /proc/self/fd) is durable as it stands.

Invariants:
  1. Nothing outside this module calls ``os.pwrite``/``os.fsync``/``os.rename`` ... on a
     file of the data directory that must survive a crash (tests/test_fileio checks the
     modules that write).
  2. After ``crash``, each file's content is its durable image with a subset of its
     unsynced writes applied, each whole, torn at 512-byte boundaries, or not at all.
"""

from __future__ import annotations

import builtins
import errno
import os
import threading

import minidb.errors as errors

SECTOR = 512


class SimulatedCrash(BaseException):
    """The test layer lost power: every file operation now fails with this."""


class OSFiles:
    """The real file system (the default layer)."""

    def open(self, path: str, flags: int, mode: int = 0o600) -> int:
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        return os.pread(fd, n, offset)

    def preadv(self, fd: int, buffers: list, offset: int) -> int:
        return os.preadv(fd, buffers, offset)

    def pwrite(self, fd: int, data, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def pwritev(self, fd: int, buffers: list, offset: int) -> int:
        return os.pwritev(fd, buffers, offset)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class _FileState:
    __slots__ = ("durable", "pending")

    def __init__(self, durable: bytes):
        self.durable = bytearray(durable)
        self.pending: list[tuple] = []  # ("w", offset, bytes) | ("t", size)


class CrashFiles(OSFiles):
    """The crash-test layer (see the module docstring).  Thread-safe; one process only."""

    def __init__(self):
        self._lock = threading.RLock()
        self._files: dict[str, _FileState] = {}   # realpath -> state
        self._fd_path: dict[int, str] = {}
        self.crashed = False
        self._countdown = -1  # writes + syncs until the armed crash; -1 = not armed
        self._rng = None
        self.counts = {"writes": 0, "syncs": 0, "bytes": 0}

    # -- bookkeeping ----------------------------------------------------------------------
    def _check(self) -> None:
        if self.crashed:
            raise SimulatedCrash("the test file layer lost power")

    def _tick(self) -> None:
        if self._countdown > 0:
            self._countdown -= 1
            if self._countdown == 0:
                self.crash(self._rng)
                raise SimulatedCrash("power lost (armed crash point)")

    def crash_after(self, n: int, rng) -> None:
        """Lose power at the ``n``-th write or sync from now (n >= 1)."""
        self._countdown, self._rng = max(1, n), rng

    def _state(self, path: str) -> _FileState:
        st = self._files.get(path)
        if st is None:
            try:
                with builtins.open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            st = self._files[path] = _FileState(data)
        return st

    def _path(self, fd: int) -> str:
        p = self._fd_path.get(fd)
        if p is None:  # opened before the layer was installed
            p = self._fd_path[fd] = os.path.realpath(os.readlink(f"/proc/self/fd/{fd}"))
        return p

    # -- the operations ---------------------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o600) -> int:
        with self._lock:
            self._check()
            rp = os.path.realpath(path)
            existed = os.path.exists(rp)
            fd = os.open(path, flags, mode)
            if not existed:
                self._files[rp] = _FileState(b"")  # creation is durable at once (empty)
            else:
                st = self._state(rp)
                if flags & os.O_TRUNC:
                    st.pending.append(("t", 0))
            self._fd_path[fd] = rp
            return fd

    def close(self, fd: int) -> None:
        with self._lock:
            self._fd_path.pop(fd, None)
            os.close(fd)  # allowed after the crash: the abandoned instance lets go

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        self._check()
        return os.pread(fd, n, offset)

    def preadv(self, fd: int, buffers: list, offset: int) -> int:
        self._check()
        return os.preadv(fd, buffers, offset)

    def pwrite(self, fd: int, data, offset: int) -> int:
        return self.pwritev(fd, [data], offset)

    def pwritev(self, fd: int, buffers: list, offset: int) -> int:
        with self._lock:
            self._check()
            self._tick()
            data = b"".join(bytes(memoryview(b).cast("B")) for b in buffers)
            st = self._state(self._path(fd))
            n = os.pwrite(fd, data, offset)
            st.pending.append(("w", offset, data[:n]))
            self.counts["writes"] += 1
            self.counts["bytes"] += n
            return n

    def fsync(self, fd: int) -> None:
        with self._lock:
            self._check()
            self._tick()
            st = self._state(self._path(fd))
            for op in st.pending:
                _apply(st.durable, op, None)
            st.pending.clear()
            self.counts["syncs"] += 1

    fdatasync = fsync

    def ftruncate(self, fd: int, size: int) -> None:
        with self._lock:
            self._check()
            st = self._state(self._path(fd))
            os.ftruncate(fd, size)
            st.pending.append(("t", size))

    def size(self, fd: int) -> int:
        self._check()
        return os.fstat(fd).st_size

    def unlink(self, path: str) -> None:
        with self._lock:
            self._check()
            os.unlink(path)
            self._files.pop(os.path.realpath(path), None)

    def rename(self, src: str, dst: str) -> None:
        with self._lock:
            self._check()
            rs, rd = os.path.realpath(src), os.path.realpath(dst)
            st = self._state(rs)
            os.rename(src, dst)
            self._files.pop(rs, None)
            self._files[rd] = st
            for fd, p in self._fd_path.items():
                if p == rs:
                    self._fd_path[fd] = rd

    def fsync_dir(self, path: str) -> None:
        self._check()

    # -- power loss ---------------------------------------------------------------------------
    def crash(self, rng) -> dict:
        """Lose power now: rewrite every known file as its durable image plus a random
        subset of its unsynced operations (writes possibly torn).  Returns counts."""
        with self._lock:
            self.crashed = True
            kept = dropped = torn = 0
            for path, st in self._files.items():
                if not st.pending:
                    continue
                img = bytearray(st.durable)
                for op in st.pending:
                    r = rng.random()
                    if r < 0.3:
                        dropped += 1
                        continue
                    if op[0] == "w" and r < 0.6 and len(op[2]) > SECTOR:
                        torn += 1
                        _apply(img, op, rng)
                    else:
                        kept += 1
                        _apply(img, op, None)
                try:
                    with builtins.open(path, "r+b") as f:
                        f.truncate(0)
                        f.write(img)
                except FileNotFoundError:
                    pass
            return {"kept": kept, "dropped": dropped, "torn": torn}


def _apply(img: bytearray, op: tuple, rng) -> None:
    """Apply one operation to a file image; with ``rng`` a write is torn per sector."""
    if op[0] == "t":
        size = op[1]
        if size < len(img):
            del img[size:]
        else:
            img.extend(bytes(size - len(img)))
        return
    _, off, data = op
    end = off + len(data)
    if len(img) < end:
        img.extend(bytes(end - len(img)))
    if rng is None:
        img[off:end] = data
        return
    pos = off
    while pos < end:
        nxt = min(end, (pos // SECTOR + 1) * SECTOR)
        if rng.random() < 0.5:
            img[pos:nxt] = data[pos - off:nxt - off]
        pos = nxt


class FaultFiles(OSFiles):
    """The fault-injection layer (see the module docstring).  Thread-safe; per process."""

    OPS = ("write", "extend", "fsync", "create")

    def __init__(self):
        self._lock = threading.Lock()
        self._rules: list[list] = []  # [op, match, countdown, errno, times left]
        self._fd_path: dict[int, str] = {}
        self.counts = dict.fromkeys(self.OPS, 0)
        self.injected: list[tuple[str, str, int]] = []  # (op, path, errno) of each failure

    def fail(self, op: str, nth: int = 1, err: int = errno.ENOSPC, match: str = "",
             times: int = 1) -> None:
        """Make the ``nth`` next ``op`` on a file whose path contains ``match`` fail with
        ``err``, and the ``times - 1`` matching ones after it too (``times`` < 0: every
        one from then on, a disk that stays full until ``clear``)."""
        if op not in self.OPS:
            raise ValueError(f"op must be one of {self.OPS}")
        with self._lock:
            self._rules.append([op, match, max(1, nth), err, times])

    def clear(self) -> None:
        """No more failures (the disk has room again)."""
        with self._lock:
            self._rules.clear()

    def pending(self) -> int:
        """Armed failures that have not happened yet."""
        with self._lock:
            return sum(1 for r in self._rules if r[4] != 0)

    def _inject(self, op: str, path: str) -> None:
        with self._lock:
            self.counts[op] += 1
            for rule in self._rules:
                if rule[0] != op or rule[1] not in path or rule[4] == 0:
                    continue
                rule[2] -= 1
                if rule[2] > 0:
                    continue
                rule[2] = 1
                rule[4] -= 1
                self.injected.append((op, path, rule[3]))
                raise OSError(rule[3], os.strerror(rule[3]), path)

    def _path(self, fd: int) -> str:
        p = self._fd_path.get(fd)
        if p is None:
            try:
                p = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:  # pragma: no cover
                p = ""
        return p

    def open(self, path: str, flags: int, mode: int = 0o600) -> int:
        if flags & os.O_CREAT and not os.path.exists(path):
            self._inject("create", os.path.abspath(path))
        fd = os.open(path, flags, mode)
        self._fd_path[fd] = os.path.abspath(path)
        return fd

    def close(self, fd: int) -> None:
        self._fd_path.pop(fd, None)
        os.close(fd)

    def pwrite(self, fd: int, data, offset: int) -> int:
        return self.pwritev(fd, [data], offset)

    def pwritev(self, fd: int, buffers: list, offset: int) -> int:
        n = sum(memoryview(b).nbytes for b in buffers)
        grows = offset + n > os.fstat(fd).st_size
        self._inject("extend" if grows else "write", self._path(fd))
        return os.pwritev(fd, buffers, offset)

    def fsync(self, fd: int) -> None:
        self._inject("fsync", self._path(fd))
        os.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        self._inject("fsync", self._path(fd))
        os.fdatasync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        if size > os.fstat(fd).st_size:
            self._inject("extend", self._path(fd))
        os.ftruncate(fd, size)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)
        with self._lock:
            for fd, p in self._fd_path.items():
                if p == os.path.abspath(src):
                    self._fd_path[fd] = os.path.abspath(dst)


_layer: OSFiles = OSFiles()


def set_layer(layer: OSFiles | None) -> OSFiles:
    """Install a file layer (None = the real one); returns the previous layer."""
    global _layer
    old = _layer
    _layer = layer if layer is not None else OSFiles()
    return old


def get_layer() -> OSFiles:
    return _layer


def open(path: str, flags: int, mode: int = 0o600) -> int:  # noqa: A001 - the os name
    return _layer.open(path, flags, mode)


def close(fd: int) -> None:
    _layer.close(fd)


def pread(fd: int, n: int, offset: int) -> bytes:
    return _layer.pread(fd, n, offset)


def preadv(fd: int, buffers: list, offset: int) -> int:
    return _layer.preadv(fd, buffers, offset)


def pwrite(fd: int, data, offset: int) -> int:
    return _layer.pwrite(fd, data, offset)


def pwritev(fd: int, buffers: list, offset: int) -> int:
    return _layer.pwritev(fd, buffers, offset)


def fsync(fd: int) -> None:
    _layer.fsync(fd)


def fdatasync(fd: int) -> None:
    _layer.fdatasync(fd)


def ftruncate(fd: int, size: int) -> None:
    _layer.ftruncate(fd, size)


def size(fd: int) -> int:
    return _layer.size(fd)


def unlink(path: str) -> None:
    _layer.unlink(path)


def rename(src: str, dst: str) -> None:
    _layer.rename(src, dst)


def fsync_dir(path: str) -> None:
    _layer.fsync_dir(path)


def write_file_atomically(path: str, data: bytes, sync: bool = True) -> None:
    """Write ``path`` as a whole: a temporary file, fsynced, renamed over it.  A failure
    leaves the old file as it was and raises ``DiskFull`` (ENOSPC, 53100) or ``IOError_``
    (58030) naming the file."""
    tmp = path + ".tmp"
    try:
        fd = _layer.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            got = _layer.pwrite(fd, data, 0)
            if got != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), tmp)
            if sync:
                _layer.fsync(fd)
        finally:
            _layer.close(fd)
    except OSError as e:
        try:
            _layer.unlink(tmp)
        except OSError:
            pass
        raise write_error(path, e) from e
    _layer.rename(tmp, path)
    if sync:
        _layer.fsync_dir(os.path.dirname(path) or ".")


def write_error(path: str, e: OSError, what: str = "write to file", detail: str = ""):
    """The error for a failed write: ``DiskFull`` (53100) for ENOSPC, else ``IOError_``
    (58030), 'could not <what> "<path>"<detail>: <strerror>' as PostgreSQL words it."""
    why = e.strerror or (os.strerror(e.errno) if e.errno else str(e))
    if e.errno == errno.ENOSPC and why != os.strerror(errno.ENOSPC):
        why = f"{why}: {os.strerror(errno.ENOSPC)}"  # a short write: the disk is full
    cls = errors.DiskFull if e.errno in (errno.ENOSPC, errno.EDQUOT) else errors.IOError_
    return cls(f'could not {what} "{path}"{detail}: {why}')
