"""Parallel workers: the process pool and its channels (see README.md).  What a worker runs
is a task function its leader sends (``WorkerPool.send_task``)."""
