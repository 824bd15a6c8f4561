"""nbrun.atomic.atomic_write: a file is replaced whole or not at all."""

from __future__ import annotations

import os

import pytest
from nbrun.atomic import atomic_write


def test_atomic_write_replaces_whole_keeps_the_mode_and_leaves_nothing_on_error(
    tmp_path, monkeypatch
):
    path = tmp_path / 'x.json'
    atomic_write(path, 'một')
    path.chmod(0o640)
    atomic_write(path, b'hai')
    assert path.read_bytes() == b'hai' and path.stat().st_mode & 0o777 == 0o640

    def refuse(*args):
        raise OSError('disk full')

    monkeypatch.setattr(os, 'replace', refuse)  # fails after the temporary file is written
    with pytest.raises(OSError, match='disk full'):
        atomic_write(path, 'ba')
    assert path.read_bytes() == b'hai' and [p.name for p in tmp_path.iterdir()] == ['x.json']
