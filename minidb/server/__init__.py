"""minidb as a server: PostgreSQL's frontend/backend protocol 3.0, so psql, pgbench and
psycopg connect (``minidb serve DATADIR``).

* ``minidb.pgwire`` (a lower layer) - message framing, type OIDs and value forms, SCRAM;
* ``backend`` - one connection's protocol loop over a session and its SQL engine;
* ``postmaster`` - listen on the unix socket (and TCP when asked), fork a backend per
  connection, answer cancel requests, shut down smart / fast / immediate.

The package README describes the design and its departures from PostgreSQL.
"""

from minidb.server.postmaster import serve, socket_path, stop_server

__all__ = ["serve", "stop_server", "socket_path"]
