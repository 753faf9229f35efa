"""PostgreSQL's frontend/backend protocol 3.0, the pieces both ends need: the server
(``minidb.server``, one layer up) and the client minidb's own tools use on a served data
directory (``minidb.dbapi``'s remote connection, the REPL, ``minidb bench -h``).

* ``protocol`` - message framing, the message table, body readers and builders, limits;
* ``pgtypes`` - type OIDs and the text / binary forms of values, both directions;
* ``scram`` - SCRAM-SHA-256, the server's and the client's side;
* ``client`` - ``PGClient``, a blocking client: start-up and authentication, simple and
  extended queries, COPY, errors as ``minidb.errors`` classes, cancel.

It needs only ``errors``, ``config`` and ``types``, so it sits right above them.  The package
README describes the client and its departures from libpq.
"""
