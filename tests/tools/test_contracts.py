"""The contract between the live notebooks and the tools, read from the notebooks' save cells
(tests/savecells.py, no kernel, no TensorFlow): what ``gpucheck.check`` requires, what the
committed CPU reference run holds and what the GPU fixtures of the gpucheck tests hold are what
the notebooks save now."""

from __future__ import annotations

import gpufixtures
import pytest
import savecells
from gpucheck import check
from runfixtures import CPU_RUN

from d2lhelpers.reference import load_run

RECORD_AGAIN = (
    'make run (máy CI 2 lõi), rồi cp build/summary.json tests/fixtures/batch-cpu/ và '
    f'PYTHONPATH=tools .venv/bin/python -m gpucheck.record build --id {CPU_RUN} --force'
)


def contract_problems(saved: dict[str, set[str]]) -> list[str]:
    """Every way ``saved`` (notebook -> keys its save cell saves) breaks the contract."""
    problems = []
    for name, keys in check.REQUIRED.items():
        missing = sorted(set(keys) - saved.get(name, set()))
        problems += [f'{name}: không lưu khóa {k!r} mà gpucheck.check cần' for k in missing]
    recorded = load_run(CPU_RUN)['notebooks']
    for name, keys in saved.items():
        cpu = set(recorded.get(name, {}).get('results', {}))
        if keys != cpu:
            problems.append(
                f'{name}: lần chạy CPU {CPU_RUN} có các khóa {sorted(cpu ^ keys)} khác ô lưu; '
                f'ghi lại: {RECORD_AGAIN}'
            )
    return problems


def test_the_notebooks_save_what_the_tools_read():
    saved = savecells.notebook_keys()
    assert set(saved) == set(check.REQUIRED)
    problems = contract_problems(saved)
    assert not problems, '\n'.join(problems)
    for run in (gpufixtures.build_run(), gpufixtures.build_run(gpu=None)):
        built = {name: set(nb['results']) for name, nb in run['notebooks'].items()}
        assert built == saved


def test_a_required_key_dropped_from_a_save_cell_is_named():
    path = savecells.ROOT / 'exercises' / '04-two-gpu-matmul.ipynb'
    source = savecells.save_cell(path)
    assert "results['sums_equal'] = sums_equal\n" in source
    dropped = source.replace("results['sums_equal'] = sums_equal\n", '')
    saved = savecells.notebook_keys() | {check.EX4: savecells.saved_keys(dropped)}
    problems = contract_problems(saved)
    assert problems[0] == f"{check.EX4}: không lưu khóa 'sums_equal' mà gpucheck.check cần"
    assert 'sums_equal' in problems[1] and 'gpucheck.record' in problems[1]


@pytest.mark.parametrize(
    'source',
    [
        "results = {}\nif x:\n    results['a'] = 1\n_ = save_results(results, p)",
        'results = {**other}\n_ = save_results(results, p)',
        'results = {}\nresults[k] = 1\n_ = save_results(results, p)',
        'results = {}\nresults.update(a=1)\n_ = save_results(results, p)',
        'results = make()\n_ = save_results(results, p)',
        'results = {}\nprint(results)',
    ],
    ids=['branch', 'spread', 'computed-key', 'update', 'call', 'no-save'],
)
def test_a_save_cell_the_reader_cannot_read_is_refused(source):
    with pytest.raises(savecells.SaveCellError):
        savecells.saved_keys(source)
