"""AT TIME ZONE and timezone(zone, value) (``minidb.exec.atzone``); every expected value was
taken from PostgreSQL 15 with TimeZone = 'UTC' (or the zone the test sets)."""

from __future__ import annotations

import pytest

from minidb import errors

# zone -> PostgreSQL 15's timestamptz '2020-{01,07}-15 12:00+00' AT TIME ZONE zone (text)
PG_ZONES = {
    "UTC": ("2020-01-15 12:00:00", "2020-07-15 12:00:00"),
    "Z": ("2020-01-15 12:00:00", "2020-07-15 12:00:00"),
    "EST": ("2020-01-15 07:00:00", "2020-07-15 07:00:00"),
    "PDT": ("2020-01-15 05:00:00", "2020-07-15 05:00:00"),
    "CEST": ("2020-01-15 14:00:00", "2020-07-15 14:00:00"),
    "ACST": ("2020-01-15 21:30:00", "2020-07-15 21:30:00"),
    "NZDT": ("2020-01-16 01:00:00", "2020-07-16 01:00:00"),
    "est": ("2020-01-15 07:00:00", "2020-07-15 07:00:00"),
    "UTC+2": ("2020-01-15 10:00:00", "2020-07-15 10:00:00"),
    "UTC-3:30": ("2020-01-15 15:30:00", "2020-07-15 15:30:00"),
    "+5": ("2020-01-15 07:00:00", "2020-07-15 07:00:00"),
    "-05": ("2020-01-15 17:00:00", "2020-07-15 17:00:00"),
    "<+03>-3": ("2020-01-15 15:00:00", "2020-07-15 15:00:00"),
    "EST5": ("2020-01-15 07:00:00", "2020-07-15 07:00:00"),
    "Etc/GMT+2": ("2020-01-15 10:00:00", "2020-07-15 10:00:00"),
    "europe/paris": ("2020-01-15 13:00:00", "2020-07-15 14:00:00"),
    "America/New_York": ("2020-01-15 07:00:00", "2020-07-15 08:00:00"),
    "EST5EDT": ("2020-01-15 07:00:00", "2020-07-15 08:00:00"),
}


@pytest.fixture
def utc(db):
    db.x("SET timezone = 'UTC'")
    return db


@pytest.mark.parametrize("zone", sorted(PG_ZONES))
def test_zone_names_as_postgres(utc, zone):
    got = utc.rows("SELECT (timestamptz '2020-01-15 12:00+00' AT TIME ZONE $1)::text, "
                   "(timestamptz '2020-07-15 12:00+00' AT TIME ZONE $1)::text", zone)
    assert got == [PG_ZONES[zone]]


def test_both_directions_and_types(utc):
    got = utc.rows(
        "SELECT (timestamp '2020-06-01 12:00' AT TIME ZONE 'UTC')::text, "
        "(timestamp '2020-06-01 12:00' AT TIME ZONE 'America/New_York')::text, "
        "(timestamptz '2020-06-01 12:00+00' AT TIME ZONE 'America/New_York')::text, "
        "(timestamptz '2020-06-01 12:00+00' AT TIME ZONE INTERVAL '+02:00')::text, "
        "(date '2020-06-01' AT TIME ZONE 'Asia/Tokyo')::text, "
        "timezone('Asia/Tokyo', timestamp '2020-06-01 12:00')::text, "
        "('2020-06-01 12:00' AT TIME ZONE 'UTC')::text")
    assert got == [("2020-06-01 12:00:00+00", "2020-06-01 16:00:00+00", "2020-06-01 08:00:00",
                    "2020-06-01 14:00:00", "2020-06-01 09:00:00", "2020-06-01 03:00:00+00",
                    "2020-06-01 12:00:00")]
    # timestamp -> timestamptz (an aware datetime), timestamptz -> timestamp (naive)
    (a, b), = utc.rows("SELECT timestamp '2020-06-01' AT TIME ZONE 'UTC', "
                       "timestamptz '2020-06-01' AT TIME ZONE 'UTC'")
    assert a.tzinfo is not None and b.tzinfo is None
    assert utc.rows("SELECT NULL::timestamp AT TIME ZONE 'UTC', "
                    "timestamp '2020-06-01 12:00' AT TIME ZONE NULL") == [(None, None)]


def test_session_zone_shows_the_result(db):
    db.x("SET timezone = 'Asia/Tokyo'")
    assert db.one("SELECT (timestamp '2020-06-01 12:00' AT TIME ZONE 'UTC')::text") == \
        "2020-06-01 21:00:00+09"


def test_in_a_table(utc):
    utc.x("CREATE TABLE ev (id int, at timestamptz)")
    utc.x("INSERT INTO ev VALUES (1, '2020-03-08 06:30+00'), (2, '2020-03-08 07:30+00')")
    # the New York DST change (02:00 -> 03:00 local) lies between the two
    assert utc.rows("SELECT id, (at AT TIME ZONE 'America/New_York')::text FROM ev "
                    "ORDER BY id") == [(1, "2020-03-08 01:30:00"), (2, "2020-03-08 03:30:00")]


@pytest.mark.parametrize("sql,err,msg", [
    ("SELECT timestamp '2020-06-01 12:00' AT TIME ZONE 'Nowhere/Land'",
     errors.InvalidParameterValue, 'time zone "Nowhere/Land" not recognized'),
    ("SELECT timestamp '2020-06-01 12:00' AT TIME ZONE 'WEST'",
     errors.InvalidParameterValue, 'time zone "WEST" not recognized'),
    ("SELECT timestamp '2020-06-01 12:00' AT TIME ZONE INTERVAL '1 day'",
     errors.InvalidParameterValue, 'interval time zone "1 day" must not include months or days'),
    ("SELECT time '12:00' AT TIME ZONE 'UTC'", errors.NotSupportedError, "time with time zone"),
])
def test_errors(utc, sql, err, msg):
    with pytest.raises(err) as ei:
        utc.x(sql)
    assert msg in str(ei.value)
