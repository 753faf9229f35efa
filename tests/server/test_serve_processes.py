"""The postmaster's process model: one thread, the WAL writer / checkpointer in a process of
its own, the crash restart run from the postmaster's loop, and the three shutdown modes.

What is proven here (on counters and states, never on time):
  * the server process has exactly one thread while it serves clients, and a child that is
    the background writer: timed checkpoints keep advancing the control file's checkpoint;
  * a backend that dies holding an LWLock (a test wrapper around the backend's entry makes
    one do so) makes the postmaster restart the instance: the other backends are killed,
    the background process is forked anew, the WAL is replayed, every committed row is
    there and new connections work - and the postmaster is still one thread;
  * smart shutdown (SIGTERM) serves the connected client until it leaves, and refuses new
    ones; immediate shutdown (SIGQUIT) leaves no checkpoint and the next start recovers.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

import pytest

psycopg = pytest.importorskip("psycopg")

LIMIT_S = 90.0      # two shared cores under a loaded test run


def threads_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads: line")


def children_of(pid: int) -> set[int]:
    out = set()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if fields[0] != b"Z" and int(fields[1]) == pid:
            out.add(int(p))
    return out


def wait_until(cond, what: str, limit: float = LIMIT_S) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting until {what}")


def test_postmaster_has_one_thread_and_a_background_process(make_server):
    from minidb.wal.control import read_control
    srv = make_server(settings={"max_worker_processes": 0, "checkpoint_timeout": 1})
    pm = srv.proc.pid
    with srv.connect(autocommit=True) as c:
        backend = c.info.backend_pid
        assert backend in children_of(pm)
        assert threads_of(pm) == 1
        c.execute("CREATE TABLE t (id integer)")
        first = read_control(srv.datadir).checkpoint
        # the background process's timed checkpoints: the control file moves on while the
        # postmaster and the backend do nothing but wait
        for i in range(2):
            c.execute(f"INSERT INTO t VALUES ({i})")
            seen = read_control(srv.datadir).checkpoint
            wait_until(lambda: read_control(srv.datadir).checkpoint > seen,
                       "a timed checkpoint")
        assert read_control(srv.datadir).checkpoint > first
        assert threads_of(pm) == 1
    assert srv.stop() == 0


_CRASHING_LAUNCHER = textwrap.dedent("""
    # minidb's command line, with a backend entry that dies holding the proc-array LWLock
    # when the flag file exists (once): a crash inside a shared-memory change
    import os, signal, sys
    import minidb.server.backend as backend
    real = backend.serve_connection
    FLAG = os.environ["MINIDB_TEST_CRASH_FLAG"]

    def serve_connection(sock, instance, **kw):
        if os.path.exists(FLAG):
            os.unlink(FLAG)
            instance.connect()
            instance.locks.procarray.acquire()
            os.kill(os.getpid(), signal.SIGKILL)
        return real(sock, instance, **kw)

    backend.serve_connection = serve_connection
    from minidb.cli import main
    main(prog_name="minidb")
""")


def test_crash_restart_from_the_postmaster_loop(make_server, tmp_path):
    launcher = tmp_path / "launch.py"
    launcher.write_text(_CRASHING_LAUNCHER)
    flag = tmp_path / "crash-next"
    srv = make_server(launcher=[sys.executable, str(launcher)],
                      env={"MINIDB_TEST_CRASH_FLAG": str(flag)})
    pm = srv.proc.pid
    old_children = children_of(pm)
    assert len(old_children) >= 2           # the background process and the monitor
    survivor = srv.connect(autocommit=True)
    survivor.execute("CREATE TABLE k (id integer PRIMARY KEY, v integer)")
    survivor.execute("INSERT INTO k SELECT g, g FROM generate_series(1, 100) g")
    survivor_pid = survivor.info.backend_pid
    flag.write_text("x")
    with pytest.raises(psycopg.OperationalError):
        srv.connect()                       # its backend dies holding the LWLock
    wait_until(lambda: "reinitialized" in srv.output(), "the crash restart")
    out = srv.output()
    assert "terminating any other active server processes" in out
    # every process of the old instance is gone: the open connection's backend, the
    # background process, the monitor; new ones were forked
    wait_until(lambda: not (old_children | {survivor_pid}) & children_of(pm),
               "the old processes are gone")
    assert len(children_of(pm)) >= 2
    with pytest.raises(psycopg.OperationalError):
        survivor.execute("SELECT 1")
    survivor.close()
    with srv.connect(autocommit=True) as c:
        assert c.execute("SELECT count(*), sum(v) FROM k").fetchone() == (100, 5050)
        c.execute("UPDATE k SET v = 0 WHERE id = 1")
    assert threads_of(pm) == 1
    assert srv.stop() == 0
    srv2 = make_server()
    with srv2.connect() as c:
        assert c.execute("SELECT sum(v) FROM k").fetchone() == (5049,)


def test_smart_shutdown_waits_for_clients(make_server):
    srv = make_server()
    c = srv.connect(autocommit=True)
    c.execute("CREATE TABLE s (id integer)")
    srv.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: "smart shutdown" in srv.output(), "the request is seen")
    assert not os.path.exists(srv.sock)     # no new connections
    c.execute("INSERT INTO s VALUES (1)")   # the connected client is still served
    assert srv.proc.poll() is None
    c.close()
    srv.proc.wait(LIMIT_S)
    assert srv.proc.returncode == 0
    assert "database system is shut down" in srv.output()
    srv2 = make_server()
    with srv2.connect() as c2:
        assert c2.execute("SELECT count(*) FROM s").fetchone() == (1,)


def test_immediate_shutdown_then_recovery(make_server):
    from minidb.wal.control import read_control
    srv = make_server()
    c = srv.connect(autocommit=True)
    c.execute("CREATE TABLE i (id integer)")
    c.execute("INSERT INTO i SELECT g FROM generate_series(1, 50) g")
    before = read_control(srv.datadir).checkpoint
    srv.stop(signal.SIGQUIT)
    with pytest.raises(psycopg.OperationalError):
        c.execute("SELECT 1")
    c.close()
    with open(srv.log_path) as f:
        assert "without a checkpoint" in f.read()
    assert read_control(srv.datadir).checkpoint == before
    srv2 = make_server()
    with srv2.connect() as c:
        assert c.execute("SELECT count(*) FROM i").fetchone() == (50,)
