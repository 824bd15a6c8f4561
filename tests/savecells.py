"""What each notebook saves, read from its save cell (the cell tagged ``report-headline`` that
calls ``save_results``) without running it: the keys of ``results`` when ``save_results(results,
...)`` is called.

The reader understands the forms the save cells use, and a cell in any other form is an error
(the lint in tests/tools/test_contracts.py), so what it reads holds on every branch:

    results = {'key': ..., ...}          results = dict(key=..., ...)
    results |= {'key': ..., ...}         results |= dict(key=..., ...)
    results['key'] = ...                 _ = save_results(results, results_path)

at the cell's top level (not under ``if``/``for``/``with``/``try``), with string keys written out
(no ``**``), and ``save_results(results, ...)`` called once, at the top level. No TensorFlow.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted([*ROOT.glob('notebooks/*.ipynb'), *ROOT.glob('exercises/*.ipynb')])
TAG = 'report-headline'
NAME = 'results'


class SaveCellError(Exception):
    """A save cell the reader does not understand (the message names the notebook and line)."""


def save_cell(path: Path) -> str:
    """The source of the notebook's cell tagged ``report-headline``."""
    cells = json.loads(path.read_text(encoding='utf-8'))['cells']
    tagged = [c for c in cells if TAG in c.get('metadata', {}).get('tags', [])]
    if len(tagged) != 1:
        raise SaveCellError(f'{notebook_name(path)}: {len(tagged)} ô có tag {TAG!r}, cần đúng 1')
    source = tagged[0]['source']
    return ''.join(source) if isinstance(source, list) else source


def notebook_name(path: Path) -> str:
    """``exercises/04-two-gpu-matmul`` (the name runs and ``gpucheck.check`` use)."""
    return str(path.relative_to(ROOT).with_suffix(''))


def _literal_keys(node: ast.expr, where: str) -> list[str] | None:
    """The keys of ``{'k': ...}`` or ``dict(k=...)``; None when ``node`` is neither."""
    if isinstance(node, ast.Dict):
        keys = []
        for k in node.keys:
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                raise SaveCellError(f'{where}: khóa của {NAME} phải là chuỗi viết ra (không **)')
            keys.append(k.value)
        return keys
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == 'dict':
        if node.args or any(k.arg is None for k in node.keywords):
            raise SaveCellError(f'{where}: dict(...) của {NAME} chỉ được có tham số tên')
        return [k.arg for k in node.keywords]
    return None


def _is_save(node: ast.AST) -> bool:
    call = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == 'save_results'
        and bool(call.args)
        and isinstance(call.args[0], ast.Name)
        and call.args[0].id == NAME
    )


def _touches(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == NAME for n in ast.walk(node))


def saved_keys(source: str, where: str = 'ô lưu') -> set[str]:
    """The keys ``results`` holds when ``save_results(results, ...)`` is called in ``source``."""
    keys: set[str] | None = None
    saved: set[str] | None = None
    for node in ast.parse(source).body:
        line = f'{where}, dòng {node.lineno}'
        if _is_save(node):
            if saved is not None or keys is None:
                raise SaveCellError(f'{line}: save_results({NAME}, ...) phải gọi đúng một lần')
            saved = set(keys)
        elif saved is not None:
            continue  # after the save: printing, comparing
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == NAME for t in node.targets
        ):
            found = _literal_keys(node.value, line)
            if found is None or len(node.targets) != 1:
                raise SaveCellError(f'{line}: {NAME} = phải là {{...}} hoặc dict(...)')
            keys = set(found)
        elif isinstance(node, ast.AugAssign) and _touches(node.target):
            found = _literal_keys(node.value, line)
            plain = isinstance(node.target, ast.Name) and isinstance(node.op, ast.BitOr)
            if keys is None or found is None or not plain:
                raise SaveCellError(f'{line}: chỉ {NAME} |= {{...}} hoặc dict(...)')
            keys |= set(found)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Subscript) and _touches(t.value) for t in node.targets
        ):
            target = node.targets[0]
            key = target.slice if isinstance(target, ast.Subscript) else None
            plain = isinstance(target.value, ast.Name) and target.value.id == NAME
            if keys is None or len(node.targets) != 1 or not plain:
                raise SaveCellError(f'{line}: chỉ {NAME}["khóa"] = ...')
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise SaveCellError(f'{line}: khóa của {NAME}[...] phải là chuỗi viết ra')
            keys.add(key.value)
        elif _touches(node):
            raise SaveCellError(f'{line}: {NAME} chỉ được dựng ở mức ngoài cùng của ô')
    if saved is None:
        raise SaveCellError(f'{where}: không gọi save_results({NAME}, ...)')
    return saved


def notebook_keys() -> dict[str, set[str]]:
    """``{notebook name: keys its save cell saves}`` for every notebook of the collection."""
    return {notebook_name(p): saved_keys(save_cell(p), notebook_name(p)) for p in NOTEBOOKS}
