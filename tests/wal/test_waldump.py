"""The WAL inspection tools: ``minidb waldump``, ``minidb controldata``, EXPLAIN (ANALYZE,
WAL), the REPL's ``\\wal`` (minidb/wal/README.md, "Inspecting the log").

Every assertion is on the records and counters themselves: a known workload's records
with their resource managers and operation names, ``--stats`` totals against the sum of
the printed lines, the control file against the checkpoint record waldump shows, and
EXPLAIN's WAL line against the backend's usage counters.
"""

from __future__ import annotations

import re
import struct
from collections import Counter

import pytest
from click.testing import CliRunner

import minidb
from minidb.cli import main
from minidb.config import CATALOG_VERSION_NO
from minidb.wal import dump
from minidb.wal import record as rec

SETTINGS = dict(max_worker_processes=0, wal_segment_size=1 << 20)
LINE = re.compile(r"rmgr: (\S+) +len \(rec/tot\): +(\d+)/ +(\d+), tx: +(\d+), "
                  r"lsn: ([0-9A-F]+/[0-9A-F]{8}), prev ([0-9A-F]+/[0-9A-F]{8}), desc: (.*)$")


def _run(*args):
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def _parse(out: str) -> list[tuple]:
    rows = []
    for ln in out.splitlines():
        m = LINE.match(ln)
        assert m, ln
        rows.append(m.groups())
    return rows


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    """A closed data directory: a table with a primary key, one INSERT, one UPDATE (HOT),
    one DELETE, each committed, and an explicit CHECKPOINT between them."""
    d = str(tmp_path_factory.mktemp("waldump") / "data")
    conn = minidb.connect(d, **SETTINGS)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("create table t (k int primary key, v text)")
    cur.execute("insert into t values (1, 'a')")
    cur.execute("update t set v = 'b' where k = 1")
    cur.execute("checkpoint")
    cur.execute("delete from t where k = 1")
    conn.close()
    return d


def test_waldump_lists_the_known_workload(workload):
    code, out, err = _run("waldump", workload)
    rows = _parse(out)
    ops = [(rmgr, desc.split(",")[0].split(" ")[0]) for rmgr, *_x, desc in rows]
    # the log of a new directory starts with the shutdown checkpoint of initdb
    assert ops[0] == ("XLOG", "CHECKPOINT_SHUTDOWN")
    # the catalog's bootstrap and the CREATE TABLE are heap changes of the catalog tables
    # (pg_class, pg_attribute, pg_index) with a Storage CREATE per new file; the DML's records
    # follow the CREATE TABLE's commit, in order
    creates = [i for i, op in enumerate(ops) if op == ("Storage", "CREATE")]
    assert [rows[i][6] for i in creates[-2:]] == ["CREATE base/16384", "CREATE base/16385"]
    ddl_end = next(i for i in range(creates[-1], len(ops)) if ops[i] == ("Transaction", "COMMIT"))
    assert {op[0] for op in ops[1:ddl_end]} == {"Storage", "Heap", "Transaction", "CLOG"}
    # the first xid's commit-log page is zeroed, logged once (ZeroCLOGPage's record)
    assert [rows[i][6] for i in range(ddl_end) if ops[i][0] == "CLOG"] == ["ZEROPAGE page 0"]
    rows, ops = rows[:1] + rows[ddl_end + 1:], ops[:1] + ops[ddl_end + 1:]
    body = [op for op in ops[1:] if op[0] != "XLOG"]
    assert body == [("Heap", "INSERT+INIT"), ("Btree", "INSERT_LEAF"), ("Transaction", "COMMIT"),
                    ("Heap", "HOT_UPDATE"), ("Transaction", "COMMIT"),
                    ("Heap", "DELETE"), ("Transaction", "COMMIT")]
    # the DELETE's scan sets hint bits on the heap page first: after the checkpoint that
    # logs the page whole (FPI_FOR_HINT, wal_log_hints' rule)
    assert [op for op in ops if op[0] == "XLOG"] == [
        ("XLOG", "CHECKPOINT_SHUTDOWN"), ("XLOG", "CHECKPOINT_ONLINE"),
        ("XLOG", "FPI_FOR_HINT"), ("XLOG", "CHECKPOINT_SHUTDOWN")]
    # the descriptions carry the main data; the block references name the relation
    by_op = {op: row for op, row in zip(ops, rows)}
    insert = by_op[("Heap", "INSERT+INIT")]
    # a new page is not logged whole: the record formats it and carries the tuple
    assert re.match(r"INSERT\+INIT off 1 flags 0x00 tuple \d+ bytes, blkref #0: rel 1663/1/",
                    insert[6])
    assert insert[6].endswith(" blk 0")
    assert int(insert[1]) == int(insert[2])           # no image
    assert re.match(r"HOT_UPDATE off 1 xmax \d+ infobits 0x0000 flags 0x0D cmax 0 ; "
                    r"new off 2 tuple \d+ bytes, blkref", by_op[("Heap", "HOT_UPDATE")][6])
    # the index's first change after CREATE INDEX (which writes around the WAL) is an image,
    # so the record keeps no block data to describe
    leaf = by_op[("Btree", "INSERT_LEAF")][6]
    assert leaf.startswith("INSERT_LEAF off 1, blkref") and leaf.endswith(" FPW")
    assert re.match(r"DELETE off 2 xmax \d+ infobits 0x0000 flags 0x05 cmax 0, blkref",
                    by_op[("Heap", "DELETE")][6])
    # the first change of the heap page after the CHECKPOINT logs a full-page image, the
    # later DELETE and the HOT update before the checkpoint do not
    heap_blk = insert[6].split("blkref #0: ")[1].split(" FPW")[0]
    after = [r[6] for r in rows[ops.index(("XLOG", "CHECKPOINT_ONLINE")) + 1:]
             if heap_blk in r[6]]
    assert after[0].endswith(heap_blk + " FPW") and not after[1].endswith("FPW")
    assert not by_op[("Heap", "HOT_UPDATE")][6].endswith("FPW")
    commit = by_op[("Transaction", "COMMIT")]
    assert re.match(r"COMMIT \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} UTC$", commit[6])
    # transactions: each commit has the xid of the change before it; prev-links chain
    xids = [int(r[3]) for r in rows]
    for i, (rmgr, desc) in enumerate(ops):
        if rmgr == "Transaction":
            assert xids[i] == xids[i - 1] > 0
    assert all(rows[i][5] == rows[i - 1][4] for i in range(2, len(rows)))
    # the end of the log, in pg_waldump's words
    assert code == 1
    assert re.search(rf"error: error in WAL record at {re.escape(rows[-1][4])}: "
                     r"invalid record length at [0-9A-F/]+: wanted 32, got 0", err)


