"""The write-ahead log: record format, WAL buffers in the shared segment, insert and flush,
the reader, the control file, and the tools that show them (waldump, controldata; see
README.md).  Imports only errors, config, types, fileio
and shmem; the redo routines live with what they redo and the recovery driver in
``minidb.recovery``."""
