"""Reading a notebook's declared parameters and writing notebooks in their committed form.

Used by ``python -m d2lhelpers.batch`` and by the tests that check the committed notebooks.
"""
from __future__ import annotations

import ast
import os
import tempfile
from pathlib import Path
from typing import Any

import nbformat

__all__ = ['declared_parameters', 'measures_time', 'canonical', 'write_atomic', 'first_error']

# Cell metadata that papermill/nbclient/JupyterLab add and that changes on every run.
_VOLATILE_CELL_META = ('execution', 'papermill', 'collapsed', 'scrolled', 'ExecuteTime')


def declared_parameters(nb: nbformat.NotebookNode) -> dict[str, Any]:
    """Names and default values assigned in the first cell tagged ``parameters``."""
    for cell in nb.cells:
        if cell.cell_type == 'code' and 'parameters' in cell.get('metadata', {}).get('tags', []):
            params: dict[str, Any] = {}
            for node in ast.parse(cell.source).body:
                targets = (node.targets if isinstance(node, ast.Assign)
                           else [node.target] if isinstance(node, ast.AnnAssign) else [])
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


def canonical(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The committed form: no papermill/timing metadata, no machine-specific language version."""
    nb = nbformat.from_dict(nb)
    nb.metadata.pop('papermill', None)
    nb.metadata.pop('widgets', None)
    if 'language_info' in nb.metadata:
        nb.metadata.language_info = {'name': nb.metadata.language_info.get('name', 'python')}
    for cell in nb.cells:
        for key in _VOLATILE_CELL_META:
            cell.metadata.pop(key, None)
        if cell.cell_type == 'code':
            for out in cell.outputs:
                out.get('metadata', {}).pop('execution', None)
    return nb


def write_atomic(nb: nbformat.NotebookNode, path: str | os.PathLike) -> None:
    """Write ``nb`` to ``path`` through a temporary file and a rename: never half a notebook."""
    path = Path(path)
    text = nbformat.writes(nb)
    if not text.endswith('\n'):
        text += '\n'
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f'.{path.name}.', suffix='.tmp')
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def first_error(nb: nbformat.NotebookNode) -> dict[str, Any] | None:
    """The first stored error: ``{'cell': index, 'ename': ..., 'evalue': one line}``, or None."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != 'code':
            continue
        for out in cell.get('outputs', []):
            if out.get('output_type') == 'error':
                evalue = str(out.get('evalue', '')).strip().splitlines()
                return {'cell': i, 'ename': out.get('ename', ''),
                        'evalue': evalue[0] if evalue else ''}
    return None
