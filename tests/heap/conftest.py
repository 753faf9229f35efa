"""Fixtures shared by the heap tests."""

from __future__ import annotations

import pytest

from minidb.instance import Instance


@pytest.fixture
def inst(tmp_path):
    """A small instance (64 buffers) of its own; a module may define its own ``inst``."""
    i = Instance(tmp_path / "data", shared_buffers=64)
    try:
        yield i
    finally:
        i.close()
