"""The control file, ``DATADIR/global/pg_control`` (pg_control.h, controldata_utils.c).

A packed struct of fewer than 512 bytes (one sector), zero-padded to 8192 bytes, whose
last field is the CRC-32C of everything before it:

    ===================  =====  ================================================
    field                type   meaning
    ===================  =====  ================================================
    system_identifier    u64    chosen at initdb (time and pid)
    version              u32    CONTROL_VERSION
    catalog_version_no   u32    config.CATALOG_VERSION_NO when the directory was made
    state                u32    DB_* below
    time                 f64    when the file was last written (Unix time)
    checkpoint           u64    start LSN of the latest checkpoint record
    redo                 u64    that checkpoint's redo point
    next_xid             u64    that checkpoint's next transaction id
    next_oid             u64    that checkpoint's next object id (0 = not tracked)
    full_page_writes     u8     full_page_writes when it was taken
    checkpoint_time      f64    when it was taken
    wal_segment_size     u32    bytes per WAL segment (fixed at initdb)
    blcksz               u32    8192
    checksum_version     u32    1 (minidb always checksums pages)
    crc                  u32    CRC-32C of the bytes before it
    ===================  =====  ================================================

Departure: PostgreSQL rewrites the file in place (a 512-byte write is atomic on its
sector); minidb writes a temporary file, fsyncs it and renames it over the old one, so
the crash-test layer (which tears writes at 512-byte boundaries) cannot produce a mixed
file either way.  A CRC mismatch stops startup with an error naming the file; a file of another
``CONTROL_VERSION`` or ``CATALOG_VERSION_NO`` stops it with PostgreSQL's "database files are
incompatible" (the directory was made by another minidb: make a new one).
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, fields

import minidb.fileio as fileio
from minidb.config import BLCKSZ, CATALOG_VERSION_NO
from minidb.errors import DataCorrupted, OperationalError
from minidb.wal.record import crc32c

CONTROL_VERSION = 1301
CONTROL_FILE = os.path.join("global", "pg_control")
CONTROL_SIZE = BLCKSZ

DB_STARTUP, DB_SHUTDOWNED, DB_SHUTDOWNING, DB_IN_CRASH_RECOVERY, DB_IN_PRODUCTION = 0, 1, 3, 4, 6
STATE_NAMES = {0: "starting up", 1: "shut down", 2: "shut down in recovery",
               3: "shutting down", 4: "in crash recovery", 5: "in archive recovery",
               6: "in production"}

_STRUCT = struct.Struct("<QIIIdQQQQBdIII")


@dataclass
class ControlData:
    system_identifier: int = 0
    version: int = CONTROL_VERSION
    catalog_version_no: int = CATALOG_VERSION_NO
    state: int = DB_STARTUP
    time: float = 0.0
    checkpoint: int = 0
    redo: int = 0
    next_xid: int = 0
    next_oid: int = 0
    full_page_writes: int = 1
    checkpoint_time: float = 0.0
    wal_segment_size: int = 0
    blcksz: int = BLCKSZ
    checksum_version: int = 1

    def pack(self) -> bytes:
        body = _STRUCT.pack(*(getattr(self, f.name) for f in fields(self)))
        body += struct.pack("<I", crc32c(body))
        return body + bytes(CONTROL_SIZE - len(body))


def control_path(datadir: str) -> str:
    return os.path.join(datadir, CONTROL_FILE)


def read_control(datadir: str) -> ControlData | None:
    """The control file, or None if there is none (a new data directory)."""
    path = control_path(datadir)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    if len(raw) < _STRUCT.size + 4:
        raise DataCorrupted(f'control file "{path}" is too short ({len(raw)} bytes)')
    (version,) = struct.unpack_from("<I", raw, 8)
    if version != CONTROL_VERSION:
        raise OperationalError(
            f"database files are incompatible with this minidb: the data directory was "
            f"initialized with pg_control version {version}, this minidb needs "
            f'{CONTROL_VERSION} ("{path}"); make a new data directory')
    body = raw[:_STRUCT.size]
    (crc,) = struct.unpack_from("<I", raw, _STRUCT.size)
    if crc32c(body) != crc:
        raise DataCorrupted(f'incorrect checksum in control file "{path}"')
    cd = ControlData(*_STRUCT.unpack(body))
    if cd.catalog_version_no != CATALOG_VERSION_NO:
        raise OperationalError(
            f"database files are incompatible with this minidb: the data directory was "
            f"initialized with catalog version {cd.catalog_version_no}, this minidb has "
            f"{CATALOG_VERSION_NO}; make a new data directory")
    if cd.blcksz != BLCKSZ:
        raise OperationalError(f'control file "{path}": the data directory was made with '
                               f"{cd.blcksz}-byte blocks, this minidb uses {BLCKSZ}")
    return cd


def write_control(datadir: str, cd: ControlData, sync: bool = True) -> None:
    cd.time = time.time()
    os.makedirs(os.path.dirname(control_path(datadir)), exist_ok=True)
    fileio.write_file_atomically(control_path(datadir), cd.pack(), sync=sync)


def new_system_identifier() -> int:
    return (int(time.time()) << 32) | (os.getpid() & 0xFFFFF) << 12 | (time.monotonic_ns() & 0xFFF)
