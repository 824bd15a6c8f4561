"""The batch runner's report: ``OUT/report.md``, a table of the notebooks, their headline figures
and plots (PNG files next to the report) drawn from the ``results`` each notebook saved.

``write_report(summary, out)`` takes the dict that ``python -m d2lhelpers.batch`` writes to
``summary.json``. The plots are chosen by the shape of each notebook's results (the keys that
``save_results`` wrote), so a renamed notebook keeps its plot:

- ``gflops`` + ``sizes`` (CPU vs GPU matmul): GFLOP/s against n per device, log-log;
- ``slowdown_vs_no_logging`` (logging on the device): bars of the median time per variant;
- ``speedup`` + ``ideal`` (two devices): sequential vs concurrent, speedup against the ideal;
- ``bandwidth_gbs`` (choosing a GPU): bandwidth, GFLOP/s against n and per dtype, per device;
- ``losses`` (data parallel): loss curves, step time with 1 and 2 devices.

Anything else is listed as its scalar values. Kept free of TensorFlow: the environment report is
taken in a subprocess (``environment()``), so the runner stays light.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .kernel import QUIET_ENV, available_cores

__all__ = ['write_report', 'environment', 'machine']


def environment(timeout: float = 300) -> dict[str, Any]:
    """``env_report().as_dict()`` of this machine, from a fresh interpreter (TF is imported there)."""
    code = (
        'import json; from d2lhelpers import env_report; '
        'print(json.dumps(env_report().as_dict(), default=str))'
    )
    try:
        out = subprocess.run(
            [sys.executable, '-c', code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **QUIET_ENV},
            check=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])
    except subprocess.CalledProcessError as err:
        tail = (err.stderr or '').strip().splitlines()
        return {'error': f'environment report failed: {tail[-1] if tail else err}'}
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as err:
        return {'error': f'environment report failed: {err}'}


def machine() -> dict[str, Any]:
    """What the runner knows without TensorFlow: OS, Python, cores, load average."""
    return {
        'platform': platform.platform(),
        'python': platform.python_version(),
        'cores': available_cores(),
        'load_average': [round(x, 2) for x in os.getloadavg()],
    }


# --- formatting ------------------------------------------------------------------------------


def _num(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f'{x:.3g}' if abs(x) < 1e4 else f'{x:,.0f}'
    return str(x)


def _secs(s: float | None) -> str:
    if s is None:
        return '–'
    if s < 1e-3:
        return f'{s * 1e6:.3g} µs'
    if s < 1:
        return f'{s * 1e3:.3g} ms'
    return f'{s:.3g} s'


def _cell(text: Any) -> str:
    return str(text).replace('|', '\\|').replace('\n', ' ')


def _how(entry: dict[str, Any]) -> str:
    ran = entry.get('ran', '')
    jobs = re.search(r'--jobs \d+', ran)
    jobs = f' (`{jobs.group()}`)' if jobs else ''
    if entry.get('measures_time') or ran.startswith('alone (measures'):
        return 'một mình (đo thời gian)'
    if entry.get('beside'):
        return f'cùng lúc với {", ".join(entry["beside"])}{jobs}'
    return f'một mình{jobs}'


def _series(d: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Sorted (n, value) pairs of a ``{"<n>": value}`` mapping, without missing values."""
    pairs = sorted((float(k), float(v)) for k, v in d.items() if v is not None)
    return [p[0] for p in pairs], [p[1] for p in pairs]


# --- plots, one per results shape -----------------------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use('Agg', force=True)
    import matplotlib.pyplot as plt

    return plt


def _log_axes(ax: Any, sizes: list[float]) -> None:
    """Log-log axes with plain numbers (64, 1024; not 2x10^2) and a tick at each size."""
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    for axis in (ax.xaxis, ax.yaxis):
        fmt = ScalarFormatter()
        fmt.set_scientific(False)
        axis.set_major_formatter(fmt)
        axis.set_minor_formatter(NullFormatter())
    sizes = sorted(set(sizes))
    if 0 < len(sizes) <= 10:
        ax.set_xticks(sizes, [f'{int(n)}' for n in sizes])
        ax.xaxis.set_minor_formatter(NullFormatter())


def _plot_matmul(r: dict[str, Any], path: Path, title: str) -> list[str]:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, per_n in r['gflops'].items():
        xs, ys = _series(per_n)
        ax.plot(xs, ys, marker='o', label=label)
    if r.get('crossover_n'):
        ax.axvline(
            r['crossover_n'],
            color='grey',
            linestyle='--',
            label=f'điểm giao n = {r["crossover_n"]}',
        )
    _log_axes(ax, [float(n) for per_n in r['gflops'].values() for n in per_n])
    ax.set_xlabel('kích thước ma trận n (n × n)')
    ax.set_ylabel('GFLOP/s (trung vị)')
    ax.set_title(f'Nhân ma trận: tốc độ theo kích thước\n{title}')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend()
    _save(fig, path)
    lines = []
    for label, per_n in r['gflops'].items():
        xs, ys = _series(per_n)
        if ys:
            best = max(range(len(ys)), key=ys.__getitem__)
            lines.append(f'{label}: cao nhất {_num(ys[best])} GFLOP/s ở n = {int(xs[best])}')
    lines.append(f'điểm giao (crossover_n): {r.get("crossover_n")}')
    return lines


