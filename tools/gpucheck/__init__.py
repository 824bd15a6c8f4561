"""GPU acceptance tools (maintainers only, not part of the d2lhelpers package).

- ``python -m gpucheck`` (``make gpu-check``): on a GPU machine, run every notebook, record the run
  and check it against physics and the GPU's data sheet; without a GPU, say why and stop; a GPU
  that TensorFlow cannot use is a failure; ``gpucheck.driver`` asks the driver, without TF;
- ``python -m gpucheck.record BUILD_DIR --id ID``: store a batch run as a reference run,
  ``d2lhelpers/runs/ID.json``;
- ``python -m gpucheck.page [ID ...] [--check]``: write ``docs/runs/<id>.md`` from a stored run;
- ``gpucheck.check``: the acceptance checks, pure functions over a run dict (the rules in
  ``presence``, ``sheet`` and ``order``).
"""
