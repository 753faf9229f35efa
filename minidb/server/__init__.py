"""minidb as a server: PostgreSQL's frontend/backend protocol 3.0, so psql, pgbench and
psycopg connect (``minidb serve DATADIR``).

* ``protocol`` - message framing and the message table;
* ``pgtypes`` - type OIDs and the text / binary forms of values;
* ``backend`` - one connection's protocol loop over a session and its SQL engine;
* ``postmaster`` - listen on the unix socket (and TCP when asked), fork a backend per
  connection, answer cancel requests, shut down smart / fast / immediate.

The package README describes the design and its departures from PostgreSQL.
"""

from minidb.server.postmaster import serve, socket_path, stop_server

__all__ = ["serve", "stop_server", "socket_path"]
