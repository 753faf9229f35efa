"""Fixtures shared by the heap tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def inst(instance):
    """The suite's small ``instance`` (64 buffers) under the name the heap tests use; a
    module may define its own ``inst``."""
    return instance
