"""The planner: bound statements -> plan trees, chosen by cost (PostgreSQL's optimizer,
small).  ``Planner(catalog, settings, smgr).plan(bound)`` returns a ``Plan``.

=============  ===========================================================================
module         what
=============  ===========================================================================
core.py        ``Planner``, ``Plan``: statements, and the SELECT above its FROM list
               (aggregate, DISTINCT, sort, limit, FOR UPDATE, projection)
scan.py        base relations and their access paths: Seq Scan, Index Scan
joins.py       the FROM list: clauses sorted per relation, join search, join paths
parallel.py    ``compute_parallel_workers`` and the parallel aggregate plan
costs.py       cost formulas (index scan, Mackert-Lohman), disable_cost, width estimates
=============  ===========================================================================

The planner reads its settings from the settings object it is given, as it goes; each
one is marked ``plan=True`` in ``minidb.config``, which makes it part of the plan cache's
key.  ``trace_planner`` prints every path costed and the winner to stderr.
"""

from minidb.sql.planner.core import Plan, Planner
from minidb.sql.planner.costs import DISABLE_COST
from minidb.sql.planner.parallel import compute_parallel_workers

__all__ = ["Planner", "Plan", "DISABLE_COST", "compute_parallel_workers"]
