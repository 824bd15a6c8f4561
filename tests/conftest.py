"""Shared test fixtures and the figures `make test` prints at the end.

The terminal summary has two sections:

* "Số liệu đo trong các test" -- the figures a test registered with the ``report_figure`` fixture
  (e.g. the matmul timing agreement check), so they are visible without ``pytest -s``;
* "Số liệu chính của các notebook" -- for every notebook cell run by nbval in this session whose
  source calls ``save_results(``, the text it printed in *this* run (the headline figures).

Notebook items are not under ``tests/``, so per-item hooks of this conftest are not called for
them; the items are kept from ``pytest_collection_modifyitems`` (a session-wide hook) instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# tests/nb/ (the batch runner's test notebooks) has its own conftest that keeps nbval out of it.
_FIGURES = pytest.StashKey[list]()
_ITEMS = pytest.StashKey[list]()

# Subprocesses started by the tests: TensorFlow quiet, the project's own Jupyter kernel.
QUIET_ENV = {
    'TF_CPP_MIN_LOG_LEVEL': '2',
    'TF_ENABLE_ONEDNN_OPTS': '0',
    'PYTHONHASHSEED': '0',
    'JUPYTER_PATH': str(ROOT / '.venv' / 'share' / 'jupyter'),
}


@pytest.fixture(scope='session')
def quiet_env() -> dict[str, str]:
    """The environment `make test` gives its processes (see the Makefile's exports)."""
    env = dict(os.environ)
    env.update(QUIET_ENV)
    if not Path(env['JUPYTER_PATH']).is_dir():  # a venv elsewhere: use this interpreter's prefix
        env['JUPYTER_PATH'] = str(Path(sys.prefix) / 'share' / 'jupyter')
    return env


def pytest_configure(config: pytest.Config) -> None:
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
        if not isinstance(item, IPyNbCell) or 'save_results(' not in item.cell.source:
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
