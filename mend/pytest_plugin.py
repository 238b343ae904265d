"""The pytest plugin of mend (entry point ``pytest11``: ``mend = "mend.pytest_plugin"``).

Options: ``--mend-baseline PATH`` (ini ``mend_baseline``, relative to the rootdir): the
baseline the ``mend_baseline`` fixture returns; ``--mend-update-baseline``: add the sites
found to that baseline instead of failing. Use::

    def test_no_new_breaks(mend_baseline):
        mend.testing.assert_no_new_graph_breaks(Model(), x, baseline=mend_baseline)

Nothing is imported from torch until a test calls the helper.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from mend.testing import UPDATE_ENV


def pytest_addoption(parser) -> None:
    group = parser.getgroup("mend", "graph breaks (mend)")
    group.addoption("--mend-baseline", default=None, help="baseline file for mend_baseline (mend scan --baseline)")
    group.addoption("--mend-update-baseline", action="store_true",
                    help="add the graph break sites the tests find to the baseline instead of failing")
    parser.addini("mend_baseline", "baseline file for the mend_baseline fixture, relative to the rootdir", default="")


def pytest_configure(config) -> None:
    if config.getoption("--mend-update-baseline"):
        os.environ[UPDATE_ENV] = "1"


@pytest.fixture
def mend_baseline(request) -> Path | None:
    """The baseline file given by ``--mend-baseline`` or the ``mend_baseline`` ini option
    (None when neither is set: every graph break is new)."""
    value = request.config.getoption("--mend-baseline") or request.config.getini("mend_baseline")
    if not value:
        return None
    path = Path(value)
    return path if path.is_absolute() else Path(request.config.rootpath) / path
