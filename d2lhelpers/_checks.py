"""The one argument check the helpers share (TensorFlow-free, so the batch and multi-worker
runners can use it without importing TensorFlow)."""

from __future__ import annotations


def check_int(name: str, value: object, minimum: int) -> int:
    """Return ``value`` if it is an int (not a bool) >= ``minimum``; else a TypeError/ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f'`{name}` must be an int, got {value!r} ({type(value).__name__})')
    if value < minimum:
        raise ValueError(f'`{name}` must be >= {minimum}, got {value}')
    return value
