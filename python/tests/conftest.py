"""Shared fixtures of the blockscale Python tests."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(20261203)


def heavy_tailed(rng, rows, cols):
    """Normal values with a few outliers, zero blocks and a tiny block: every scale path."""
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[rng.random((rows, cols)) < 0.01] *= 50.0
    if cols >= 32:
        x[0, :32] = 0.0
        x[-1, 16:32] *= 1e-6
    return x
