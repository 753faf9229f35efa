"""Fixtures for the bench tests: a data directory with pgbench's tables at scale 1 but a
small pgbench_accounts (``ACCOUNTS`` rows per unit of scale, the driver's test-only
override), so that initializing takes a fraction of a second.  Each test gets its own."""

from __future__ import annotations

import pytest

from minidb.pgbench import init_pgbench
from minidb.instance import Instance

ACCOUNTS = 1000   # accounts per unit of scale in these tests (pgbench: 100,000)


@pytest.fixture(scope="session")
def accounts():
    """Accounts per unit of scale of the ``pgbench_*`` fixtures' tables."""
    return ACCOUNTS


@pytest.fixture
def pgbench_dir(tmp_path):
    """A freshly initialized data directory (closed)."""
    d = tmp_path / "data"
    init_pgbench(str(d), 1, accounts_per_scale=ACCOUNTS)
    return d


@pytest.fixture
def pgbench_inst(pgbench_dir):
    """An open Instance on a freshly initialized directory."""
    inst = Instance(str(pgbench_dir), shared_buffers=256)
    try:
        yield inst
    finally:
        inst.close()
