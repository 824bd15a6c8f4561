"""Reading a notebook's declared parameters and writing notebooks in their committed form.

Used by ``python -m d2lhelpers.batch`` and by the tests that check the committed notebooks:

- ``declared_parameters(nb)``: the names (and defaults) of the ``parameters`` cell;
- ``measures_time(nb)``: ``metadata.d2l.measures_time`` (the runner runs such a notebook alone);
- ``for_papermill(nb)``: a copy papermill can run (cells that teach an error get the
  ``raises-exception`` tag that nbclient understands, as nbval understands ``# NBVAL_RAISES_EXCEPTION``);
- ``canonical(nb)``: the committed form (no papermill/timing metadata, execution counts 1..N);
- ``refreshed(source, executed)``: the committed notebook with the outputs of a run, in that form;
- ``write_atomic(nb, path)``: a temporary file and a rename, never half a notebook;
- ``first_error(nb)``: where an executed notebook failed.
"""

from __future__ import annotations

import ast
import copy
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

import nbformat

__all__ = [
    'declared_parameters',
    'measures_time',
    'allows_error',
    'for_papermill',
    'canonical',
    'refreshed',
    'write_atomic',
    'first_error',
    'added_by_papermill',
]

# Cell metadata that papermill/nbclient/JupyterLab add and that changes on every run.
_VOLATILE_CELL_META = ('execution', 'papermill', 'collapsed', 'scrolled', 'ExecuteTime')
# Cells that papermill inserts: the injected parameters, and the error banners of a failed run.
_PAPERMILL_TAGS = ('injected-parameters', 'papermill-error-cell-tag')
_RAISES_TAGS = ('raises-exception', 'nbval-raises-exception')
_RAISES_COMMENT = re.compile(r'^\s*#\s*NBVAL_RAISES_EXCEPTION\b', re.MULTILINE)
_MAGIC = re.compile(r'^\s*[%!]')


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get('metadata', {}).get('tags', []))


def declared_parameters(nb: nbformat.NotebookNode) -> dict[str, Any]:
    """Names and default values assigned in the first cell tagged ``parameters``.

    A default that is not a literal (``results_path = None`` is one; ``n = 2 ** 10`` is not) is
    given as its source text.
    """
    for cell in nb.cells:
        if cell.cell_type == 'code' and 'parameters' in _tags(cell):
            source = '\n'.join(
                '' if _MAGIC.match(line) else line for line in cell.source.splitlines()
            )
            params: dict[str, Any] = {}
            for node in ast.parse(source).body:
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]
                    if isinstance(node, ast.AnnAssign)
                    else []
                )
                for target in targets:
                    if isinstance(target, ast.Name):
                        try:
                            params[target.id] = ast.literal_eval(node.value)
                        except (ValueError, TypeError, SyntaxError):
                            params[target.id] = ast.unparse(node.value) if node.value else None
            return params
    return {}


def measures_time(nb: nbformat.NotebookNode) -> bool:
    """True if the notebook says its figures are timings (``metadata.d2l.measures_time``).

    The batch runner never runs such a notebook beside another one.
    """
    return bool(nb.metadata.get('d2l', {}).get('measures_time', False))


def allows_error(cell: nbformat.NotebookNode) -> bool:
    """True for a cell that teaches an error (``# NBVAL_RAISES_EXCEPTION`` or its tags)."""
    return cell.cell_type == 'code' and (
        any(t in _tags(cell) for t in _RAISES_TAGS) or bool(_RAISES_COMMENT.search(cell.source))
    )


def for_papermill(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy in which every cell that teaches an error carries nbclient's ``raises-exception`` tag."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if allows_error(cell) and 'raises-exception' not in _tags(cell):
            cell.metadata['tags'] = [*_tags(cell), 'raises-exception']
    return nb


def added_by_papermill(cell: nbformat.NotebookNode) -> bool:
    """True for the injected-parameters cell and the error banners papermill inserts."""
    return any(t in _tags(cell) for t in _PAPERMILL_TAGS)


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
        a.cell_type != b.cell_type or a.source != b.source for a, b in zip(source.cells, ran)
    ):
        raise ValueError('the executed notebook does not have the cells of its source')
    nb = copy.deepcopy(source)
    for cell, done in zip(nb.cells, ran):
        if cell.cell_type == 'code':
            cell.outputs = copy.deepcopy(done.outputs)
            cell.execution_count = done.execution_count
    return canonical(nb)


def write_atomic(nb: nbformat.NotebookNode, path: str | os.PathLike) -> None:
    """Write ``nb`` to ``path`` through a temporary file and a rename: never half a notebook.

    An existing file keeps its permission bits.
    """
    path = Path(path)
    text = nbformat.writes(nb)
    if not text.endswith('\n'):
        text += '\n'
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f'.{path.name}.', suffix='.tmp')
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def first_error(nb: nbformat.NotebookNode) -> dict[str, Any] | None:
    """The first unexpected error stored in an executed notebook, or None.

    ``{'cell': index, 'cell_id': id, 'execution_count': n, 'ename': ..., 'evalue': one line}``;
    the index counts the cells of the notebook as committed (cells papermill inserted are skipped),
    and errors of cells that teach an error (``allows_error``) are not counted.
    """
    index = -1
    for cell in nb.cells:
        if added_by_papermill(cell):
            continue
        index += 1
        if cell.cell_type != 'code' or allows_error(cell):
            continue
        for out in cell.get('outputs', []):
            if out.get('output_type') == 'error':
                if out.get('ename') == 'SystemExit' and str(out.get('evalue', '')) in ('', '0'):
                    continue
                return {
                    'cell': index,
                    'cell_id': cell.get('id'),
                    'execution_count': cell.get('execution_count'),
                    'ename': out.get('ename', ''),
                    'evalue': one_line(out.get('evalue', '')),
                }
    return None


def one_line(text: object, limit: int = 300) -> str:
    """The first non-empty line of ``text``, without ANSI colours, at most ``limit`` characters."""
    text = re.sub(r'\x1b\[[0-9;]*m', '', str(text))
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), '')
    return line if len(line) <= limit else line[: limit - 1] + '…'
