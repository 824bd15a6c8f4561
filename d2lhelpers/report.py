"""The batch runner's report: ``OUT/report.md`` with a table of the notebooks and their figures.

Extended with plots per exercise by the batch issue; kept free of TensorFlow (the environment
report is taken in a subprocess so the runner itself stays light).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from .kernel import QUIET_ENV

__all__ = ['write_report', 'environment']


def environment() -> dict[str, Any]:
    """``env_report().as_dict()`` of this machine, from a fresh interpreter (TF is imported there)."""
    code = 'import json; from d2lhelpers import env_report; print(json.dumps(env_report().as_dict(), default=str))'
    import os
    try:
        out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                             timeout=300, env={**os.environ, **QUIET_ENV}, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as err:
        return {'error': f'environment report failed: {err}'}


def write_report(summary: dict[str, Any], out: Path) -> Path:
    env = environment()
    lines = ['# Báo cáo chạy notebook (batch report)', '',
             f"Tổng thời gian: {summary['wall_seconds']:.1f} s, `--jobs {summary['jobs']}`.", '',
             '## Máy đã chạy', '']
    lines += [f'- {k}: {v}' for k, v in env.items()]
    lines += ['', '## Notebook', '', '| notebook | trạng thái | giây | cách chạy | lỗi |',
              '|---|---|---:|---|---|']
    for e in summary['notebooks']:
        err = '' if not e['error'] else f"{e['error']['ename']}: {e['error']['evalue']}".replace('|', '\\|')
        lines.append(f"| {e['notebook']} | {e['status']} | {e['seconds']:.1f} | {e['ran']} | {err} |")
    path = out / 'report.md'
    path.write_text('\n'.join(lines) + '\n', encoding='utf-8')
    return path
