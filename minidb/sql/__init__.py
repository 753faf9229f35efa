"""minidb's SQL layer: parser, binder, planner, EXPLAIN and the engine (see README.md)."""

from minidb.sql.engine import Engine, Prepared, Result

__all__ = ["Engine", "Prepared", "Result"]
