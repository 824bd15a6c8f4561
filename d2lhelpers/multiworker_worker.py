"""One worker of ``run_workers``: a training loop under ``MultiWorkerMirroredStrategy`` (Keras 3
``fit`` fails under it), run with its own ``TF_CONFIG``; writes ``OUT/worker<INDEX>.npz``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

FEATURES, LEARNING_RATE = 8, 0.05  # the same data and model on every worker


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', required=True, help='folder for worker<INDEX>.npz')
    ap.add_argument('--steps', type=int, default=5, help='training steps (one global batch each)')
    ap.add_argument('--global-batch', type=int, default=64, help='examples per step, all workers')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--delay-start', type=float, default=0.0, help='sleep first (a slow machine)')
    args = ap.parse_args(argv)  # before importing TensorFlow: a bad argument fails at once
    index = json.loads(os.environ['TF_CONFIG'])['task']['index']
    time.sleep(args.delay_start)

    import keras
    import numpy as np
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices('GPU'):  # share a GPU with other processes
        tf.config.experimental.set_memory_growth(gpu, True)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # starts this worker's gRPC server

    rng = np.random.default_rng(args.seed)
    n = args.steps * args.global_batch
    x = rng.standard_normal((n, FEATURES)).astype('float32')
    true_w = rng.standard_normal((FEATURES, 1)).astype('float32')
    y = (np.tanh(x @ true_w) + 0.1 * rng.standard_normal((n, 1))).astype('float32')

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:  # this worker's shard
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return ds.batch(ctx.get_per_replica_batch_size(args.global_batch))

    dist_ds = strategy.distribute_datasets_from_function(dataset_fn)
    keras.utils.set_random_seed(args.seed)  # identical initial weights on every worker
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input((FEATURES,)), keras.layers.Dense(16, 'tanh'), keras.layers.Dense(1)]
        )
        optimizer = keras.optimizers.SGD(learning_rate=LEARNING_RATE)

    @tf.function
    def train_step(batch):
        def step(xb, yb):
            with tf.GradientTape() as tape:
                per_example = tf.reduce_mean(tf.square(model(xb, training=True) - yb), axis=-1)
                # Divide by the GLOBAL batch: summing the replicas' gradients then gives the mean.
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=args.global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss  # apply_gradients all-reduces the gradients over the workers

        return strategy.reduce('SUM', strategy.run(step, args=batch), axis=None)

    losses = [float(train_step(batch)) for batch in dist_ds]
    out = os.path.join(args.out, f'worker{index}.npz')
    weights = {f'w{i}': w for i, w in enumerate(model.get_weights())}
    np.savez(out + '.tmp.npz', losses=np.array(losses, dtype='float64'), **weights)
    os.replace(out + '.tmp.npz', out)
    return 0


if __name__ == '__main__':
    sys.exit(main())
