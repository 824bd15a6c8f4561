"""TensorFlow for the package's tests, imported by the first test that needs it.

Imported at module level, it would cost every pytest-xdist worker about 4 s while collecting,
also the workers that run no test needing it.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope='session')
def tf():
    import tensorflow

    return tensorflow