def _plot_logging(r: dict[str, Any], path: Path, title: str) -> list[str]:
    plt = _plt()
    med = {k: v for k, v in r['median_s'].items() if v is not None}
    slow = {'no_logging': 1.0, **(r.get('slowdown_vs_no_logging') or {})}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    order = ['no_logging', 'host_every_step', 'device_once', 'tf_function']
    names = [k for k in order if k in med] + [k for k in med if k not in order]
    bars = ax.bar(names, [med[k] * 1e3 for k in names], color='tab:blue')
    for bar, k in zip(bars, names):
        if slow.get(k) is not None:
            ax.annotate(
                f'{slow[k]:.2f}x',
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha='center',
                va='bottom',
            )
    ax.set_ylim(0, max(med[k] for k in names) * 1e3 * 1.12)
    ax.set_ylabel('thời gian trung vị (ms)')
    ax.set_xlabel('cách ghi log (logging)')
    ax.set_title(f'Chi phí ghi log trong vòng lặp (số trên cột: so với không ghi log)\n{title}')
    ax.tick_params(axis='x', labelrotation=15)
    ax.grid(True, axis='y', alpha=0.3)
    _save(fig, path)
    return [
        f'{k}: {_secs(med[k])}'
        + (f', {slow[k]:.2f}x so với no_logging' if slow.get(k) is not None else '')
        for k in names
    ]


def _plot_two_devices(r: dict[str, Any], path: Path, title: str) -> list[str]:
    plt = _plt()
    med = r['median_s']
    names = [k for k in ('sequential', 'concurrent') if med.get(k) is not None]
    names += [k for k, v in med.items() if k not in names and v is not None]
    fig, (ax1, ax2) = plt.subplots(
        1,
        2,
        figsize=(9 + 0.8 * max(0, len(names) - 2), 4.2),
        gridspec_kw={'width_ratios': [max(2, len(names)), 2]},
    )
    colors = {'sequential': 'tab:grey', 'concurrent': 'tab:green'}
    ax1.bar(names, [med[k] * 1e3 for k in names], color=[colors.get(k, 'tab:blue') for k in names])
    ax1.set_ylabel('thời gian trung vị (ms)')
    ax1.set_title('tuần tự (sequential) và song song (concurrent)')
    ax1.tick_params(axis='x', labelrotation=15 if len(names) > 2 else 0)
    ax1.grid(True, axis='y', alpha=0.3)
    ideal = r.get('ideal', 2.0)
    speedup = r.get('speedup')
    bars = ax2.bar(['đo được', 'lý tưởng'], [speedup or 0, ideal], color=['tab:green', 'lightgrey'])
    for bar, v in zip(bars, [speedup, ideal]):
        if v is not None:
            ax2.annotate(
                f'{v:.2f}x',
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha='center',
                va='bottom',
            )
    ax2.axhline(1.0, color='black', linewidth=0.8, linestyle=':', label='không tăng tốc (1x)')
    ax2.set_ylim(0, max(ideal, speedup or 0) * 1.15)
    ax2.set_ylabel('tăng tốc (lần)')
    ax2.set_title('tăng tốc so với lý tưởng')
    ax2.legend(loc='lower right')
    ax2.grid(True, axis='y', alpha=0.3)
    fig.suptitle(f'Hai thiết bị nhân ma trận cùng lúc — {title}')
    _save(fig, path)
    return [f'{k}: {_secs(med[k])}' for k in names] + [
        f'tăng tốc (speedup): {_num(speedup)}x (lý tưởng {_num(ideal)}x)'
    ]


