"""Pickled messages over pipes created before any fork, with a timeout on every wait.

A ``Channel`` is one ``os.pipe`` made when the instance opens, so every process forked from
the instance afterwards (the pool's processes, benchmark clients, forked test processes,
whatever forked them: ``multiprocessing`` or a bare ``os.fork``) holds both ends.  There
is no feeder thread and no shared lock: whoever uses a channel must be its only reader (or
its only writer) at the time, which the pool's claim protocol guarantees.  The one
many-writer channel, the pool master's control channel, carries messages far below
``PIPE_BUF`` (4096 bytes), which the kernel writes atomically.

Frame: an 8-byte little-endian length, then the pickle.  Both ends are non-blocking, and
the waits are ``select`` calls in slices of at most ``POLL_S``, so a sender blocked on a
full pipe can notice that its reader died, and a receiver can give up at its deadline.
A receiver keeps a partly read frame in a per-process buffer and completes it on its next
``recv``; ``drain`` throws away whatever is in the pipe (used after the writer was killed
mid-frame, before the channel is used again).

Left out: encryption, authentication (every process here is the instance's own).
"""

from __future__ import annotations

import fcntl
import os
import pickle
import select
import struct
import time

_HDR = struct.Struct("<Q")
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux), not exported by Python 3.11
POLL_S = 0.1
_NOTHING = object()


class Channel:
    """One direction of a pipe, framed (see the module docstring)."""

    __slots__ = ("rfd", "wfd", "_buf", "_pid")

    def __init__(self, pipe_size: int | None = None):
        self.rfd, self.wfd = os.pipe()
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.wfd, False)
        if pipe_size:
            try:  # a larger pipe lets a worker send a batch without waiting for the leader
                fcntl.fcntl(self.wfd, F_SETPIPE_SZ, pipe_size)
            except OSError:  # pragma: no cover - above /proc/sys/fs/pipe-max-size
                pass
        self._buf = bytearray()
        self._pid = os.getpid()

    def fileno(self) -> int:
        return self.rfd

    def _buffer(self) -> bytearray:
        if self._pid != os.getpid():  # a forked child: the parent's partial frame is not ours
            self._buf = bytearray()
            self._pid = os.getpid()
        return self._buf

    # -- sending -------------------------------------------------------------------------------
    def send(self, obj, *, timeout: float | None = None, alive=None) -> None:
        """Send one message.  Waits while the pipe is full; raises ``TimeoutError`` after
        ``timeout`` seconds, or ``BrokenPipeError`` when ``alive()`` says the reader is gone
        (asked every ``POLL_S`` while waiting)."""
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        frame = memoryview(_HDR.pack(len(data)) + data)
        deadline = None if timeout is None else time.monotonic() + timeout
        off = 0
        while off < len(frame):
            try:
                off += os.write(self.wfd, frame[off:])
                continue
            except BlockingIOError:
                pass
            wait = POLL_S
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise TimeoutError(f"channel full for {timeout} s (reader not reading)")
            select.select([], [self.wfd], [], wait)
            if alive is not None and not alive():
                raise BrokenPipeError("the reader of the channel is gone")

    # -- receiving -----------------------------------------------------------------------------
    def _take(self, buf: bytearray):
        if len(buf) < _HDR.size:
            return _NOTHING
        (n,) = _HDR.unpack_from(buf)
        if len(buf) < _HDR.size + n:
            return _NOTHING
        obj = pickle.loads(memoryview(buf)[_HDR.size:_HDR.size + n])
        del buf[:_HDR.size + n]
        return obj

    def _fill(self, buf: bytearray) -> bool:
        """Read what the pipe holds now; True if anything came."""
        got = False
        while True:
            try:
                chunk = os.read(self.rfd, 1 << 20)
            except BlockingIOError:
                return got
            if not chunk:  # pragma: no cover - we hold a write end ourselves
                return got
            buf += chunk
            got = True

    def has_message(self) -> bool:
        """A complete message is buffered or readable without waiting."""
        buf = self._buffer()
        self._fill(buf)
        if len(buf) < _HDR.size:
            return False
        return len(buf) >= _HDR.size + _HDR.unpack_from(buf)[0]

    def recv(self, timeout: float | None = 0.0):
        """The next message, or None if none is complete within ``timeout`` seconds
        (0: do not wait; None: wait as long as it takes, in slices)."""
        buf = self._buffer()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            msg = self._take(buf)
            if msg is not _NOTHING:
                return msg
            if self._fill(buf):
                continue
            wait = POLL_S
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return None
            select.select([self.rfd], [], [], wait)

    def drain(self) -> int:
        """Throw away everything in the pipe and in this process's buffer; returns bytes."""
        buf = self._buffer()
        self._fill(buf)
        n = len(buf)
        buf.clear()
        return n

    def close(self) -> None:
        """Close both ends in this process.  The descriptors become -1, so a stale user
        (say a scan's generator closed after its instance) gets EBADF instead of reading a
        pipe that reused the numbers."""
        for fd in (self.rfd, self.wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.rfd = self.wfd = -1


def wait_any(channels, timeout: float) -> list:
    """The channels among ``channels`` that have a complete message, waiting up to
    ``timeout`` for one to have at least some bytes."""
    ready = [ch for ch in channels if ch.has_message()]
    if ready or timeout <= 0:
        return ready
    r, _, _ = select.select([ch.rfd for ch in channels], [], [], timeout)
    if not r:
        return []
    return [ch for ch in channels if ch.has_message()]
