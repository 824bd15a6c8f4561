"""One worker of ``d2lhelpers.multiworker.run_workers``: a custom training loop under
``tf.distribute.MultiWorkerMirroredStrategy``.

Started as a script, one process per worker, with ``TF_CONFIG`` in its environment (the cluster's
addresses and this worker's index). Every worker runs this same file; only ``TF_CONFIG`` differs.
It writes ``OUT/worker<INDEX>.npz`` (final weights ``w0, w1, ...`` and the per-step losses) through
a temporary file and a rename, so a worker killed half-way leaves no half-written file.

    TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:20001", "127.0.0.1:20002"]},
                "task": {"type": "worker", "index": 0}}' \
        python multiworker_worker.py --out /tmp/run --steps 5

Keras 3 ``model.fit`` does not work under ``MultiWorkerMirroredStrategy`` (it fails with
"PerReplica cannot be converted to a Tensor"), hence the loop with ``strategy.run``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', required=True, help='folder for worker<INDEX>.npz')
    ap.add_argument('--steps', type=int, default=5, help='training steps (one global batch each)')
    ap.add_argument('--global-batch', type=int, default=64, help='examples per step, all workers')
    ap.add_argument('--features', type=int, default=8)
    ap.add_argument('--lr', type=float, default=0.05)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument(
        '--delay-start',
        type=float,
        default=0.0,
        help='sleep this many seconds before starting (simulates a slow machine)',
    )
    ap.add_argument(
        '--signal-up',
        metavar='PATH',
        help='once the TensorFlow server runs, write {"pid": ..., "host": ...} to PATH (for tests)',
    )
    ap.add_argument(
        '--wait-for',
        metavar='PATH',
        help='after --signal-up, wait until PATH exists before training (for tests)',
    )
    args = ap.parse_args(argv)
    if args.steps < 1 or args.global_batch < 1 or args.features < 1:
        ap.error('--steps, --global-batch and --features must be >= 1')
    return args


def _write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: never half-written."""
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)  # before importing TensorFlow: a bad argument fails in milliseconds
    config = json.loads(os.environ['TF_CONFIG'])
    index = config['task']['index']
    hosts = config['cluster']['worker']
    n_workers = len(hosts)
    if args.global_batch % n_workers:
        print(
            f'--global-batch {args.global_batch} is not divisible by {n_workers} workers',
            file=sys.stderr,
        )
        return 2
    if args.delay_start > 0:
        time.sleep(args.delay_start)

    import keras
    import numpy as np
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices('GPU'):  # share a GPU with other processes
        tf.config.experimental.set_memory_growth(gpu, True)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # starts this worker's gRPC server
    if args.signal_up:
        _write_text(args.signal_up, json.dumps({'pid': os.getpid(), 'host': hosts[index]}))
    if args.wait_for:
        while not os.path.exists(args.wait_for):  # bounded by run_workers' deadline
            time.sleep(0.05)

    # The same data on every worker (same seed); each worker reads its own shard of every batch.
    rng = np.random.default_rng(args.seed)
    n = args.steps * args.global_batch
    x = rng.standard_normal((n, args.features)).astype('float32')
    true_w = rng.standard_normal((args.features, 1)).astype('float32')
    y = (np.tanh(x @ true_w) + 0.1 * rng.standard_normal((n, 1))).astype('float32')

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        per_replica = ctx.get_per_replica_batch_size(args.global_batch)
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        return ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(per_replica)

    dist_ds = strategy.distribute_datasets_from_function(dataset_fn)

    keras.utils.set_random_seed(args.seed)  # identical initial weights on every worker
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input((args.features,)),
                keras.layers.Dense(16, activation='tanh'),
                keras.layers.Dense(1),
            ]
        )
        optimizer = keras.optimizers.SGD(learning_rate=args.lr)

    @tf.function
    def train_step(batch):
        def step(xb, yb):
            with tf.GradientTape() as tape:
                per_example = tf.reduce_mean(tf.square(model(xb, training=True) - yb), axis=-1)
                # Divide by the GLOBAL batch: summing the replicas' gradients then gives the mean.
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=args.global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(
                zip(grads, model.trainable_variables, strict=True)
            )  # all-reduce inside
            return loss

        per_replica = strategy.run(step, args=batch)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    losses = [float(train_step(batch)) for batch in dist_ds]

    out = os.path.join(args.out, f'worker{index}.npz')
    tmp = out + '.tmp.npz'
    weights = {f'w{i}': w for i, w in enumerate(model.get_weights())}
    np.savez(tmp, losses=np.array(losses, dtype='float64'), **weights)
    os.replace(tmp, out)
    return 0


if __name__ == '__main__':
    sys.exit(main())
