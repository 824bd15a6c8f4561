"""Each notebook opens on Colab and on Kaggle, and its install cell works on either.

The install cell (skipped by nbval) is run here through IPython's own transformer with each
environment's marker faked ('google.colab' imported; ``KAGGLE_KERNEL_RUN_TYPE`` set) and the
published URL replaced by this checkout: it asks pip for the package, which needs NumPy alone and
imports without TensorFlow. Without a marker (a laptop, CI) it does nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest
from IPython.core.inputtransformer2 import TransformerManager
from nbtools import NOTEBOOKS, ROOT, code_cells, load

URL = 'git+https://github.com/d2l-vi/d2l-tf-gpu'
REPO = 'https://github.com/d2l-vi/d2l-tf-gpu/blob/main/'


def install_cell(path: str) -> str:
    cells = [c.source for c in code_cells(load(path)) if URL in c.source]
    assert len(cells) == 1, f'{path}: one install cell naming {URL}'
    return cells[0]


@pytest.mark.parametrize('path', NOTEBOOKS)
def test_colab_and_kaggle_badges_open_this_notebook(path):
    title = load(path).cells[0].source
    colab = f'(https://colab.research.google.com/github/d2l-vi/d2l-tf-gpu/blob/main/{path})'
    kaggle = f'(https://kaggle.com/kernels/welcome?src={REPO}{path})'
    assert f'colab-badge.svg)]{colab}' in title and f'open-in-kaggle.svg)]{kaggle}' in title


def run_install_cell(source: str, monkeypatch, *, colab: bool, kaggle: bool) -> list[str]:
    """Execute the cell as IPython would, with the markers faked; return the ``%pip`` lines it
    asked for (they are recorded, not run)."""
    asked: list[str] = []
    shell = types.SimpleNamespace(run_line_magic=lambda name, line: asked.append(f'{name} {line}'))
    with monkeypatch.context() as m:
        if colab:
            m.setitem(sys.modules, 'google.colab', types.ModuleType('google.colab'))
        else:
            m.delitem(sys.modules, 'google.colab', raising=False)
        if kaggle:
            m.setenv('KAGGLE_KERNEL_RUN_TYPE', 'Interactive')
        else:
            m.delenv('KAGGLE_KERNEL_RUN_TYPE', raising=False)
        code = TransformerManager().transform_cell(source)
        exec(compile(code, 'install cell', 'exec'), {'get_ipython': lambda: shell})
    return asked


@pytest.mark.parametrize('path', NOTEBOOKS)
def test_the_install_cell_runs_only_on_colab_or_kaggle(path, monkeypatch):
    source = install_cell(path)
    pip = [f'pip install -q "{URL}"']
    assert run_install_cell(source, monkeypatch, colab=False, kaggle=False) == []
    assert run_install_cell(source, monkeypatch, colab=True, kaggle=False) == pip
    assert run_install_cell(source, monkeypatch, colab=False, kaggle=True) == pip


def test_what_the_install_cell_installs_needs_numpy_alone_and_imports(tmp_path):
    """pip, asked for this checkout as the cell asks for the published URL: the report lists
    d2lhelpers and NumPy only; installed without dependencies, it imports with no TensorFlow."""
    report = tmp_path / 'report.json'
    pip = [sys.executable, '-m', 'pip', 'install', '-q', '--disable-pip-version-check']
    subprocess.run(
        [*pip, '--dry-run', '--ignore-installed', '--report', str(report), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    names = sorted(i['metadata']['name'].lower() for i in json.loads(report.read_text())['install'])
    assert names == ['d2lhelpers', 'numpy']
    target = tmp_path / 'site'
    subprocess.run(
        [*pip, '--no-deps', '--target', str(target), str(ROOT)], check=True, capture_output=True
    )
    code = (
        'import sys; import d2lhelpers; '
        'assert d2lhelpers.__file__.startswith(sys.argv[1]), d2lhelpers.__file__; '
        "assert 'tensorflow' not in sys.modules; print(d2lhelpers.__version__)"
    )
    env = {**os.environ, 'PYTHONPATH': str(target)}
    out = subprocess.run(
        [sys.executable, '-c', code, str(target)],
        cwd=tmp_path,  # not the checkout: the copy pip installed
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
