"""Checking papermill parameters and saving a notebook's key figures.

Taught in every notebook's "Tham số" (parameters) section: the cell after the ``parameters`` cell
calls these checks, so a bad value stops the run there with a message that names the parameter.
``save_results`` is the last cell of each measuring notebook; ``python -m d2lhelpers.batch``
collects the files it writes.
"""

from __future__ import annotations

import ast
import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ['check_positive_int', 'check_int_list', 'check_choice', 'save_results']


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is an int > 0, else raise naming ``name``."""
    if not _is_int(value):
        raise TypeError(
            f'tham số `{name}` phải là số nguyên, nhận được {value!r} ({type(value).__name__})'
        )
    if value <= 0:
        raise ValueError(f'tham số `{name}` phải là số nguyên dương, nhận được {value}')
    return value


def check_int_list(name: str, value: object) -> list[int]:
    """Return ``value`` as a list if it is a non-empty list of ints > 0, else raise naming ``name``.

    A string such as ``"[64, 128]"`` is read as a Python literal first: papermill's ``-p`` passes
    lists as text.
    """
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise TypeError(
                f'tham số `{name}` phải là một danh sách số nguyên, nhận được {value!r}'
            ) from None
    if not isinstance(value, (list, tuple)):
        raise TypeError(f'tham số `{name}` phải là một danh sách số nguyên, nhận được {value!r}')
    if not value:
        raise ValueError(f'tham số `{name}` không được là danh sách rỗng')
    for v in value:
        if not _is_int(v) or v <= 0:
            raise ValueError(
                f'tham số `{name}` chỉ nhận số nguyên dương, có phần tử {v!r} trong {list(value)!r}'
            )
    return list(value)


def check_choice(name: str, value: object, choices: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``choices``, else raise naming ``name`` and the choices."""
    choices = list(choices)
    if value not in choices:
        raise ValueError(f'tham số `{name}` = {value!r} không hợp lệ; chọn một trong {choices!r}')
    return value


def _jsonable(value: Any) -> Any:
    """Plain JSON types from numpy/TF scalars, tuples and dataclasses with ``as_dict``."""
    if hasattr(value, 'as_dict'):
        return _jsonable(value.as_dict())
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, 'item') and callable(value.item):  # numpy / TF scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def save_results(results: dict[str, Any], path: str | os.PathLike | None) -> dict[str, Any]:
    """Write ``results`` as JSON to ``path`` (``None``: write nothing) and return the JSON-ready dict.

    The file is written to a temporary name and then renamed, so a reader never sees half a file.
    """
    if not isinstance(results, dict):
        raise TypeError(f'`results` must be a dict, got {type(results).__name__}')
    data = _jsonable(results)
    if path is None:
        return data
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TypeError(f'tham số `results_path` phải là đường dẫn hoặc None, nhận được {path!r}')
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix='.tmp')
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            json.dump(data, f, ensure_ascii=False, indent=2, sort_keys=True)
            f.write('\n')
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return data
