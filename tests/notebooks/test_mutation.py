"""The notebook check can fail: one changed character in a stored output makes nbval fail.

A committed notebook (``notebooks/use-gpu.ipynb``, else the first that has such a cell) is
copied, truncated after its first code cell whose stored output is deterministic text (neither
ignored nor skipped, nothing that tests/sanitize.cfg masks), and checked by ``pytest --nbval``
exactly as ``make test`` does (same sanitize file, same kernel, same environment): the unaltered
copy must pass, and the copy whose output differs by one character must fail on that cell and
only there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbtools import NOTEBOOKS, ROOT, SANITIZE_CFG, nbval_options, sanitize

PREFERRED = 'notebooks/use-gpu.ipynb'


def compared_text(cell):
    """(output, key) of the first text output nbval compares exactly, or None."""
    options = nbval_options(cell)
    if options.get('skip') or options.get('check') is False or options.get('check_exception'):
        return None
    for out in cell.outputs:
        if out.output_type == 'stream' and out.name == 'stdout':
            key = 'text'
        elif out.output_type == 'execute_result' and 'text/plain' in out.get('data', {}):
            key = 'text/plain'
        else:
            continue
        text = out.text if key == 'text' else out.data['text/plain']
        if re.search(r'[0-9A-Za-z]', text) and sanitize(text) == text:
            return out, key
    return None


def pick(nb):
    """Index (in nb.cells) and code-cell number of the first cell worth mutating, or None."""
    code_number = -1
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != 'code':
            continue
        code_number += 1
        if cell.execution_count is None:  # not run: nbval compares nothing from here on
            return None
        if compared_text(cell):
            return index, code_number
    return None


def mutate(text: str) -> str:
    """``text`` with its last letter or digit changed to another one."""
    i = max(m.start() for m in re.finditer(r'[0-9A-Za-z]', text))
    c = text[i]
    new = (
        str((int(c) + 1) % 10)
        if c.isdigit()
        else ('b' if c.lower() == 'a' else 'a').upper()
        if c.isupper()
        else 'b'
        if c == 'a'
        else 'a'
    )
    return text[:i] + new + text[i + 1 :]


def source_notebook():
    """(name, notebook): the preferred committed notebook, else the first one with such a cell."""
    for name in sorted(NOTEBOOKS, key=lambda p: p != PREFERRED):
        nb = nbformat.read(ROOT / name, as_version=4)
        if pick(nb):
            return name, nb
    raise AssertionError('no committed notebook has a compared text output to alter')


def nbval_command(notebook: Path) -> list[str]:
    """`make test`'s nbval options (see the Makefile) on one notebook."""
    return [
        sys.executable,
        '-m',
        'pytest',
        str(notebook),
        '--nbval',
        '--nbval-sanitize-with',
        str(SANITIZE_CFG),
        '--nbval-cell-timeout',
        '600',
        '-p',
        'no:cacheprovider',
        '-q',
        '-rfE',
        '--color=no',
    ]


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    name, nb = source_notebook()
    index, code_number = pick(nb)
    nb.cells = nb.cells[: index + 1]
    out, key = compared_text(nb.cells[index])
    before = out.text if key == 'text' else out.data[key]
    after = mutate(before)
    assert sanitize(after) != sanitize(before)  # the change is not masked away

    procs = {}
    for kind in ('original', 'altered'):
        folder = tmp_path_factory.mktemp(kind)
        (folder / 'pytest.ini').write_text('[pytest]\n', encoding='utf-8')  # rootdir, no addopts
        copy = nbformat.from_dict(nb)
        if kind == 'altered':
            target = copy.cells[index].outputs[nb.cells[index].outputs.index(out)]
            if key == 'text':
                target.text = after
            else:
                target.data[key] = after
        path = folder / Path(name).name
        nbformat.write(copy, path)
        # Both run at once (each starts its own kernel and imports TensorFlow).
        # GPUs hidden: the stored outputs come from a CPU-only run, on any machine.
        env = {**os.environ, 'CUDA_VISIBLE_DEVICES': '-1'}
        procs[kind] = subprocess.Popen(
            nbval_command(path),
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    results = {}
    for kind, proc in procs.items():
        try:
            output, _ = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        results[kind] = (proc.returncode, output)
    return {'name': name, 'code_number': code_number, 'before': before, 'after': after, **results}


def test_nbval_passes_the_unaltered_copy(runs):
    code, output = runs['original']
    assert code == 0 and ' passed' in output and 'failed' not in output, output[-3000:]


def test_nbval_fails_the_altered_copy_on_that_cell(runs):
    code, output = runs['altered']
    failed = re.findall(r'^FAILED \S+::Cell (\d+)', output, flags=re.MULTILINE)
    assert code == 1 and failed == [str(runs['code_number'])], (
        f'{runs["name"]}: stored {runs["before"]!r} changed to {runs["after"]!r} in code cell '
        f'{runs["code_number"]}, yet nbval did not fail there alone:\n{output[-3000:]}'
    )
    assert 'Cell outputs differ' in output
