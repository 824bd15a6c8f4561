"""The notebooks' reference cells against the stored runs, without TensorFlow.

A reference cell is a code cell that calls ``reference('<notebook>', ..., run='<id>')``: it names
the run it quotes and uses only ``reference``, ``find_spec``, ``format_seconds``,
``host_ratio``, ``Breakdown`` and this run's ``results``. Each is executed here with the results
the CPU reference run recorded for its notebook (what its ``save_results`` cell saved), and must
print what the committed notebook shows (through the nbval
sanitizer). Adding a run to ``d2lhelpers/runs/`` must change none of them.
"""

from __future__ import annotations

import ast
import contextlib
import io
import shutil
import sys

import pytest
from gpucheck import check, record
from nbtools import NOTEBOOKS, code_cells, load, sanitize
from runfixtures import BATCH_CPU, CPU_RUN, GPU_RUN, batch_cpu_summary, demo_run

from d2lhelpers import Breakdown, find_spec, format_seconds, host_ratio, reference
from d2lhelpers.reference import load_run, reference_runs

reference_module = sys.modules['d2lhelpers.reference']


def reference_cells() -> list[tuple[str, int, str, str]]:
    """(notebook, cell index, source, stored text) of every cell that calls reference(...)."""
    out = []
    for path in NOTEBOOKS:
        for i, cell in enumerate(code_cells(load(path))):
            if 'reference(' not in cell.source or 'from d2lhelpers import' in cell.source:
                continue
            text = ''.join(o.get('text', '') for o in cell.outputs if o.output_type == 'stream')
            out.append((path, i, cell.source, text))
    return out


CELLS = reference_cells()
IDS = [f'{path}#{i}' for path, i, _, _ in CELLS]


def calls(source: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and getattr(node.func, 'id', None) == 'reference'
    ]


def run_cell(path: str, source: str) -> str:
    name = path.removesuffix('.ipynb')
    results = load_run(CPU_RUN)['notebooks'][name]['results']
    namespace = {'reference': reference, 'find_spec': find_spec, 'results': results}
    namespace |= {
        'format_seconds': format_seconds,
        'host_ratio': host_ratio,
        'Breakdown': Breakdown,
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, f'{path} (reference cell)', 'exec'), namespace)
    return out.getvalue()


def test_every_notebook_that_quotes_runs_is_here():
    assert {path for path, *_ in CELLS} == set(NOTEBOOKS) - {'notebooks/use-gpu.ipynb'}


@pytest.mark.parametrize(('path', 'i', 'source', 'stored'), CELLS, ids=IDS)
def test_a_reference_cell_names_its_notebook_and_run(path, i, source, stored):
    found = calls(source)
    assert found, source
    for call in found:
        assert ast.literal_eval(call.args[0]) == path.removesuffix('.ipynb')
        run = [k.value for k in call.keywords if k.arg == 'run']
        assert run and isinstance(run[0], ast.Constant), f'{path}#{i}: reference(..., run=ID)'
        assert run[0].value in reference_runs()


@pytest.mark.parametrize(('path', 'i', 'source', 'stored'), CELLS, ids=IDS)
def test_a_reference_cell_prints_what_the_notebook_shows(path, i, source, stored):
    assert sanitize(run_cell(path, source)) == sanitize(stored)


def test_a_new_run_changes_no_reference_cell(tmp_path, monkeypatch):
    before = {(path, i): run_cell(path, source) for path, i, source, _ in CELLS}
    for run_id in reference_runs():
        shutil.copy(reference_module._runs_dir().joinpath(f'{run_id}.json'), tmp_path)
    newer = record.build_run(batch_cpu_summary(), 'cpu9-2099-01-01', smi=[])
    record.write_run(newer, tmp_path)
    record.write_run(demo_run('h100-2099-01-02'), tmp_path)
    monkeypatch.setattr(reference_module, '_runs_dir', lambda: tmp_path)
    assert reference_runs()[-2:] == ['cpu9-2099-01-01', 'h100-2099-01-02']  # newest last
    after = {(path, i): run_cell(path, source) for path, i, source, _ in CELLS}
    assert after == before


def test_rehearsal_record_reference_check_page(tmp_path, monkeypatch):
    """The GPU path on CPU data, in one go: the recorded batch output -> gpucheck.record -> a run
    file -> every notebook's reference cells -> gpucheck.check -> gpucheck.page."""
    from gpucheck import page

    runs = tmp_path / 'runs'
    record.record(BATCH_CPU, CPU_RUN, out=runs, smi=[])
    shutil.copy(reference_module._runs_dir().joinpath(f'{GPU_RUN}.json'), runs)
    monkeypatch.setattr(reference_module, '_runs_dir', lambda: runs)
    for nb_path, _, source, stored in CELLS:
        assert sanitize(run_cell(nb_path, source)) == sanitize(stored)
    run = load_run(CPU_RUN)
    findings = check.check_run(run)
    bad = {f.check for f in check.failed(findings)}
    assert bad == set(check.NO_GPU_CHECKS), check.table(findings)  # rejected: it measured no GPU
    text = page.render(run, plots_to=tmp_path / 'plots')
    assert text.startswith(f'# Số đo của lần chạy {CPU_RUN}: máy không có GPU')
    assert len(list((tmp_path / 'plots').iterdir())) == text.count('](' + CPU_RUN + '/')