def test_stats_totals_equal_the_lines(workload):
    _code, out, _err = _run("waldump", workload)
    rows = _parse(out)
    _code, sout, _err = _run("waldump", "--stats", workload)
    total = [ln for ln in sout.splitlines() if ln.startswith("Total")][0].split()
    assert int(total[1]) == len(rows)
    assert int(total[2]) == sum(int(r[1]) for r in rows)                 # record size
    assert int(total[4]) == sum(int(r[2]) - int(r[1]) for r in rows)     # FPI size
    assert int(total[6]) == sum(int(r[2]) for r in rows)                 # combined
    per_rmgr = {ln.split()[0]: int(ln.split()[1]) for ln in sout.splitlines()[2:-2]}
    assert per_rmgr == dict(Counter(r[0] for r in rows))
    assert per_rmgr["XLOG"] == 4 and per_rmgr["Transaction"] == 5   # bootstrap, DDL, 3 DML
    assert _run("waldump", workload, "-z")[1] == sout
    _code, rout, _err = _run("waldump", "--stats=record", workload)
    per_record = {ln.split()[0]: int(ln.split()[1]) for ln in rout.splitlines()[2:-2]}
    assert per_record["Transaction/COMMIT"] == 5
    assert per_record["Heap/HOT_UPDATE"] == sum(r[6].startswith("HOT_UPDATE") for r in rows)
    assert sum(per_record.values()) == len(rows)


def test_start_end_limit_rmgr_xid(workload):
    rows = _parse(_run("waldump", workload)[1])
    lsns = [r[4] for r in rows]
    code, out, _ = _run("waldump", "--start", lsns[2], "--end", lsns[5], workload)
    assert code == 0 and [r[4] for r in _parse(out)] == lsns[2:5]
    code, out, _ = _run("waldump", "-n", "2", workload)
    assert code == 0 and [r[4] for r in _parse(out)] == lsns[:2]
    _, out, _ = _run("waldump", "--rmgr", "Transaction", workload)
    assert {r[0] for r in _parse(out)} == {"Transaction"} and len(_parse(out)) == 5
    xid = next(r[3] for r in rows if r[0] == "Btree" and r[6].startswith("INSERT_LEAF")
               and "16385" in r[6])
    _, out, _ = _run("waldump", "--xid", xid, workload)
    assert [r[6].split(" ")[0] for r in _parse(out)] == ["INSERT+INIT", "INSERT_LEAF", "COMMIT"]
    # a start inside a record: the next record, as pg_waldump says it
    hi, lo = lsns[1].split("/")
    _, out, err = _run("waldump", "-n", "1", "--start", f"{hi}/{int(lo, 16) + 8:X}", workload)
    assert _parse(out)[0][4] == lsns[2] and "first record is after" in err
    _, out, _ = _run("waldump", "-b", "--rmgr", "Heap", "-n", "1", workload)
    assert re.search(r"\tblkref #0: rel 1663/1/\d+ fork main blk 0; data: \d+ bytes "
                     r"\(logical\); will init\n", out)
    _, out, _ = _run("waldump", "-b", "--rmgr", "XLOG", workload)   # FPI_FOR_HINT's image
    assert "\tblkref #0: rel 1663/1/" in out and " fork main blk 0 (FPW); hole: offset: " in out
    code, _, err = _run("waldump", "--rmgr", "nosuch", workload)
    assert code != 0 and "does not exist" in err


