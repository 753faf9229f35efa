"""``AT TIME ZONE`` and ``timezone(zone, value)`` (PostgreSQL's timestamp_zone,
timestamptz_zone, timestamp_izone, timestamptz_izone).

* ``timestamp AT TIME ZONE z``: the wall-clock time read in zone ``z`` -> timestamptz;
* ``timestamptz AT TIME ZONE z``: the instant's wall-clock time in ``z`` -> timestamp
  (a date is first a timestamptz in the session's TimeZone, as PostgreSQL casts it).

The zone is text or an interval.  Text is looked up as PostgreSQL does: first as a time
zone abbreviation (a fixed offset: ``EST`` is -5 h, ``CEST`` +2 h; a subset of PostgreSQL's
``Default`` abbreviation set, ``ZONE_ABBREVIATIONS``), then as an IANA name, case
insensitively (``Europe/Paris``, ``europe/paris``), then as a POSIX zone string whose
offset counts hours *west* of Greenwich (``UTC+2`` and ``+2`` are two hours behind UTC,
``<+03>-3`` three ahead); anything else is 22023 ``time zone "x" not recognized``.  An
interval is an offset east of UTC (``INTERVAL '+02:00'``) and may not hold months or days
(22023).  Departures: POSIX strings with DST rules other than the IANA ones
(``EST5EDT`` is an IANA name), and the abbreviations outside the subset, are not
recognized.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
import zoneinfo

import minidb.errors as errors
from minidb.exec import datetimes as dtx
from minidb.types import int_to_timestamp, timestamp_to_int

__all__ = ["at_time_zone", "zone_for_at", "ZONE_ABBREVIATIONS"]

# abbreviation -> hours east of UTC (PostgreSQL's Default set, the common ones)
ZONE_ABBREVIATIONS = {
    "utc": 0, "gmt": 0, "ut": 0, "z": 0, "zulu": 0, "wet": 0,
    "est": -5, "edt": -4, "cst": -6, "cdt": -5, "mst": -7, "mdt": -6, "pst": -8, "pdt": -7,
    "akst": -9, "akdt": -8, "hst": -10,
    "cet": 1, "cest": 2, "bst": 1, "eet": 2, "eest": 3, "msk": 3, "ist": 2,
    "jst": 9, "kst": 9, "awst": 8, "acst": 9.5, "aest": 10, "aedt": 11, "nzst": 12, "nzdt": 13,
}
_POSIX = re.compile(r"^(?:[a-z]{3,}|<[^>]*>)?([+-]?)(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?$")


@functools.lru_cache(maxsize=1)
def _iana_names() -> dict:
    return {n.lower(): n for n in zoneinfo.available_timezones()}


def _fixed(seconds: float):
    return _dt.timezone(_dt.timedelta(seconds=seconds))


@functools.lru_cache(maxsize=256)
def zone_for_at(name: str):
    """The tzinfo for a text zone of AT TIME ZONE (see the module docstring)."""
    low = name.strip().lower()
    if low in ZONE_ABBREVIATIONS:
        return _fixed(ZONE_ABBREVIATIONS[low] * 3600)
    iana = _iana_names().get(low)
    if iana is not None:
        return zoneinfo.ZoneInfo(iana)
    m = _POSIX.match(low)
    if m:
        secs = int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60 + int(m.group(4) or 0)
        if secs < 24 * 3600:
            return _fixed(secs if m.group(1) == "-" else -secs)     # POSIX: west positive
    raise errors.InvalidParameterValue(f'time zone "{name}" not recognized')


def _interval_zone(iv):
    if iv.months or iv.mdays:
        raise errors.InvalidParameterValue(
            f'interval time zone "{dtx.format_interval(iv)}" must not include months or days')
    if abs(iv.usecs) >= 24 * 3600 * 1_000_000:
        raise errors.InvalidParameterValue(
            f'interval time zone "{dtx.format_interval(iv)}" must be less than 1 day')
    return _dt.timezone(_dt.timedelta(microseconds=iv.usecs))


def at_time_zone(zone, v: int, tname: str) -> int:
    """``v`` (timestamp or timestamptz, microseconds since 2000) AT TIME ZONE ``zone`` (text
    or Interval): the other type's microseconds."""
    tz = zone_for_at(zone) if isinstance(zone, str) else _interval_zone(zone)
    if tname == "timestamp":
        local = int_to_timestamp(int(v))
        return dtx.local_to_tstz_dt(local.replace(tzinfo=tz))
    return timestamp_to_int(dtx.tstz_to_local(int(v), tz).replace(tzinfo=None))