def _plot_choose_gpu(r: dict[str, Any], path: Path, title: str) -> list[str]:
    plt = _plt()
    panels = [k for k in ('bandwidth_gbs', 'gflops', 'dtype_gflops') if r.get(k)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4.2), squeeze=False)
    lines = []
    for ax, key in zip(axes[0], panels):
        if key == 'bandwidth_gbs':
            devs = [d for d, v in r[key].items() if v is not None]
            ax.bar(devs, [r[key][d] for d in devs], color='tab:purple')
            ax.set_ylabel('băng thông (GB/s)')
            ax.set_title('băng thông bộ nhớ (bandwidth)')
            lines += [f'{d}: băng thông {_num(r[key][d])} GB/s' for d in devs]
        elif key == 'gflops':
            for dev, per_n in r[key].items():
                xs, ys = _series(per_n)
                ax.plot(xs, ys, marker='o', label=dev)
                if ys:
                    lines.append(f'{dev}: cao nhất {_num(max(ys))} GFLOP/s (float32)')
            _log_axes(ax, [float(n) for per_n in r[key].values() for n in per_n])
            ax.set_xlabel('kích thước ma trận n')
            ax.set_ylabel('GFLOP/s')
            ax.set_title('nhân ma trận theo kích thước')
            ax.legend()
        else:
            devs = list(r[key])
            dtypes = ['float32', 'float16', 'bfloat16']
            width = 0.8 / len(dtypes)
            for j, dt in enumerate(dtypes):
                vals = [r[key][d].get(dt) or 0 for d in devs]
                ax.bar([i + (j - 1) * width for i in range(len(devs))], vals, width, label=dt)
            ax.set_xticks(range(len(devs)), devs)
            ax.set_ylabel('GFLOP/s')
            ax.set_title('theo kiểu số (dtype)')
            ax.legend()
            for d in devs:
                lines.append(
                    f'{d}: '
                    + ', '.join(
                        f'{dt} {_num(v)} GFLOP/s' for dt, v in r[key][d].items() if v is not None
                    )
                )
        ax.grid(True, axis='y', which='both', alpha=0.3)
    fig.suptitle(f'Chọn GPU: đo trên máy đã chạy — {title}')
    _save(fig, path)
    return lines


def _plot_data_parallel(r: dict[str, Any], path: Path, title: str) -> list[str]:
    plt = _plt()
    steps = r.get('step_time_s') or {}
    fig, axes = plt.subplots(
        1, 2 if steps else 1, figsize=(10 if steps else 6.5, 4.2), squeeze=False
    )
    ax = axes[0][0]
    for name, curve in r['losses'].items():
        ys = [v for v in curve if v is not None]
        ax.plot(
            range(1, len(ys) + 1),
            ys,
            marker='o',
            label=name,
            linestyle='--' if name != 'single' else '-',
        )
    ax.set_xlabel('epoch')
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel('loss')
    ax.set_title('đường loss: một thiết bị và song song dữ liệu')
    ax.grid(True, alpha=0.3)
    ax.legend()
    if steps:
        ax = axes[0][1]
        keys = sorted(steps, key=lambda k: int(k) if str(k).isdigit() else 0)
        ax.bar(
            [f'{k} thiết bị' for k in keys],
            [(steps[k] or 0) * 1e3 for k in keys],
            color='tab:orange',
        )
        ax.set_ylabel('thời gian một bước (ms)')
        ax.set_title('thời gian một bước huấn luyện')
        ax.grid(True, axis='y', alpha=0.3)
    fig.suptitle(f'Song song dữ liệu (data parallelism) — {title}')
    _save(fig, path)
    lines = [f'các worker có trọng số giống nhau: {r.get("workers_equal")}']
    lines += [
        f'chênh lệch trọng số lớn nhất {k}: {_num(v)}'
        for k, v in (r.get('max_abs_weight_diff') or {}).items()
    ]
    lines += [f'một bước với {k} thiết bị: {_secs(steps[k])}' for k in steps]
    return lines


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)


_PLOTS: list[tuple[Callable[[dict], bool], Callable[..., list[str]]]] = [
    (lambda r: 'gflops' in r and 'sizes' in r and 'bandwidth_gbs' not in r, _plot_matmul),
    (lambda r: 'slowdown_vs_no_logging' in r and 'median_s' in r, _plot_logging),
    (lambda r: 'speedup' in r and 'median_s' in r, _plot_two_devices),
    (lambda r: 'bandwidth_gbs' in r or 'dtype_gflops' in r, _plot_choose_gpu),
    (lambda r: 'losses' in r, _plot_data_parallel),
]


def _scalars(r: dict[str, Any], prefix: str = '') -> list[str]:
    lines = []
    for k, v in r.items():
        if isinstance(v, dict) and len(lines) < 20:
            lines += _scalars(v, f'{prefix}{k}.')
        elif not isinstance(v, (list, dict)):
            lines.append(f'{prefix}{k}: {_num(v)}')
    return lines[:20]


def figures(entry: dict[str, Any], out: Path) -> tuple[list[str], str | None]:
    """Headline lines and the PNG file name (in ``out``) for one notebook's results."""
    r = entry.get('results')
    if not isinstance(r, dict) or not r:
        return [], None
    stem = re.sub(r'[^\w.-]+', '__', entry['notebook'].removesuffix('.ipynb')).strip('_')
    for matches, plot in _PLOTS:
        if matches(r):
            name = f'plot-{stem}.png'
            try:
                return plot(r, out / name, entry['notebook']), name
            except (KeyError, TypeError, ValueError, AttributeError) as err:
                return [f'không vẽ được biểu đồ: {type(err).__name__}: {err}', *_scalars(r)], None
    return _scalars(r), None


