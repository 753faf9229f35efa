"""A sqllogictest runner: SQLite's correctness corpus, run against minidb and PostgreSQL 15.

SQLite's sqllogictest corpus is a set of ``.test`` files, each a script of *records*
separated by blank lines, whose expected answers were computed by SQLite (and checked
against other engines).  A record is one of

* ``statement ok`` / ``statement error`` and the SQL on the next lines: the statement must
  succeed / must fail;
* ``query TYPES SORT [LABEL]``, the SQL, a line ``----`` and the expected result: ``TYPES``
  has one letter per column (``I`` integer, ``R`` real, ``T`` text), ``SORT`` is ``nosort``,
  ``rowsort`` (rows sorted as strings, column by column) or ``valuesort`` (every value
  sorted on its own); the result is either the values, one per line, or a line
  ``N values hashing to H`` (H the MD5 of the values, each followed by a newline, after
  sorting);
* ``hash-threshold N`` (results of more than N values were written as a hash), ``halt``;

and a record may be preceded by ``skipif ENGINE`` / ``onlyif ENGINE`` lines.  Both engines
run here as ``postgresql`` (minidb follows PostgreSQL): records the corpus marks
``skipif postgresql`` or ``onlyif`` another engine are left out for both, so both are judged
on the same records.

Values are rendered as the corpus's reference runner renders them: NULL as ``NULL``; ``I``
columns as integers (a real truncated toward zero, a string read as its leading integer);
``R`` columns with three decimals; ``T`` columns as text, an empty string as ``(empty)``
and a character outside printable ASCII as ``@``.

Each file runs in a data directory (minidb) or a schema (PostgreSQL) of its own, in
autocommit mode, in a child process with a time limit per file (``--file-timeout``;
records left when it expires count as ``timeout``).  The run prints, per file and in all,
the records run and the share that passed on each engine, then the commonest reasons
minidb failed where PostgreSQL passed.

The corpus is not part of this repository (about 1 GB; it is public domain): give its
``test`` directory.  ``--sample`` picks the fixed sample the README's figures come from:
``select1-5.test``, every file of ``evidence/``, the first file (by name) of each
``index/*/10`` directory and of each ``random/*`` directory, each file's first 2,000
records (``--max-records``: a file is a script, so its first records run as they would in
the whole file).

    python bench/sqllogictest.py --corpus ~/sqllogictest/test --sample --start-local
    python bench/sqllogictest.py --corpus ~/sqllogictest/test/select1.test --engine minidb
"""

from __future__ import annotations

import argparse
import collections
import glob
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ENGINE_NAME = "postgresql"


# ---------------------------------------------------------------------------------------------
# The file format
@dataclass
class Record:
    line: int
    kind: str                    # "statement" or "query"
    sql: str
    expect_error: bool = False
    types: str = ""
    sort: str = "nosort"
    expected: list[str] = field(default_factory=list)
    hashed: tuple[int, str] | None = None   # (number of values, md5)


HASH_RE = re.compile(r"^(\d+) values hashing to ([0-9a-f]{32})$")


MAX_RECORDS = [0]  # 0: all (set by --max-records)


