"""Shared fixtures: an open instance on a temporary data directory, tables as ``HeapRel``s,
and the checks every storage test ends with (no pins or content locks left in the pool).

Fixtures that return functions (``make_table``, ``open_rel``, ``assert_no_pins``) do so
because tests reopen instances and need the helpers for more than one of them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minidb.catalog import ColumnDef
from minidb.heap.heapam import HeapRel
from minidb.heap.layout import Column, RowLayout
from minidb.instance import Instance


def rel_of(inst: Instance, name: str) -> HeapRel:
    """The HeapRel of an existing table, built from the catalog (as the executor will)."""
    t = inst.catalog.table(name)
    layout = RowLayout([Column(c.name, c.type, c.not_null) for c in t.columns])
    return HeapRel(t.name, t.relfilenode, layout)


def create_table(inst: Instance, name: str, columns) -> HeapRel:
    """Create a table; ``columns`` are (name, type) or (name, type, not_null) tuples."""
    defs = [ColumnDef(c[0], c[1], bool(c[2]) if len(c) > 2 else False) for c in columns]
    inst.catalog.create_table(name, defs)
    return rel_of(inst, name)


def no_pins_problems(inst: Instance) -> list[str]:
    """What is still pinned or content-locked anywhere in the pool (empty list: nothing)."""
    seg = inst.seg
    problems = []
    for arr, what in ((seg.buf_refcount, "shared refcount"),
                      (seg.buf_lock_shared, "share-lock holders")):
        bad = np.flatnonzero(arr != 0)
        if bad.size:
            problems.append(f"{what} nonzero on buffers {bad[:10].tolist()}")
    bad = np.flatnonzero(seg.buf_lock_excl != -1)
    if bad.size:
        problems.append(f"exclusive lock held on buffers {bad[:10].tolist()}")
    bad = np.argwhere(seg.backend_pins != 0)
    if bad.size:
        problems.append(f"private pins (slot, buffer) {bad[:10].tolist()}")
    bad = np.argwhere(seg.backend_locks != 0)
    if bad.size:
        problems.append(f"private content locks (slot, buffer) {bad[:10].tolist()}")
    bad = np.flatnonzero(seg.buf_waiters != 0)
    if bad.size:
        problems.append(f"waiters left on buffers {bad[:10].tolist()}")
    return problems


def assert_no_pins_in(inst: Instance) -> None:
    problems = no_pins_problems(inst)
    assert not problems, "; ".join(problems)


def copy_sparse(src, dst) -> None:
    """Copy one file keeping its holes: only the extents that hold data are read and
    written (``SEEK_DATA`` / ``SEEK_HOLE``), the rest stays a hole of the same length.

    Data directories hold no large sparse file any more (the commit log is segment files
    of 256 KB at most, ``minidb/txn/clog.py``), so this is a plain copy in effect; a
    segment file with a hole (a page never written) keeps it.  Where the file system
    cannot report holes, the whole file is copied.
    """
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        size = os.fstat(fi.fileno()).st_size
        try:
            pos = os.lseek(fi.fileno(), 0, os.SEEK_DATA)
        except OSError:                    # no data at all (ENXIO), or no SEEK_DATA
            pos = size
        while pos < size:
            end = os.lseek(fi.fileno(), pos, os.SEEK_HOLE)
            fi.seek(pos)
            fo.seek(pos)
            left = end - pos
            while left:
                chunk = fi.read(min(left, 1 << 20))
                fo.write(chunk)
                left -= len(chunk)
            try:
                pos = os.lseek(fi.fileno(), end, os.SEEK_DATA)
            except OSError:                # ENXIO: only a hole after ``end``
                pos = size
        fo.truncate(size)
    shutil.copymode(src, dst)


def copy_datadir(src, dst) -> Path:
    """A copy of a (closed) data directory at ``dst`` (holes kept, see ``copy_sparse``)."""
    shutil.copytree(src, dst, copy_function=copy_sparse)
    return Path(dst)


@pytest.fixture
def instance(tmp_path):
    """An instance on ``tmp_path/'data'`` with a 64-buffer pool; closed afterwards."""
    inst = Instance(tmp_path / "data", shared_buffers=64)
    try:
        yield inst
    finally:
        inst.close()


@pytest.fixture
def backend(instance):
    """A backend (session) of ``instance``."""
    b = instance.connect()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def make_table():
    """``make_table(inst, name, [(col, type[, not_null]), ...]) -> HeapRel``."""
    return create_table


@pytest.fixture
def open_rel():
    """``open_rel(inst, name) -> HeapRel`` of an existing table (e.g. after a reopen)."""
    return rel_of


@pytest.fixture
def assert_no_pins():
    """``assert_no_pins(inst)``: no pin, content lock or waiter left anywhere in the pool."""
    return assert_no_pins_in


# -- a running ``minidb serve`` (tests/server, tests/pgwire) -----------------------------------------
# The server runs as a real process (``python -m minidb.cli serve``), as a user starts it; tests
# connect with psycopg 3 (a test dependency) or minidb's own client over its unix socket, or
# with raw sockets for malformed input.  ``psql`` and ``pgbench`` tests skip when those
# programs are absent.

START_TIMEOUT_S = 90.0   # two shared cores under a loaded test run


class Server:
    def __init__(self, datadir: str, port: int = 5432, settings: dict | None = None,
                 extra: list | None = None, launcher: list | None = None,
                 env: dict | None = None):
        self.datadir = datadir
        self.port = port
        self.sock = os.path.join(datadir, f".s.PGSQL.{port}")
        # launcher: what runs minidb's command line (a test's wrapper script instead)
        args = (launcher or [sys.executable, "-m", "minidb.cli"]) + \
            ["serve", datadir, "-p", str(port)]
        for k, v in (settings or {"max_worker_processes": 0}).items():
            args += ["-c", f"{k}={v}"]
        args += extra or []
        self.log_path = os.path.join(os.path.dirname(datadir), f"server-{port}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **env} if env else None)
        end = time.monotonic() + START_TIMEOUT_S
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.output()}")
            if time.monotonic() > end:
                self.proc.kill()
                raise RuntimeError(f"server did not start: {self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def connect(self, **kw):
        import psycopg
        kw.setdefault("connect_timeout", 60)
        return psycopg.connect(host=self.datadir, port=self.port, user="tester",
                               dbname="minidb", **kw)

    def stop(self, sig=signal.SIGINT, timeout: float = 90.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.log.close()
        return self.proc.returncode


@pytest.fixture
def make_server(tmp_path):
    servers = []

    def make(**kw) -> Server:
        kw.setdefault("datadir", str(tmp_path / "data"))
        s = Server(**kw)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def server(make_server) -> Server:
    return make_server()


@pytest.fixture(scope="module")
def module_server(tmp_path_factory):
    """One server for a whole test module (its tests share the data directory)."""
    s = Server(str(tmp_path_factory.mktemp("served") / "data"))
    yield s
    s.stop()
