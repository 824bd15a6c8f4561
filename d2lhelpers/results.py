"""``save_results({...}, results_path)``: a notebook's results as JSON (``None``: not written;
the batch runner passes a path and collects the file)."""

from __future__ import annotations

import json
import math
import os
import uuid
from pathlib import Path
from typing import Any


def _jsonable(value: Any) -> Any:
    """Plain JSON types from NumPy/TF values (arrays too), tuples and objects with ``as_dict``."""
    if hasattr(value, 'as_dict'):
        return _jsonable(value.as_dict())
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if callable(getattr(value, 'numpy', None)):  # a TensorFlow tensor
        value = value.numpy()
    if callable(getattr(value, 'tolist', None)):  # NumPy scalars and arrays
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def save_results(results: dict[str, Any], path: str | os.PathLike | None) -> dict[str, Any]:
    """Write ``results`` as JSON to ``path`` (``None``: write nothing); return the JSON-ready dict.

    NumPy and TensorFlow values become plain numbers and lists, ``nan``/``inf`` become ``null``,
    objects with ``as_dict`` (``Comparison``, ``EnvReport``) become dicts. The file is written
    atomically.
    """
    if not isinstance(results, dict):
        raise TypeError(f'tham số `results` phải là một dict, nhận được {type(results).__name__}')
    data = _jsonable(results)
    if path is None:
        return data
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TypeError(f'tham số `results_path` phải là đường dẫn hoặc None, nhận được {path!r}')
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + '\n'
    tmp = path.with_name(f'.{path.name}.{uuid.uuid4().hex[:12]}.tmp')
    try:  # renamed over the file whole: a reader never sees half of it, a failure keeps the old
        tmp.write_text(text, encoding='utf-8')
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return data
