"""Shared test fixtures and the figures `make test` prints at the end.

The terminal summary has two sections:

* "Số liệu đo trong các test" -- the figures a test registered with the ``report_figure`` fixture
  (e.g. the matmul timing agreement check), so they are visible without ``pytest -s``;
* "Số liệu chính của các notebook" -- for every notebook cell run by nbval in this session that is
  tagged ``report-headline``, the text it printed in *this* run (the headline figures).

Both work with ``pytest -n`` (pytest-xdist): see ``_Figures``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The maintainer tools (tools/nbrun, tools/gpucheck) are not installed: the Makefile puts tools/ on
# PYTHONPATH (the one place), for the tests and every process they start. pytest puts tests/ on
# sys.path (this file's folder), so every test module imports tests/runfixtures.py.
from nbrun.kernel import QUIET_ENV

# The tests, their subprocesses and nbval's kernels run in the notebooks' environment (one
# definition: nbrun.kernel.QUIET_ENV), with the project's own Jupyter kernel.
os.environ.update(QUIET_ENV)
_KERNELS = Path(sys.prefix) / 'share' / 'jupyter'  # where `make` installed the kernelspec
os.environ['JUPYTER_PATH'] = os.pathsep.join(
    [str(_KERNELS), *filter(None, os.environ.get('JUPYTER_PATH', '').split(os.pathsep))]
)


_SECTIONS = {
    'test-figure': 'Số liệu đo trong các test',
    'notebook-headline': 'Số liệu chính của các notebook (lần chạy này)',
}


class _Figures:
    """Collects the figures to print, also from pytest-xdist workers.

    A worker attaches them to the test report as ``user_properties`` (sent to the controlling
    process with the report); ``pytest_runtest_logreport`` collects them where the terminal
    summary is written. Registered as a plugin, its hooks see every item, notebooks included
    (they are not under ``tests/``, so this conftest's own per-item hooks would not).
    """

    def __init__(self) -> None:
        self.entries: dict[str, list[tuple[str, str]]] = {key: [] for key in _SECTIONS}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        report = yield
        text = _headline(item) if call.when == 'call' else ''
        if text:
            report.user_properties.append(('notebook-headline', text))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != 'call':  # the teardown report carries the same properties again
            return
        for key, value in report.user_properties:
            if key in self.entries:
                name = report.nodeid if key == 'test-figure' else _cell_name(report.nodeid)
                self.entries[key].append((name, str(value)))


def _headline(item: pytest.Item) -> str:
    """The text a notebook cell tagged ``report-headline`` printed in this run, else ''."""
    cell = getattr(item, 'cell', None)
    if cell is None or 'report-headline' not in cell.get('metadata', {}).get('tags', []):
        return ''
    outputs = getattr(item, 'test_outputs', None) or []
    text = ''.join(o.get('text', '') for o in outputs if o.get('output_type') == 'stream')
    return text.rstrip()


def _cell_name(nodeid: str) -> str:
    path, _, cell = nodeid.partition('::')
    return f'{path} ({cell})'


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        'markers', 'timing: a measurement, not a gate (make bench runs it; make test does not)'
    )
    config.pluginmanager.register(_Figures(), 'd2l-figures')


@pytest.fixture
def report_figure(request: pytest.FixtureRequest):
    """``report_figure(text)``: print ``text`` in the terminal summary under this test's name."""

    def record(text: str) -> None:
        request.node.user_properties.append(('test-figure', str(text)))

    return record


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    figures = config.pluginmanager.get_plugin('d2l-figures')
    for key, title in _SECTIONS.items():
        entries = figures.entries[key] if figures else []
        if entries:
            terminalreporter.section(title)
        for name, text in entries:
            terminalreporter.write_line(f'{name}:')
            for line in text.splitlines():
                terminalreporter.write_line(f'    {line}')
