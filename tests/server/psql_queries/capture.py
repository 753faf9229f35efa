"""Capture the statements PostgreSQL 15's psql sends for its catalog meta-commands.

Run by hand (not a test): starts a throw-away PostgreSQL 15 with ``log_statement=all``
(``bench/compare_postgres.py``'s ``local_server``), makes a small table with an index, runs
``psql -c '\\d'`` ... against it and writes each command's statements, in order, to
``<name>.sql`` beside this file (statements separated by a line ``-- next``).  The files are
the fixtures ``tests/server/test_psql_meta.py`` and ``tests/catalog`` replay.

    PYTHONPATH=. python tests/server/psql_queries/capture.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))

from bench.compare_postgres import local_server  # noqa: E402

COMMANDS = {
    "d": r"\d",
    "d_table": r"\d accounts",
    "dt": r"\dt",
    "di": r"\di",
    "l": r"\l",
    "dn": r"\dn",
    "d_index": r"\d accounts_bid",
    "dplus_table": r"\d+ accounts",
    "du": r"\du",
    "df": r"\df",
}
SETUP = ("CREATE TABLE accounts (aid integer PRIMARY KEY, bid integer NOT NULL, "
         "abalance bigint, filler char(84)); CREATE INDEX accounts_bid ON accounts (bid);")


def main() -> None:
    with local_server(options=["log_statement=all", "log_line_prefix='%m [%p] '"]) as dsn:
        kv = dict(p.split("=", 1) for p in dsn.split())
        env = dict(os.environ, PGHOST=kv["host"], PGPORT=kv["port"], PGUSER=kv["user"],
                   PGDATABASE=kv["dbname"])
        subprocess.run(["psql", "-X", "-q", "-c", SETUP], env=env, check=True)
        log = os.path.join(kv["host"], "log")
        for name, cmd in COMMANDS.items():
            start = os.path.getsize(log)
            subprocess.run(["psql", "-X", "-c", cmd], env=env, check=True,
                           capture_output=True)
            time.sleep(0.3)
            with open(log) as f:
                f.seek(start)
                text = f.read()
            stmts = [m.strip() for m in
                     re.split(r"^\S+ \S+ \S+ \[\d+\] LOG:  statement: ", text, flags=re.M)[1:]]
            stmts = [re.sub(r"\n\S+ \S+ \S+ \[\d+\] .*", "", s, flags=re.S).strip()
                     for s in stmts]
            with open(os.path.join(HERE, name + ".sql"), "w") as f:
                f.write(f"-- psql 15: {cmd}\n" + "\n-- next\n".join(stmts) + "\n")
            print(name, len(stmts))


if __name__ == "__main__":
    main()
