"""What the batch runner and the notebook tests need to know about a notebook (TensorFlow-free).

- ``declared_parameters(nb)``: the parameters papermill reads in the ``parameters`` cell (names and
  default values);
- ``canonical(nb)``: the committed form (no papermill/timing metadata, execution counts 1..N);
- ``refreshed(source, executed)``: the committed notebook with the outputs of a run, in that form;
- ``write_notebook(nb, path)``: ``nb`` written with ``nbrun.atomic.atomic_write``;
- ``one_line(text)``: the first line of a message, for summaries.
"""

from __future__ import annotations

import ast
import copy
import os
import re
from pathlib import Path
from typing import Any

import nbformat
from papermill.translators import PythonTranslator

from nbrun.atomic import atomic_write

__all__ = [
    'declared_parameters',
    'added_by_papermill',
    'canonical',
    'refreshed',
    'write_notebook',
    'one_line',
]

# Cell metadata that papermill/nbclient/JupyterLab add and that changes on every run.
_VOLATILE_CELL_META = ('execution', 'papermill', 'collapsed', 'scrolled', 'ExecuteTime')
# Cells that papermill inserts: the injected parameters, and the error banners of a failed run.
_PAPERMILL_TAGS = ('injected-parameters', 'papermill-error-cell-tag')


def tags(cell: nbformat.NotebookNode) -> list[str]:
    """The cell's tags (``metadata.tags``), a new list."""
    return list(cell.get('metadata', {}).get('tags', []))


def _parameters_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    return next((c for c in nb.cells if c.cell_type == 'code' and 'parameters' in tags(c)), None)


def declared_parameters(nb: nbformat.NotebookNode) -> dict[str, Any]:
    """Names and defaults of the first cell tagged ``parameters``, as papermill reads them.

    The same reading as ``papermill --help-notebook`` and ``papermill.inspect_notebook``
    (``PythonTranslator.inspect``); a default that is a literal is given as its value
    (``results_path = None`` gives ``None``), any other as its source text.
    """
    cell = _parameters_cell(nb)
    if cell is None:
        return {}
    params = {}
    for p in PythonTranslator.inspect(cell):
        try:
            params[p.name] = ast.literal_eval(p.default)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            params[p.name] = p.default
    return params


def added_by_papermill(cell: nbformat.NotebookNode) -> bool:
    """True for the injected-parameters cell and the error banners papermill inserts."""
    return any(t in tags(cell) for t in _PAPERMILL_TAGS)


def canonical(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The committed form of ``nb`` (a new notebook; ``nb`` is left as it is).

    No papermill or timing metadata at notebook, cell or output level, no cells inserted by
    papermill, ``language_info`` reduced to its name, execution counts 1..N over the code cells
    that ran (in order). The kernelspec and every other metadata are kept. Idempotent.
    """
    nb = nbformat.from_dict(copy.deepcopy(nb))
    nb.metadata.pop('papermill', None)
    nb.metadata.pop('widgets', None)
    if 'language_info' in nb.metadata:
        nb.metadata.language_info = {'name': nb.metadata.language_info.get('name', 'python')}
    nb.cells = [c for c in nb.cells if not added_by_papermill(c)]
    count = 0
    for cell in nb.cells:
        for key in _VOLATILE_CELL_META:
            cell.metadata.pop(key, None)
        if cell.cell_type == 'code':
            if cell.get('execution_count') is not None:
                count += 1
                cell.execution_count = count
            for out in cell.outputs:
                if 'execution_count' in out and out.execution_count is not None:
                    out.execution_count = cell.execution_count
                meta = out.get('metadata')
                if meta is not None:
                    meta.pop('execution', None)
    return nb


def refreshed(
    source: nbformat.NotebookNode, executed: nbformat.NotebookNode
) -> nbformat.NotebookNode:
    """The committed notebook ``source`` with the outputs of the run ``executed``, canonical.

    Sources, cell ids, tags and notebook metadata all come from ``source``, so a refresh changes
    nothing but outputs and execution counts. Raises ``ValueError`` if the cells do not match.
    """
    ran = [c for c in executed.cells if not added_by_papermill(c)]
    if len(ran) != len(source.cells) or any(
        a.cell_type != b.cell_type or a.source != b.source
        for a, b in zip(source.cells, ran, strict=True)
    ):
        raise ValueError('the executed notebook does not have the cells of its source')
    nb = copy.deepcopy(source)
    for cell, done in zip(nb.cells, ran, strict=True):
        if cell.cell_type == 'code':
            cell.outputs = copy.deepcopy(done.outputs)
            cell.execution_count = done.execution_count
    return canonical(nb)


def write_notebook(nb: nbformat.NotebookNode, path: str | os.PathLike) -> Path:
    """Write ``nb`` to ``path`` atomically (``atomic_write``), ending with a newline."""
    text = nbformat.writes(nb)
    return atomic_write(path, text if text.endswith('\n') else text + '\n')


def one_line(text: object, limit: int = 300) -> str:
    """The first non-empty line of ``text``, without ANSI colours, at most ``limit`` characters."""
    text = re.sub(r'\x1b\[[0-9;]*m', '', str(text))
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), '')
    return line if len(line) <= limit else line[: limit - 1] + '…'
