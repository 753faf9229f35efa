"""Isolation anomalies: what is left here once the schedules became isolation specs.

The scripted schedules - sessions running statements in a fixed order, a waiting step
proven to wait by the proc array's wait-for graph - are spec files played by
``test_isolation`` (``isolation/specs``, format in ``isolation/README.md``):

============================  ================  =========================  ==================
anomaly                       level             expected (as PostgreSQL)   spec
============================  ================  =========================  ==================
dirty read                    RC, RR            never                      dirty-read
dirty write                   RC                never: the second writer   dirty-write,
                                                waits, then works on the   row-locks
                                                first's outcome
non-repeatable read           RC / RR           allowed / prevented        non-repeatable-read
phantom (insert)              RC / RR           allowed / prevented        phantom
lost update                   RR                40001 for the second       lost-update-rr,
                                                updater if the first       rr-concurrent-commit
                                                commits
                              RC                no lost update: the        read-committed-
                                                waiter re-evaluates the    recheck
                                                newest version
write skew                    RR                ALLOWED (no SSI)           write-skew
============================  ================  =========================  ==================

Here stays what is not a schedule: SERIALIZABLE is refused with a clear error.

What this does not prove: anything about concurrency (the specs, ``test_si_model`` and
the forked ``test_concurrency`` / ``test_crash`` do).
"""

from __future__ import annotations

import pytest

from minidb.catalog import ColumnDef
from minidb.errors import NotSupportedError
from minidb.instance import Instance
from minidb.session import Session
from txn_steps import RR

INITIAL = {k: 100 * k for k in range(1, 6)}


@pytest.fixture
def inst(tmp_path, assert_no_pins):
    inst = Instance(tmp_path / "data", shared_buffers=64)
    inst.catalog.create_table("t", [ColumnDef("k", "bigint", True), ColumnDef("v", "bigint")])
    s = Session(inst)
    try:
        assert s.insert_many("t", sorted(INITIAL.items())) == len(INITIAL)
        yield inst
        assert_no_pins(inst)
    finally:
        s.close()
        inst.close()


def test_serializable_is_refused_clearly(inst):
    s = Session(inst)
    try:
        with pytest.raises(NotSupportedError, match="(?i)serializable"):
            s.begin("serializable")
        s.begin(RR)                        # the session is still usable
        rows = s.select("t")
        assert dict(rows) == INITIAL and len(rows) == len(INITIAL)
        s.commit()
    finally:
        s.close()
