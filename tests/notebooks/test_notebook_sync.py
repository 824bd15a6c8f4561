"""One source of truth: a notebook that defines a helper defines it exactly as the package does.

``notebooks/use-gpu.ipynb`` defines ``cpu``, ``gpu``, ``num_gpus``, ``try_gpu`` and ``try_all_gpus``
in its own cells, the way d2l does, and ``d2lhelpers/devices.py`` exports the same functions. Every
function defined in the notebook's code cells must exist in the module and be identical to it:
same ``ast.dump`` of the ``FunctionDef`` (signature, annotations, docstring and body; layout and
comments do not count). Like nbdev's "Notebooks and library are not in sync", the failure names
each function that drifted.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# notebook -> (package module it mirrors, functions it must define)
SYNCED = {
    'notebooks/use-gpu.ipynb': (
        'd2lhelpers/devices.py',
        {'cpu', 'gpu', 'num_gpus', 'try_gpu', 'try_all_gpus'},
    ),
}

_MAGIC = re.compile(r'^(\s*)[%!].*$', re.MULTILINE)


def code_cells(notebook: Path) -> list[str]:
    """The source of each code cell, IPython magics (``%pip``, ``!ls``) replaced by ``pass``."""
    nb = json.loads(notebook.read_text(encoding='utf-8'))
    sources = []
    for cell in nb['cells']:
        if cell['cell_type'] == 'code':
            src = cell['source']
            src = ''.join(src) if isinstance(src, list) else src
            sources.append(_MAGIC.sub(r'\1pass', src))
    return sources


def top_level_functions(source: str) -> dict[str, ast.FunctionDef]:
    return {
        node.name: node
        for node in ast.parse(source).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def notebook_functions(notebook: Path) -> list[ast.FunctionDef]:
    """Every function defined at the top level of a code cell, in order (redefinitions too)."""
    found = []
    for i, src in enumerate(code_cells(notebook)):
        try:
            found += top_level_functions(src).values()
        except SyntaxError as err:
            raise AssertionError(f'{notebook.name}: code cell {i} does not parse: {err}') from None
    return found


def drift(notebook: Path, module: Path) -> list[str]:
    """One message per notebook function that is missing from ``module`` or differs from it."""
    package = top_level_functions(module.read_text(encoding='utf-8'))
    problems = []
    for fn in notebook_functions(notebook):
        if fn.name not in package:
            problems.append(f'{fn.name}: defined in {notebook.name} but not in {module.name}')
        elif ast.dump(fn) != ast.dump(package[fn.name]):
            problems.append(
                f'{fn.name}: the definition in {notebook.name} differs from '
                f'{module.name}\n--- notebook:\n{textwrap.indent(ast.unparse(fn), "    ")}'
                f'\n--- package:\n{textwrap.indent(ast.unparse(package[fn.name]), "    ")}'
            )
    return problems


@pytest.mark.parametrize('notebook', sorted(SYNCED))
def test_notebook_defines_the_helpers(notebook):
    _, expected = SYNCED[notebook]
    defined = {fn.name for fn in notebook_functions(ROOT / notebook)}
    missing = sorted(expected - defined)
    assert not missing, f'{notebook} no longer defines {", ".join(missing)}'


@pytest.mark.parametrize('notebook', sorted(SYNCED))
def test_notebook_and_package_in_sync(notebook):
    module, _ = SYNCED[notebook]
    problems = drift(ROOT / notebook, ROOT / module)
    assert not problems, 'notebook and package are not in sync:\n' + '\n'.join(problems)


def _altered_copy(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of use-gpu.ipynb with ``old`` replaced by ``new`` in exactly one code cell."""
    src = ROOT / 'notebooks' / 'use-gpu.ipynb'
    nb = json.loads(src.read_text(encoding='utf-8'))
    hits = 0
    for cell in nb['cells']:
        text = ''.join(cell['source']) if isinstance(cell['source'], list) else cell['source']
        if cell['cell_type'] == 'code' and old in text:
            cell['source'] = text.replace(old, new)
            hits += 1
    assert hits == 1, f'{old!r} should occur in exactly one code cell of {src.name}, found {hits}'
    path = tmp_path / 'use-gpu.ipynb'
    path.write_text(json.dumps(nb, ensure_ascii=False), encoding='utf-8')
    return path


@pytest.mark.parametrize(
    'old, new, culprit',
    [
        # the body: an off-by-one in the fallback test
        (
            "if check_int('i', i, 0) < num_gpus():",
            "if check_int('i', i, 0) <= num_gpus():",
            'try_gpu',
        ),
        # the docstring only
        ('"""The CPU: ``/CPU:0``."""', '"""The CPU."""', 'cpu'),
        # a default argument
        ('def gpu(i: int = 0)', 'def gpu(i: int = 1)', 'gpu'),
        # a helper that exists only in the notebook
        ('def num_gpus() -> int:', 'def count_gpus() -> int:', 'count_gpus'),
    ],
)
def test_check_fails_on_altered_copy(tmp_path, old, new, culprit):
    module = ROOT / SYNCED['notebooks/use-gpu.ipynb'][0]
    problems = drift(_altered_copy(tmp_path, old, new), module)
    assert len(problems) == 1 and problems[0].startswith(f'{culprit}: '), problems


def test_layout_and_comments_do_not_count(tmp_path):
    module = ROOT / SYNCED['notebooks/use-gpu.ipynb'][0]
    copy = _altered_copy(
        tmp_path,
        '    return [gpu(i) for i in range(num_gpus())] or [cpu()]',
        '    # every GPU, else the CPU\n'
        '    return [gpu(i)   for i in range(num_gpus())]   or [cpu()]',
    )
    assert drift(copy, module) == []