def test_damaged_record_ends_the_dump(workload, tmp_path):
    import shutil
    d = str(tmp_path / "copy")
    shutil.copytree(workload, d)
    rows = _parse(_run("waldump", d)[1])
    victim = rec.parse_lsn(rows[4][4])
    seg = dump.segment_size(d)
    path = f"{d}/pg_wal/{1:08X}{0:08X}{victim // seg:08X}"
    with open(path, "r+b") as f:
        f.seek(victim % seg + rec.HEADER_SIZE + 1)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    code, out, err = _run("waldump", d)
    assert code == 1 and len(_parse(out)) == 4
    assert (f"error in WAL record at {rows[3][4]}: incorrect resource manager data checksum "
            f"in record at {rows[4][4]}") in err


def test_controldata_after_a_checkpoint(tmp_path):
    d = str(tmp_path / "data")
    conn = minidb.connect(d, **SETTINGS)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("create table t (k int)")
    cur.execute("insert into t values (1)")
    cur.execute("checkpoint")
    code, out, _ = _run("controldata", d)
    assert code == 0
    fields = dict(ln.split(":", 1) for ln in out.splitlines())
    fields = {k: v.strip() for k, v in fields.items()}
    assert all(ln.index(ln.split(":", 1)[1].strip()) == 38 for ln in out.splitlines()
               if ln.split(":", 1)[1].strip())
    assert fields["Database cluster state"] == "in production"
    assert fields["pg_control version number"] == "1301"
    assert fields["Catalog version number"] == str(CATALOG_VERSION_NO)
    assert fields["Bytes per WAL segment"] == str(1 << 20)
    assert fields["Latest checkpoint's full_page_writes"] == "on"
    # the checkpoint it names is the CHECKPOINT's record, whose redo point it repeats
    rows = _parse(_run("waldump", "--rmgr", "XLOG", d)[1])
    last = rows[-1]
    assert last[6].split(" ")[0] == "CHECKPOINT_ONLINE"
    hi, lo = last[4].split("/")
    assert fields["Latest checkpoint location"] == f"{hi}/{int(lo, 16):X}"
    redo = re.search(r"redo ([0-9A-F/]+);", last[6]).group(1)
    assert rec.parse_lsn(fields["Latest checkpoint's REDO location"]) == rec.parse_lsn(redo)
    nxt = re.search(r"xid (\d+:\d+);", last[6]).group(1)
    assert fields["Latest checkpoint's NextXID"] == nxt
    assert fields["Latest checkpoint's REDO WAL file"] == "000000010000000000000001"
    conn.close()
    fields = {ln.split(":", 1)[0]: ln.split(":", 1)[1].strip()
              for ln in _run("controldata", d)[1].splitlines()}
    assert fields["Database cluster state"] == "shut down"
    # a damaged control file is still shown, after pg_controldata's warning
    with open(f"{d}/global/pg_control", "r+b") as f:
        f.seek(16)
        f.write(b"\xff")
    code, out, _ = _run("controldata", d)
    assert code == 0 and out.startswith("WARNING: Calculated CRC checksum does not match")
    code, _, err = _run("controldata", str(tmp_path / "nosuch"))
    assert code == 1 and "could not open file" in err


