"""Shared fixtures: every test that takes ``backend_name`` runs once per available backend --
NumPy always, CuPy when it is installed and a GPU is present (skipped otherwise)."""
import sys

import pytest

from minitf import backend

BACKEND_PARAMS = [
    "numpy",
    pytest.param("cupy", marks=pytest.mark.skipif(not backend.cupy_available(),
                                                  reason="CuPy with a GPU is not available")),
]


@pytest.fixture(params=BACKEND_PARAMS)
def backend_name(request):
    """Activate each backend in turn, with a fixed seed, for the duration of one test; torch's
    generator too where a test has imported it (a parity test's torch layers draw its weights),
    so that a failure comes back on the next run."""
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(0)
    with backend.use(request.param), backend.seed(0):
        yield request.param


@pytest.fixture
def float64(backend_name):
    """Each backend, in float64."""
    with backend.precision("float64"):
        yield backend_name
