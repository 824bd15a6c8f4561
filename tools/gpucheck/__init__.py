"""GPU acceptance tools (maintainers only, not part of the d2lhelpers package).

- ``python -m gpucheck`` (``make gpu-check``): on a GPU machine, run every notebook, record the run
  and check it against physics and the GPU's data sheet; without a GPU, say why and stop;
- ``python -m gpucheck.record BUILD_DIR --id ID``: store a batch run as a reference run,
  ``d2lhelpers/runs/ID.json``;
- ``python -m gpucheck.page [--check]``: write ``docs/gpu-h200.md`` from the stored H200 run;
- ``gpucheck.check``: the acceptance checks, pure functions over a run dict.
"""