def test_explain_analyze_wal_counts_an_insert(tmp_path):
    n = 300
    conn = minidb.connect(str(tmp_path / "data"), **SETTINGS)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("create table t (k int primary key, v text)")
    wal = conn.session.backend.wal
    before = wal.usage()
    values = ",".join(f"({i}, 'row {i}')" for i in range(n))
    cur.execute(f"explain (analyze, wal, costs off, timing off, summary off) "
                f"insert into t values {values}")
    lines = [r[0] for r in cur.fetchall()]
    after = wal.usage()
    assert lines[0].startswith("Insert on t")
    m = re.fullmatch(r"  WAL: records=(\d+) fpi=(\d+) bytes=(\d+)", lines[1])
    assert m, lines
    records, fpi, nbytes = map(int, m.groups())
    assert records >= n            # one heap and one index record per row at least
    assert 0 < fpi < records and nbytes > records * rec.HEADER_SIZE
    # the node's figures are the backend's usage over the statement (the commit record
    # follows the plan's execution)
    assert after[0] - before[0] == records + 1 and after[1] - before[1] == fpi
    # a read-only scan of clean pages writes nothing: no WAL line
    cur.execute("vacuum t")
    cur.execute("explain (analyze, wal, costs off, timing off, summary off) select * from t")
    assert not any("WAL:" in r[0] for r in cur.fetchall())
    with pytest.raises(minidb.NotSupportedError, match="WAL requires ANALYZE"):
        cur.execute("explain (wal) select * from t")
    conn.close()


def test_repl_wal_command(tmp_path):
    d = str(tmp_path / "data")
    code, out, _ = _run(d, "-c", "create table t (k int)", "-c", "insert into t values (1)",
                        "-c", "\\wal")
    assert code == 0
    vals = {}
    for ln in out.splitlines():
        parts = [p.strip() for p in ln.split("|")]
        if len(parts) == 2:
            vals[parts[0]] = parts[1]
    assert int(vals["wal_records"]) >= 2 and int(vals["session_records"]) >= 2  # INSERT, COMMIT
    assert int(vals["wal_bytes"]) >= int(vals["session_bytes"]) > 0
    assert rec.parse_lsn(vals["flush_lsn"]) <= rec.parse_lsn(vals["insert_lsn"])


def test_main_data_layouts_match_the_writers():
    import minidb.heap.heapam as heapam
    import minidb.heap.modify as modify
    import minidb.heap.prune as prune
    import minidb.heap.redo as heap_redo
    import minidb.index.redo as index_redo
    import minidb.index.insert as insert
    import minidb.recovery as recovery
    import minidb.txn.clog as clog
    assert dump.CHECKPOINT.format == recovery.CHECKPOINT.format
    assert dump.XACT.format == recovery.XACT.format
    assert dump.SMGR_CREATE.format == recovery.SMGR_CREATE.format
    assert dump.SMGR_TRUNCATE.format == recovery.SMGR_TRUNCATE.format
    assert dump.CLOG_PAGE.format == clog.CLOG_PAGE.format
    assert dump.CLOG_TRUNC.format == clog.CLOG_TRUNC.format
    assert dump.OFFNUM.format == heapam._OFFNUM.format == modify._OFFNUM.format \
        == insert._U16.format == struct.Struct("<H").format
    assert dump.UPDATE.format == modify._UPDATE_MAIN.format
    assert dump.HEAP_INSERT.format == heap_redo.INSERT.format
    assert dump.HEAP_XMAX.format == heap_redo.XMAX.format
    assert (dump.HEAP_F_CMAX, dump.HEAP_F_NEW_TUPLE) == (heap_redo.F_CMAX, heap_redo.F_NEW_TUPLE)
    assert dump.OFFNUM.format == index_redo.COUNT.format
    assert dump.PRUNE.format == prune._PRUNE_MAIN.format
    assert dump.SPLIT.format == insert._SPLIT_MAIN.format
    assert dump.NEWROOT.format == insert._NEWROOT_MAIN.format


def test_bench_wal_stats_line(tmp_path):
    from minidb.pgbench import init_pgbench
    d = str(tmp_path / "bench")
    init_pgbench(d, 1, accounts_per_scale=200)
    code, out, _ = _run("bench", d, "-c", "1", "-t", "5", "--wal-stats",
                        "--accounts-per-scale", "200")
    assert code == 0
    lines = out.splitlines()
    assert lines[-2].startswith("tps = ")       # pgbench's summary is unchanged above it
    m = re.fullmatch(r"WAL: records=(\d+) fpi=(\d+) bytes=(\d+) flushes=(\d+) syncs=(\d+); "
                     r"per transaction: records=([\d.]+) fpi=([\d.]+) bytes=(\d+)", lines[-1])
    assert m, lines[-1]
    records, fpi, nbytes, flushes = map(int, m.groups()[:4])
    # TPC-B-like: three UPDATEs, an INSERT and a COMMIT per transaction at least
    assert records >= 5 * 5 and flushes >= 5 and nbytes > records * rec.HEADER_SIZE
    assert float(m.group(6)) == pytest.approx(records / 5, abs=0.01)
    assert "WAL:" not in _run("bench", d, "-t", "1", "--accounts-per-scale", "200")[1]
