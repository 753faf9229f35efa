"""``minidb controldata DATADIR``: the control file for people (pg_controldata).

Prints the fields ``global/pg_control`` holds (``minidb.wal.control``), one per line,
labelled as pg_controldata labels them and with the values from column 38 on::

    pg_control version number:            1301
    Catalog version number:               202612011
    Database system identifier:           7714362232624755481
    Database cluster state:               shut down
    pg_control last modified:             Tue Dec  1 15:45:25 2026
    Latest checkpoint location:           0/100648
    Latest checkpoint's REDO location:    0/100648
    Latest checkpoint's REDO WAL file:    000000010000000000000001
    ...

Only what minidb's control file holds is printed, plus what follows from it (the redo
point's segment file; the timeline, always 1).  NextXID is printed as PostgreSQL prints a
full transaction id, ``epoch:xid`` (minidb's xids are 64-bit: the epoch is the high half).
As pg_controldata does, a file whose CRC does not match is still printed, after a warning
(``WARNING: Calculated CRC checksum does not match value stored in file.``); a file too
short or of another version is an error.
"""

from __future__ import annotations

import struct
import time

from minidb.wal import control as ctlfile
from minidb.wal.record import crc32c
from minidb.wal.xlog import segment_name

CRC_WARNING = ("WARNING: Calculated CRC checksum does not match value stored in file.\n"
               "Either the file is corrupt, or it has a different layout than this program\n"
               "is expecting.  The results below are untrustworthy.")


class ControlDataError(Exception):
    pass


def read_unchecked(datadir: str) -> tuple[ctlfile.ControlData, bool]:
    """(the control file's fields, whether its CRC matches)."""
    path = ctlfile.control_path(datadir)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ControlDataError(f'could not open file "{path}" for reading: No such file or '
                               f"directory") from None
    layout = ctlfile._STRUCT
    if len(raw) < layout.size + 4:
        raise ControlDataError(f'control file "{path}" is too short ({len(raw)} bytes)')
    (version,) = struct.unpack_from("<I", raw, 8)
    if version != ctlfile.CONTROL_VERSION:
        raise ControlDataError(f'control file "{path}" has version {version}, this minidb '
                               f"reads {ctlfile.CONTROL_VERSION}")
    body = raw[:layout.size]
    (crc,) = struct.unpack_from("<I", raw, layout.size)
    cd = ctlfile.ControlData(*layout.unpack(body))
    return cd, crc32c(body) == crc


def format_lsn(lsn: int) -> str:
    """pg_controldata's ``%X/%X`` (pg_waldump pads the low half to 8 digits)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def _when(t: float) -> str:
    return time.strftime("%c", time.localtime(t)) if t else "(never)"


def lines(cd: ctlfile.ControlData) -> list[str]:
    """The report, one ``label: value`` line per field."""
    seg = cd.wal_segment_size
    xid = cd.next_xid
    rows = [
        ("pg_control version number", cd.version),
        ("Catalog version number", cd.catalog_version_no),
        ("Database system identifier", cd.system_identifier),
        ("Database cluster state", ctlfile.STATE_NAMES.get(cd.state, f"unrecognized status "
                                                                     f"code {cd.state}")),
        ("pg_control last modified", _when(cd.time)),
        ("Latest checkpoint location", format_lsn(cd.checkpoint)),
        ("Latest checkpoint's REDO location", format_lsn(cd.redo)),
        ("Latest checkpoint's REDO WAL file", segment_name(cd.redo // seg, seg) if seg else "?"),
        ("Latest checkpoint's TimeLineID", 1),
        ("Latest checkpoint's full_page_writes", "on" if cd.full_page_writes else "off"),
        ("Latest checkpoint's NextXID", f"{xid >> 32}:{xid & 0xFFFFFFFF}"),
        ("Latest checkpoint's NextOID", cd.next_oid),
        ("Time of latest checkpoint", _when(cd.checkpoint_time)),
        ("Database block size", cd.blcksz),
        ("Bytes per WAL segment", seg),
        ("Data page checksum version", cd.checksum_version),
    ]
    return [f"{label + ':':<38}{value}" for label, value in rows]


def report(datadir: str) -> tuple[list[str], bool]:
    """(the lines, whether the CRC matched)."""
    cd, ok = read_unchecked(datadir)
    return lines(cd), ok
