"""``atomic_write``: the maintainer tools' one way to write a file a reader may read meanwhile."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to a new file beside ``path``, flush it to disk and
    rename it over ``path``: a reader never sees half a file. An existing file keeps its
    permission bits; on any error the temporary file is removed and ``path`` is left as it was.
    The maintainer tools' one atomic writer (the batch runner and gpucheck)."""
    path = Path(path)
    raw = data.encode('utf-8') if isinstance(data, str) else bytes(data)
    tmp = path.with_name(f'.{path.name}.{uuid.uuid4().hex[:12]}.tmp')
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
