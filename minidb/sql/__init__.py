"""minidb's SQL layer: parser, binder, planner, EXPLAIN and the engine (see README.md)."""

from minidb.sql.engine import Engine, Prepared
from minidb.sql.result import Result

__all__ = ["Engine", "Prepared", "Result"]
