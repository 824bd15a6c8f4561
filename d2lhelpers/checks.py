"""Argument checks whose errors name what was wrong, in Vietnamese (TensorFlow-free).

Every check takes ``(name, value, ...)`` and returns the value, so a notebook's settings are
checked in one short cell and a bad value stops the run there:
``tham số `n` phải là số nguyên, nhận được 1.5 (float)``. The package's own arguments too.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from contextlib import suppress
from typing import Any


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: object) -> str:
    return f'{value!r} ({type(value).__name__})'


def check_int(name: str, value: object, minimum: int = 1) -> int:
    """Return ``value`` if it is an int (not a bool) >= ``minimum``; else TypeError/ValueError."""
    if not _is_int(value):
        raise TypeError(f'tham số `{name}` phải là số nguyên, nhận được {_kind(value)}')
    if value < minimum:
        raise ValueError(f'tham số `{name}` phải >= {minimum}, nhận được {value}')
    return value


def check_number(
    name: str, value: object, *, minimum: float | None = None, strict: bool = False
) -> float:
    """Return ``value`` as a float if it is a finite real number (>= or, strict, > ``minimum``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f'tham số `{name}` phải là một số, nhận được {_kind(value)}')
    if not math.isfinite(value):
        raise ValueError(f'tham số `{name}` phải là một số hữu hạn, nhận được {value}')
    if minimum is not None and (value <= minimum if strict else value < minimum):
        sign = '>' if strict else '>='
        raise ValueError(f'tham số `{name}` phải {sign} {minimum:g}, nhận được {value}')
    return float(value)


def check_auto(name: str, value: object, check: Callable[[str, Any], Any], auto: Any) -> Any:
    """``'auto'`` -> ``auto``; anything else must pass ``check(name, value)``."""
    if isinstance(value, str) and value.strip() == 'auto':
        return auto
    return check(name, value)


def check_int_list(name: str, value: object) -> list[int]:
    """A non-empty list of ints > 0; a string such as ``"[64, 128]"`` (papermill's ``-p``) too."""
    if isinstance(value, str):  # papermill's ``-p NAME "[1, 2]"`` arrives as text
        with suppress(ValueError, SyntaxError):  # not a Python literal: refused below, as text
            value = ast.literal_eval(value.strip())
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


_DEVICE = re.compile(
    r'(?:/job:[^/]+)?(?:/replica:\d+)?(?:/task:\d+)?/?(?:physical_device:|device:)?'
    r'([A-Za-z][A-Za-z_]*):(\d+)'
)


def device_name(text: object) -> str:
    """The short name of a device: ``'/job:localhost/.../device:GPU:1'`` -> ``'/GPU:1'``."""
    if not isinstance(text, str):
        raise TypeError(f'tên thiết bị phải là chuỗi như "/GPU:0", nhận được {_kind(text)}')
    match = _DEVICE.fullmatch(text.strip())
    if not match:
        raise ValueError(f'không phải tên thiết bị: {text!r} (ví dụ đúng: "/CPU:0", "/GPU:1")')
    return f'/{match.group(1).upper()}:{int(match.group(2))}'
