"""Fixtures shared by the learners' tests."""

from __future__ import annotations

import pytest

from pmap_sklearn.datasets import make_chain_data


@pytest.fixture(scope="module")
def chains():
    data = make_chain_data(n_samples=12, random_state=7)
    return list(data.data), list(data.target)
