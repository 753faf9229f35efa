"""Concurrent inserts from forked processes (as benchmark clients are forked from the open
instance): splits race with splits, descents with splits, unique checks with each other.

* **inserts**: 4 processes insert 1800 rows each, keys distinct per process and keys every
  process shares, into a table with a non-unique index on the key and a unique index on
  a distinct id.  Afterwards ``check_btree`` passes on both, every heap row has exactly
  one entry per index, and an index scan returns each TID once, in key order.
* **unique races**: 4 processes insert the same 300 ids in different orders, one
  transaction per row; a duplicate either fails at once or waits for the running
  inserter and then fails.  Exactly one row per id survives.

* **mixed**: two processes insert and delete, one scans forward and backward checking
  order and the rows that never change, one runs VACUUM; then ``check_btree``.

What these do not prove: that every interleaving is safe (they sample a few under the
OS scheduler), or anything about time."""

from __future__ import annotations

import multiprocessing
import random
import traceback

from minidb import index as ix
from minidb.errors import UniqueViolation
from minidb.instance import Instance
from minidb.session import Session

from tests.index.helpers import Table, make_table

N_PROCS = 4
N_IDS = 300


def _run(inst, target, args_list):
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(len(args_list))   # all children start their work together
    procs, conns = [], []
    for args in args_list:
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_guard, args=(target, inst, (barrier, *args), send),
                        daemon=True)
        p.start()
        send.close()
        procs.append(p)
        conns.append(recv)
    out = []
    for p, c in zip(procs, conns):
        assert c.poll(100), f"child {p.pid} sent nothing"
        out.append(c.recv())
        p.join(30)
        assert p.exitcode == 0
    for r in out:
        assert not (isinstance(r, tuple) and r and r[0] == "error"), r[1]
    return out


def _guard(target, inst, args, conn):
    try:
        conn.send(target(inst, *args))
    except BaseException:  # noqa: BLE001 - reported to the parent
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def _inserter(inst, barrier, p):
    rng = random.Random(p)
    with Session(inst, deadlock_timeout=100) as s:
        t = Table(s, "t")
        rows = [(1000 + p * 100_000 + i, p * 10_000 + i, "d") for i in range(1500)]
        rows += [(i % 40, p * 10_000 + 5000 + i, "s" * (i % 7)) for i in range(300)]
        rng.shuffle(rows)
        barrier.wait(30)
        for i in range(0, len(rows), 10):     # 10 rows per transaction
            s.begin()
            for r in rows[i:i + 10]:
                t.insert(r)
            s.commit()
        return s.backend.counters()["index_splits"]


def test_concurrent_inserts_from_processes(tmp_path, assert_no_pins):
    with Instance(tmp_path / "d", shared_buffers=128) as inst:
        make_table(inst, "t", [("k", "integer"), ("id", "integer"), ("pad", "text")])
        with Session(inst) as s:
            ix.create_index(s.backend, "t", "t_k", ["k"])
            ix.create_index(s.backend, "t", "t_id", ["id"], unique=True)
        splits = _run(inst, _inserter, [(p,) for p in range(N_PROCS)])
        assert sum(splits) > 10
        with Session(inst) as s:
            b = s.backend
            heap = s.select_tids("t")
            assert len(heap) == N_PROCS * 1800
            for name in ("t_k", "t_id"):
                summary = ix.check_btree(b, name)
                assert summary["leaf_items"] == len(heap)
            tids = list(ix.index_scan(b, "t_k"))
            assert len(tids) == len(set(tids)) == len(heap)
            by_tid = dict(heap)
            keys = [by_tid[t][0] for t in tids]
            assert keys == sorted(keys)
            for k in (0, 17, 39):
                assert len(ix.lookup_visible(b, "t_k", k)) == N_PROCS * len(range(k, 300, 40))
            b.xact.commit()
        assert_no_pins(inst)


def _racer(inst, barrier, p):
    ids = list(range(N_IDS))
    random.Random(100 + p).shuffle(ids)
    won = lost = 0
    with Session(inst, deadlock_timeout=100) as s:
        t = Table(s, "t")
        barrier.wait(30)
        for i in ids:
            s.begin()
            try:
                t.insert((i, p))
                s.commit()
                won += 1
            except UniqueViolation:
                s.rollback()
                lost += 1
    return won, lost