# --- the report ------------------------------------------------------------------------------


def _env_lines(env: dict[str, Any], mach: dict[str, Any]) -> list[str]:
    lines = []
    if 'error' in env:
        lines.append(f'- {env["error"]}')
    elif env:
        lines.append(
            f'- TensorFlow {env.get("tensorflow")}, Keras {env.get("keras")}, '
            f'NumPy {env.get("numpy")}'
        )
        lines.append(
            '- bản build có CUDA: '
            + (
                f'có (CUDA {env.get("cuda")}, cuDNN {env.get("cudnn")})'
                if env.get('built_with_cuda')
                else 'không (chỉ CPU)'
            )
        )
        lines.append(f'- thiết bị vật lý (physical device): {", ".join(env.get("physical", []))}')
        gpus = env.get('gpus') or []
        lines.append(
            '- GPU: '
            + (
                '; '.join(
                    f'{g.get("device")}: {g.get("name", "?")}, {g.get("memory_total", "?")}'
                    for g in gpus
                )
                if gpus
                else 'không có GPU: mọi số đo trong báo cáo là của CPU'
            )
        )
    if mach:
        lines.append(
            f'- máy: {mach.get("platform")}, Python {mach.get("python")}, '
            f'{mach.get("cores")} nhân (core)'
        )
    return lines


def write_report(summary: dict[str, Any], out: Path, env: dict[str, Any] | None = None) -> Path:
    """Write ``out/report.md`` and its PNG plots; return the report's path.

    ``env`` defaults to ``summary['environment']``, else ``environment()`` (imports TensorFlow
    in a subprocess).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = env if env is not None else summary.get('environment') or environment()
    entries = summary['notebooks']
    ok = sum(e['status'] == 'ok' for e in entries)
    load = summary.get('load_average')
    lines = [
        '# Báo cáo chạy notebook (batch report)',
        '',
        f'{ok}/{len(entries)} notebook chạy xong (`ok`) trong '
        f'{summary.get("wall_seconds", 0):.1f} s, `--jobs {summary.get("jobs")}`'
        + (', `--inplace`' if summary.get('inplace') else '')
        + '.',
        '',
    ]
    if summary.get('command'):
        lines += [f'Lệnh: `{summary["command"]}`', '']
    if load:
        lines += [
            f'Tải máy (load average 1 phút) lúc bắt đầu {load.get("start")}, lúc kết thúc '
            f'{load.get("end")}: số đo thời gian chỉ đáng tin khi máy rảnh.',
            '',
        ]
    lines += [
        '## Máy đã chạy (môi trường)',
        '',
        *_env_lines(env, summary.get('machine') or {}),
        '',
        '## Các notebook',
        '',
        '| notebook | trạng thái | thời gian | cách chạy | tham số | lỗi |',
        '|---|---|---:|---|---|---|',
    ]
    for e in entries:
        err = e.get('error')
        err_text = ''
        if err:
            where = f' (ô {err["cell"]})' if err.get('cell') is not None else ''
            err_text = f'{err.get("ename")}{where}: {err.get("evalue")}'
        params = ', '.join(
            f'`{k}={json.dumps(v, ensure_ascii=False)}`'
            for k, v in (e.get('parameters') or {}).items()
        )
        lines.append(
            f'| {_cell(e["notebook"])} | {e["status"]} | {e["seconds"]:.1f} s | '
            f'{_cell(_how(e))} | {_cell(params)} | {_cell(err_text)} |'
        )
    lines += ['', '## Số liệu chính và biểu đồ', '']
    any_figures = False
    for e in entries:
        head, png = figures(e, out)
        if not head and not png:
            continue
        any_figures = True
        lines += [f'### {e["notebook"]}', '', f'Cách chạy: {_how(e)}.', '']
        lines += [f'- {h}' for h in head]
        if png:
            lines += ['', f'![{e["notebook"]}]({png})']
        lines.append('')
    if not any_figures:
        lines += ['Không notebook nào lưu kết quả (results) trong lần chạy này.', '']
    missing = [e['notebook'] for e in entries if e['status'] != 'ok']
    if missing:
        lines += [f'Không có số liệu của notebook không chạy xong: {", ".join(missing)}.', '']
    path = out / 'report.md'
    tmp = path.with_name('.report.md.tmp')
    tmp.write_text('\n'.join(lines).rstrip('\n') + '\n', encoding='utf-8')
    os.replace(tmp, path)
    return path
