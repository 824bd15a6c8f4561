"""Shared test fixtures and the figures `make test` prints at the end.

The terminal summary has two sections:

* "Số liệu đo trong các test" -- the figures a test registered with the ``report_figure`` fixture
  (e.g. the matmul timing agreement check), so they are visible without ``pytest -s``;
* "Số liệu chính của các notebook" -- for every notebook cell run by nbval in this session that is
  tagged ``report-headline``, the text it printed in *this* run (the headline figures).

Notebook items are not under ``tests/``, so per-item hooks of this conftest are not called for
them; the items are kept from ``pytest_collection_modifyitems`` (a session-wide hook) instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from d2lhelpers.kernel import QUIET_ENV

ROOT = Path(__file__).resolve().parent.parent

# tests/nb/ (the batch runner's test notebooks) has its own conftest that keeps nbval out of it.
_FIGURES = pytest.StashKey[list]()
_ITEMS = pytest.StashKey[list]()

# The tests, their subprocesses and nbval's kernels run in the notebooks' environment (one
# definition: d2lhelpers.kernel.QUIET_ENV), with the project's own Jupyter kernel.
os.environ.update(QUIET_ENV)
_KERNELS = Path(sys.prefix) / 'share' / 'jupyter'  # where `make` installed the kernelspec
os.environ['JUPYTER_PATH'] = os.pathsep.join(
    [str(_KERNELS), *filter(None, os.environ.get('JUPYTER_PATH', '').split(os.pathsep))]
)


@pytest.fixture(scope='session')
def quiet_env() -> dict[str, str]:
    """The environment the tests give their subprocesses (set above for this process too)."""
    return dict(os.environ)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        'markers', 'timing: a measurement, not a gate (make bench runs it; make test does not)'
    )
    config.stash[_FIGURES] = []
    config.stash[_ITEMS] = []


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    config.stash[_ITEMS] = list(items)


@pytest.fixture
def report_figure(request: pytest.FixtureRequest):
    """``report_figure(text)``: print ``text`` in the terminal summary under this test's name."""

    def record(text: str) -> None:
        request.config.stash[_FIGURES].append((request.node.nodeid, str(text)))

    return record


def _notebook_figures(items: list[pytest.Item]) -> list[tuple[str, str]]:
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:  # nbval not installed: no notebook items either
        return []
    found = []
    for item in items:
        tags = item.cell.get('metadata', {}).get('tags', []) if isinstance(item, IPyNbCell) else []
        if 'report-headline' not in tags:
            continue
        if not item.test_outputs:  # not run (skipped, deselected, or failed before running)
            continue
        text = ''.join(
            out.get('text', '') for out in item.test_outputs if out.get('output_type') == 'stream'
        )
        if text.strip():
            try:
                name = str(Path(item.path).resolve().relative_to(ROOT))
            except ValueError:
                name = str(item.path)
            found.append((f'{name} (ô code {item.cell_num})', text.rstrip()))
    return found


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    sections = [
        ('Số liệu đo trong các test', config.stash.get(_FIGURES, [])),
        (
            'Số liệu chính của các notebook (lần chạy này)',
            _notebook_figures(config.stash.get(_ITEMS, [])),
        ),
    ]
    for title, entries in sections:
        if entries:
            terminalreporter.section(title)
        for name, text in entries:
            terminalreporter.write_line(f'{name}:')
            for line in text.splitlines():
                terminalreporter.write_line(f'    {line}')
