"""The grid of ``test_to_char_number.py`` - values x patterns x types - and the program that
asked PostgreSQL 15 for to_char's answers (``golden/pg15_to_char_numbers.json``):

    python tests/sql/pg_golden_to_char.py "host=/tmp/pgsock port=5432 dbname=postgres user=u"

Each answer is the text to_char returned, or ``ERR <sqlstate> <message>``.
"""

from __future__ import annotations

import json
import os
import sys

VALUES = ["0", "1", "-1", "12", "-12.5", "123.456", "-123.456", "1234567.891", "0.5", "-0.5",
          "0.05", "99999", "100000", "-7", "3.999", "2.5", "-2.5", "1e3", "0.0"]
PATTERNS = ["999", "9999", "000", "0000", "999.99", "990.99", "000.00", "FM999.99",
            "FM990.99", "FM9999", "9,999,999.999", "FM9,999,999.99", "99G999D99",
            "FM99G999D99", "S999.99", "S9999", "FMS999", "999PR", "999.9PR", "FM999PR",
            "999S", "FM999S", "9.9", "99.9", "0.9", "FM0.9", "9", "'x'999", "999 items",
            "MI999", "999MI", "PL999", "SG999", "FM9.99", "FMS9", "FM0000", "9999.",
            "FM9999.", "D99", "FM.99", "\"n=\"999"]
TYPES = ("numeric", "int", "float8")
GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "pg15_to_char_numbers.json")


def cases():
    """(type, value, pattern) of the grid (integers only for int)."""
    for f in PATTERNS:
        for v in VALUES:
            for t in TYPES:
                if t == "int" and ("." in v or "e" in v):
                    continue
                yield t, v, f


def main(conninfo: str) -> None:
    import psycopg
    c = psycopg.connect(conninfo, autocommit=True)
    out = {}
    for t, v, f in cases():
        try:
            r = c.execute(f"SELECT to_char({v}::{t}, %s)", (f,)).fetchone()[0]
        except psycopg.Error as e:
            r = f"ERR {e.sqlstate} {e.diag.message_primary}"
        out[f"{t}|{v}|{f}"] = r
    with open(GOLDEN, "w") as fh:
        json.dump(out, fh, indent=0, sort_keys=True)
        fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