def parse(path: str) -> list[Record]:
    """The records of one file that apply to ``ENGINE_NAME``, in order (a ``halt`` that
    applies ends the list; at most ``MAX_RECORDS[0]`` of them when that is set)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    records: list[Record] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i].rstrip("\r")
        if not line.strip() or line.startswith("#"):
            i += 1
            continue
        start = i + 1
        applies = True
        while line.startswith(("skipif ", "onlyif ")):
            word, engine = line.split()[:2]
            if (word == "skipif") == (engine == ENGINE_NAME):
                applies = False
            i += 1
            line = lines[i].rstrip("\r")
        head = line.split()
        i += 1
        body: list[str] = []
        while i < n and lines[i].strip():
            body.append(lines[i].rstrip("\r"))
            i += 1
        if head[0] == "halt":
            if applies:
                break
            continue
        if head[0] == "hash-threshold" or not applies:
            continue
        if head[0] == "statement":
            records.append(Record(start, "statement", "\n".join(body),
                                  expect_error=head[1] == "error"))
        elif head[0] == "query":
            if "----" in body:
                cut = body.index("----")
                sql, result = body[:cut], body[cut + 1:]
            else:
                sql, result = body, []
            rec = Record(start, "query", "\n".join(sql), types=head[1],
                         sort=head[2] if len(head) > 2 else "nosort")
            m = HASH_RE.match(result[0].strip()) if len(result) == 1 else None
            if m:
                rec.hashed = (int(m.group(1)), m.group(2))
            else:
                rec.expected = [v.strip() for v in result]
            records.append(rec)
        if MAX_RECORDS[0] and len(records) >= MAX_RECORDS[0]:
            break
    return records


# ---------------------------------------------------------------------------------------------
# Rendering and comparing results
def render(value, kind: str) -> str:
    if value is None:
        return "NULL"
    if kind == "I":
        if isinstance(value, bool):
            return str(int(value))
        if isinstance(value, int):
            return str(value)
        if isinstance(value, str):
            m = re.match(r"\s*[-+]?\d+", value)
            return str(int(m.group(0))) if m else "0"
        try:
            return str(int(value))
        except (TypeError, ValueError, OverflowError):
            return "0"
    if kind == "R":
        try:
            return "%.3f" % float(value)
        except (TypeError, ValueError):
            return "0.000"
    text = str(value)
    if text == "":
        return "(empty)"
    return "".join(c if " " <= c <= "~" else "@" for c in text)


def values_of(rows, types: str, sort: str) -> list[str]:
    out_rows = []
    for row in rows:
        kinds = types if len(types) == len(row) else "T" * len(row)
        out_rows.append([render(v, k) for v, k in zip(row, kinds)])
    if sort == "rowsort":
        out_rows.sort()
    values = [v for r in out_rows for v in r]
    if sort == "valuesort":
        values.sort()
    return values


def matches(rec: Record, rows) -> str:
    """"" if ``rows`` is the expected answer, else a short reason."""
    if rows and len(rows[0]) != len(rec.types):
        return f"{len(rows[0])} columns, expected {len(rec.types)}"
    values = values_of(rows, rec.types, rec.sort)
    if rec.hashed is not None:
        count, digest = rec.hashed
        h = hashlib.md5("".join(v + "\n" for v in values).encode()).hexdigest()
        if len(values) != count:
            return f"{len(values)} values, expected {count}"
        return "" if h == digest else "wrong values (hash differs)"
    if values != rec.expected:
        if len(values) != len(rec.expected):
            return f"{len(values)} values, expected {len(rec.expected)}"
        return "wrong values"
    return ""


# ---------------------------------------------------------------------------------------------
# The engines
class MinidbEngine:
    def __init__(self):
        import minidb
        self.dir = tempfile.mkdtemp(prefix="minidb-slt-")
        self.conn = minidb.connect(os.path.join(self.dir, "data"))
        self.conn.autocommit = True

    def run(self, sql: str, want_rows: bool):
        cur = self.conn.cursor()
        cur.execute(sql)
        return cur.fetchall() if want_rows else None

    def close(self):
        try:
            self.conn.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class PostgresEngine:
    def __init__(self, dsn: str):
        import psycopg
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.schema = f"slt_{os.getpid()}"
        self.conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        self.conn.execute(f"CREATE SCHEMA {self.schema}")
        self.conn.execute(f"SET search_path = {self.schema}")
        self.conn.execute("SET statement_timeout = '20s'")

    def run(self, sql: str, want_rows: bool):
        cur = self.conn.execute(sql)
        return cur.fetchall() if want_rows else None

    def close(self):
        try:
            self.conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        finally:
            self.conn.close()


def reason_of(e: BaseException) -> str:
    text = str(e).strip().split("\n")[0]
    text = re.sub(r"\d+", "N", text)
    text = re.sub(r'"[^"]*"', '"X"', text)
    return f"{type(e).__name__}: {text}"[:120]


def run_file(path: str, engine: str, dsn: str | None, out) -> None:
    """Run one file's records on one engine; one JSON line per record to ``out``."""
    records = parse(path)
    eng = MinidbEngine() if engine == "minidb" else PostgresEngine(dsn)
    try:
        for rec in records:
            why = ""
            try:
                rows = eng.run(rec.sql, rec.kind == "query")
                if rec.kind == "statement" and rec.expect_error:
                    why = "no error, expected one"
                elif rec.kind == "query":
                    why = matches(rec, rows)
            except Exception as e:  # noqa: BLE001 - every failure is a result here
                if not (rec.kind == "statement" and rec.expect_error):
                    why = reason_of(e)
            out.put(json.dumps({"file": path, "line": rec.line, "why": why}))
    finally:
        eng.close()
        out.put(None)


def run_engine(files: list[str], engine: str, dsn: str | None, timeout: float) -> dict:
    """{(file, line): why} over ``files`` (why "" = passed, "timeout" = not reached)."""
    results: dict = {}
    ctx = multiprocessing.get_context("fork")
    for path in files:
        q = ctx.Queue()
        p = ctx.Process(target=run_file, args=(path, engine, dsn, q))
        p.start()
        deadline = time.monotonic() + timeout
        done = False
        while not done and time.monotonic() < deadline:
            try:
                item = q.get(timeout=0.5)
            except Exception:  # queue.Empty: still running, or dead without a word
                if not p.is_alive() and q.empty():
                    break
                continue
            if item is None:
                done = True
            else:
                r = json.loads(item)
                results[(r["file"], r["line"])] = r["why"]
        if not done:
            p.kill()
        p.join(5)
        left = "timeout" if p.exitcode is None or p.exitcode < 0 else "engine failed to start"
        for rec in parse(path):
            results.setdefault((path, rec.line), left)
    return results


