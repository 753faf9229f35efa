"""A running ``minidb serve`` on a temporary data directory, for the protocol tests.

The server runs as a real process (``python -m minidb.cli serve``), as a user starts it;
tests connect with psycopg 3 (a test dependency) over its unix socket, or with raw sockets
for malformed input.  ``psql`` and ``pgbench`` tests skip when those programs are absent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

START_TIMEOUT_S = 90.0   # two shared cores under a loaded test run


class Server:
    def __init__(self, datadir: str, port: int = 5432, settings: dict | None = None,
                 extra: list | None = None):
        self.datadir = datadir
        self.port = port
        self.sock = os.path.join(datadir, f".s.PGSQL.{port}")
        args = [sys.executable, "-m", "minidb.cli", "serve", datadir, "-p", str(port)]
        for k, v in (settings or {"max_worker_processes": 0}).items():
            args += ["-c", f"{k}={v}"]
        args += extra or []
        self.log_path = os.path.join(os.path.dirname(datadir), f"server-{port}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
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
