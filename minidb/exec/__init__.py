"""minidb's vectorized executor: expressions compiled to numpy, plan nodes (see README.md)."""