def sample(corpus: str) -> list[str]:
    """The fixed sample (see the module docstring)."""
    files = [os.path.join(corpus, f"select{i}.test") for i in range(1, 6)]
    files += sorted(glob.glob(os.path.join(corpus, "evidence", "*.test")))
    for d in sorted(glob.glob(os.path.join(corpus, "index", "*", "10"))):
        tests = sorted(glob.glob(os.path.join(d, "*.test")))
        files += tests[:1]
    for d in sorted(glob.glob(os.path.join(corpus, "random", "*"))):
        files += sorted(glob.glob(os.path.join(d, "*.test")))[:1]
    return [f for f in files if os.path.exists(f)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True,
                    help="a .test file or a directory of them (the corpus's test/)")
    ap.add_argument("--sample", action="store_true",
                    help="the fixed sample of the corpus the README's figures come from")
    ap.add_argument("--engine", choices=["minidb", "postgres", "both"], default="both")
    ap.add_argument("--dsn", default=None, help="PostgreSQL to compare against (libpq string)")
    ap.add_argument("--start-local", action="store_true",
                    help="initdb and start a throw-away PostgreSQL on a unix socket")
    ap.add_argument("--file-timeout", type=float, default=300.0,
                    help="seconds per file and engine (default 300)")
    ap.add_argument("--max-records", type=int, default=None,
                    help="run only each file's first N records (default: all; 2,000 with "
                         "--sample)")
    ap.add_argument("--json", default=None, help="write every record's outcome here")
    args = ap.parse_args(argv)

    MAX_RECORDS[0] = args.max_records if args.max_records is not None else (
        2000 if args.sample else 0)
    if os.path.isfile(args.corpus):
        files = [args.corpus]
    elif args.sample:
        files = sample(args.corpus)
    else:
        files = sorted(glob.glob(os.path.join(args.corpus, "**", "*.test"), recursive=True))
    engines = ["minidb", "postgres"] if args.engine == "both" else [args.engine]

    import contextlib
    with contextlib.ExitStack() as stack:
        dsn = args.dsn
        if "postgres" in engines and dsn is None:
            if args.start_local:
                from bench.compare_postgres import local_server
                dsn = stack.enter_context(local_server(port=54331))
            else:
                print("PostgreSQL: no --dsn and no --start-local; minidb alone")
                engines = ["minidb"]
        results = {}
        for eng in engines:
            t0 = time.monotonic()
            results[eng] = run_engine(files, eng, dsn, args.file_timeout)
            print(f"{eng}: {len(files)} files in {time.monotonic() - t0:.0f} s",
                  file=sys.stderr)
    report(files, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({eng: {f"{k[0]}:{k[1]}": v for k, v in r.items()}
                       for eng, r in results.items()}, f)
    return 0


def report(files: list[str], results: dict) -> None:
    engines = list(results)
    groups: dict[str, list] = collections.defaultdict(list)
    base = os.path.commonpath(files) if len(files) > 1 else os.path.dirname(files[0])
    for path in files:
        rel = os.path.relpath(path, base)
        group = rel.split(os.sep)[0] if os.sep in rel else rel
        groups[group].append(path)
    head = "| files | records | " + " | ".join(f"{e} passed" for e in engines) + " |"
    print(head)
    print("|---|---:|" + "---:|" * len(engines))
    totals = collections.Counter()
    for group, paths in groups.items():
        keys = [k for k in results[engines[0]] if k[0] in paths]
        cells = []
        for e in engines:
            ok = sum(1 for k in keys if results[e].get(k) == "")
            totals[e] += ok
            cells.append(f"{ok:,} ({100 * ok / max(1, len(keys)):.1f}%)")
        totals["records"] += len(keys)
        print(f"| {group} ({len(paths)}) | {len(keys):,} | " + " | ".join(cells) + " |")
    n = totals["records"]
    print(f"| all ({len(files)}) | {n:,} | " + " | ".join(
        f"{totals[e]:,} ({100 * totals[e] / max(1, n):.1f}%)" for e in engines) + " |")
    if "minidb" in results:
        other = results.get("postgres")
        why = collections.Counter(
            v for k, v in results["minidb"].items()
            if v and (other is None or other.get(k) == ""))
        label = "minidb failed where PostgreSQL passed" if other else "minidb failed"
        print(f"\n{label}: {sum(why.values()):,} records; commonest reasons:")
        for reason, count in why.most_common(15):
            print(f"  {count:6,}  {reason}")
        if other:
            both = sum(1 for k, v in results["minidb"].items() if v and other.get(k))
            only_pg = sum(1 for k, v in other.items() if v and results["minidb"].get(k) == "")
            print(f"failed on both: {both:,}; PostgreSQL failed where minidb passed: "
                  f"{only_pg:,}")


if __name__ == "__main__":
    raise SystemExit(main())