def test_unique_races_between_processes(tmp_path, assert_no_pins):
    with Instance(tmp_path / "d", shared_buffers=64) as inst:
        make_table(inst, "t", [("id", "integer"), ("who", "integer")])
        with Session(inst) as s:
            ix.create_index(s.backend, "t", "t_id", ["id"], unique=True)
        results = _run(inst, _racer, [(p,) for p in range(N_PROCS)])
        assert sum(w for w, _l in results) == N_IDS
        assert sum(lost for _w, lost in results) == N_IDS * (N_PROCS - 1)
        with Session(inst) as s:
            rows = s.select("t")
            assert sorted(r[0] for r in rows) == list(range(N_IDS))
            ix.check_btree(s.backend, "t_id")
            s.backend.xact.commit()
        assert_no_pins(inst)


def _churner(inst, barrier, p):
    """Insert odd keys (tag 1) in small transactions, delete about half of them again."""
    rng = random.Random(200 + p)
    with Session(inst, deadlock_timeout=100) as s:
        t = Table(s, "t")
        mine = []
        barrier.wait(30)
        for round_ in range(40):
            s.begin()
            for _ in range(25):
                k = 2 * rng.randrange(3000) + 1
                mine.append(t.insert((k, 1)))
            s.commit()
            for tid in rng.sample(mine, 10):
                t.delete(tid)
                mine.remove(tid)
        return len(mine)


def _scanner(inst, barrier, p):
    """Scan forward and backward, whole and ranges: order holds and every stable row
    (even key, never deleted) is returned exactly once."""
    rng = random.Random(300 + p)
    n = 0
    with Session(inst) as s:
        b = s.backend
        barrier.wait(30)
        for i in range(40):
            lo = rng.randrange(0, 6000)
            hi = lo + rng.randrange(0, 3000)
            direction = "backward" if i % 2 else "forward"
            keys = [r[0] for _t, r in ix.index_scan(b, "t_k", lo, hi, direction=direction)
                    .visible_rows()]
            b.xact.commit()
            assert keys == sorted(keys, reverse=direction == "backward"), (lo, hi, direction)
            evens = [k for k in keys if k % 2 == 0]
            want = [k for k in range(lo + lo % 2, min(hi, 5998) + 1, 2)]
            if direction == "backward":
                want.reverse()
            assert evens == want, (lo, hi, direction)
            n += len(keys)
    return n


def _vacuumer(inst, barrier, p):
    from minidb.heap.vacuum import vacuum_table
    removed = 0
    with Session(inst) as s:
        b = s.backend
        barrier.wait(30)
        for _ in range(6):
            res = vacuum_table(b, s.rel("t"), index_callbacks=ix.index_vacuum_callbacks(b, "t"))
            removed += res.dead_item_ids_removed
    return removed


def _mixed(inst, barrier, role, p):
    return {"churn": _churner, "scan": _scanner, "vacuum": _vacuumer}[role](inst, barrier, p)


def test_scans_inserts_deletes_and_vacuum_in_processes(tmp_path, assert_no_pins):
    """Two processes insert and delete, one scans in both directions checking order and
    the stable rows, one vacuums; afterwards the tree and the table agree."""
    with Instance(tmp_path / "d", shared_buffers=96) as inst:
        make_table(inst, "t", [("k", "integer"), ("tag", "integer")])
        with Session(inst) as s:
            s.insert_many("t", [(k, 0) for k in range(0, 6000, 2)])
            ix.create_index(s.backend, "t", "t_k", ["k"])
        out = _run(inst, _mixed, [("churn", 0), ("churn", 1), ("scan", 2), ("vacuum", 3)])
        kept = out[0] + out[1]
        with Session(inst) as s:
            b = s.backend
            rows = s.select("t")
            assert len(rows) == 3000 + kept
            summary = ix.check_btree(b, "t_k")
            assert summary["leaf_items"] - summary["dead_items"] >= len(rows)
            b.xact.commit()
        assert_no_pins(inst)
