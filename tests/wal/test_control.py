"""The control file refuses a data directory made by another minidb: another pg_control
version or catalog version stops the open with PostgreSQL's "database files are
incompatible" before anything is read or written, and the directory stays as it was."""

from __future__ import annotations

import os

import pytest

import minidb
from minidb.config import CATALOG_VERSION_NO
from minidb.errors import OperationalError
from minidb.wal import control as ctlfile


def _files(d):
    out = {}
    for root, _dirs, names in os.walk(d):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[p] = f.read()
    return out


@pytest.mark.parametrize("field, value, words", [
    ("catalog_version_no", CATALOG_VERSION_NO - 1, "catalog version"),
    ("version", ctlfile.CONTROL_VERSION - 1, "pg_control version"),
])
def test_directory_of_another_format_is_refused(tmp_path, field, value, words):
    d = str(tmp_path / "db")
    con = minidb.connect(d)
    con.cursor().execute("CREATE TABLE t (a int)")
    con.cursor().execute("INSERT INTO t VALUES (1)")
    con.commit()
    con.close()
    cd = ctlfile.read_control(d)
    assert cd.catalog_version_no == CATALOG_VERSION_NO
    setattr(cd, field, value)
    raw = bytearray(cd.pack())
    with open(ctlfile.control_path(d), "wb") as f:
        f.write(raw)
    before = _files(d)
    with pytest.raises(OperationalError, match=f"incompatible.*{words} {value}"):
        minidb.connect(d)
    assert _files(d) == before
