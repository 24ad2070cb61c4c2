"""TensorFlow/Keras runner: MultiWorkerMirroredStrategy and Keras ``fit``, writing honestscale events.

One process per worker, like the PyTorch runner: ``honestscale run --framework tensorflow`` builds a
``TF_CONFIG`` from the launcher's RANK/WORLD_SIZE and the gRPC ports it found free (HONESTSCALE_WORKER_PORTS;
else MASTER_PORT+1, +2, ..); under ``srun`` the workers are taken
from Slurm (``SlurmClusterResolver``). Keras 2 (``tf-keras``, selected with TF_USE_LEGACY_KERAS=1)
is used because Keras 3's ``fit`` does not run under MultiWorkerMirroredStrategy.

    python -m honestscale.runners.tf_keras --model mlp --dataset digits --epochs 3 --out runs/

With ``--distributed horovod`` (``honestscale run --framework horovod-tf``, under ``horovodrun``)
the same model is trained by Horovod's Keras ``DistributedOptimizer`` instead of the strategy; Horovod's
Keras front end needs Keras 2 inside TensorFlow (``tf.keras``), so this runs on TensorFlow <= 2.15.

Each step's data time is the time the input generator took to produce the batch (no prefetch, so
the step waits for it); the rest of the step is compute and the all-reduce, which Keras does not let
a callback separate: communication is recorded as not measured, except with ``--horovod-timeline``,
where rank 0 writes Horovod's timeline beside its events and the collector turns its all-reduce
phases into each step's communication time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from honestscale.record import pressure
from honestscale.record import world as _world
from honestscale.runners import _keras, usermodel
from honestscale.runners._loop import Budget, Outcome, check_target
from honestscale.runners._run_start import Data, Framework, Model, Sizes, Stop, Threads
from honestscale.runners.instrument import (
    POSITIVE_INT,
    Recorder,
    add_recording_args,
    add_training_args,
    base_software,
    environment,
    run_entry,
    run_start_fields,
    unknown_names,
)

# what --model and --dataset offer besides FILE.py:FUNCTION (settle_args refuses anything else before a rank starts)
NAMES = {"model": ("mlp", "cnn", "resnet18", "resnet50"), "dataset": ("digits", "synthetic", "memmap")}


def settle_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str | None:
    """What the runner refuses once its options are parsed (a model or dataset it does not offer), or None;
    campaign specs ask it before anything launches."""
    return unknown_names(args, NAMES)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m honestscale.runners.tf_keras", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--model", default="mlp",
                   help="mlp, cnn, resnet18 (defined here), resnet50 (keras.applications, untrained), or your own: "
                        "FILE.py:FUNCTION returning an uncompiled Keras Model (default: mlp)")  # fmt: skip
    p.add_argument("--dataset", default="digits",
                   help="digits (scikit-learn, offline), synthetic, memmap ({train,validation,test}_{x,y}.npy "
                        "in --data-path, images channels first), or FILE.py:FUNCTION returning NumPy splits "
                        "(default: digits)")  # fmt: skip
    p.add_argument("--data-path", type=Path, help="folder of a memmap dataset")
    p.add_argument("--synthetic-size", type=POSITIVE_INT, default=10000)
    g, _ = add_training_args(p)
    g.add_argument("--distributed", choices=["strategy", "horovod"], default="strategy",
                   help="MultiWorkerMirroredStrategy or Horovod's DistributedOptimizer (default: strategy)")  # fmt: skip
    g.add_argument("--horovod-timeline", action="store_true",
                   help="with Horovod: record its timeline; its all-reduce phases become communication time")  # fmt: skip
    add_recording_args(p)
    return p


def _tf_config(world: _world.World) -> None:
    if world.world_size == 1 or os.environ.get("TF_CONFIG") or world.launcher == "horovodrun":
        return
    if world.launcher == "slurm":
        return  # SlurmClusterResolver reads the job's nodes and tasks
    chosen = [int(p) for p in os.environ.get("HONESTSCALE_WORKER_PORTS", "").split(",") if p.strip()]
    ports = (
        chosen
        if len(chosen) == world.world_size
        else [world.master_port + 1 + i for i in range(world.world_size)]
    )
    hosts = [f"{world.master_addr}:{port}" for port in ports]
    os.environ["TF_CONFIG"] = json.dumps(
        {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": world.rank}}
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (why := settle_args(args, parser)) is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    world = _world.discover()
    if args.batch_size % world.world_size:
        print(f"error: --batch-size {args.batch_size} is not divisible by the {world.world_size} workers",
              file=sys.stderr)  # fmt: skip
        return 2
    run_id = args.run_id or (
        f"{args.name or usermodel.label(args.model)}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        if world.world_size == 1
        else None
    )
    if run_id is None:
        print("error: --run-id is needed with more than one worker", file=sys.stderr)
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.distributed == "strategy":
        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # Horovod's TensorFlow <= 2.15 has Keras 2 built in
        _tf_config(world)
    elif args.horovod_timeline:
        os.environ["HOROVOD_TIMELINE"] = "DYNAMIC"  # started by rank 0 once its event folder exists
    with Recorder(args.out, run_id, world, sample_interval=args.sample_interval) as rec:
        _train(args, world, rec)
    return 0


def _model(keras: Any, name: str, shape: tuple[int, ...], classes: int) -> Any:
    """The runners' models in Keras (outputs are logits, as in the other runners)."""
    if name in ("cnn", "resnet18", "resnet50") and len(shape) != 3:
        raise ValueError(f"model {name} needs image inputs (H, W, C), the dataset gives {shape}")
    if name == "resnet50":
        return keras.applications.ResNet50(weights=None, input_shape=shape, classes=classes,
                                           classifier_activation=None)  # fmt: skip
    inputs = keras.Input(shape)
    x = inputs
    if name == "cnn":
        x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
        x = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(x)
        x = keras.layers.GlobalAveragePooling2D()(x)
    elif name == "resnet18":
        x = keras.layers.Conv2D(64, 3, padding="same", use_bias=False)(x)
        x = keras.layers.ReLU()(keras.layers.BatchNormalization()(x))
        for i, filters in enumerate((64, 128, 256, 512)):
            for j in range(2):  # two basic blocks per stage
                stride = 2 if i > 0 and j == 0 else 1
                shortcut = x
                y = keras.layers.Conv2D(filters, 3, stride, padding="same", use_bias=False)(x)
                y = keras.layers.ReLU()(keras.layers.BatchNormalization()(y))
                y = keras.layers.BatchNormalization()(
                    keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
                )
                if stride != 1 or shortcut.shape[-1] != filters:
                    shortcut = keras.layers.Conv2D(filters, 1, stride, use_bias=False)(shortcut)
                    shortcut = keras.layers.BatchNormalization()(shortcut)
                x = keras.layers.ReLU()(keras.layers.Add()([y, shortcut]))
        x = keras.layers.GlobalAveragePooling2D()(x)
        return keras.Model(inputs, keras.layers.Dense(classes)(x))
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(128, activation="relu")(x)
    x = keras.layers.Dense(128, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(classes)(x))


def _train(args: argparse.Namespace, world: _world.World, rec: Recorder) -> None:
    import numpy as np
    import tensorflow as tf

    keras: Any = _keras.keras2()
    hvd = _horovod(tf, world) if args.distributed == "horovod" else None
    tf.random.set_seed(args.seed)
    strategy = _strategy(tf, world, hvd)
    data, source, path, dataset_name = _arrays(args)
    sample_shape = tuple(
        int(d) for d in data["train"][0].shape[1:]
    )  # recorded channels first, as every runner
    # Keras convolutions want channels last (a memmap stays a memmap: transposing is a view)
    if len(sample_shape) == 3:
        data = {k: (np.transpose(x, (0, 2, 3, 1)), y) for k, (x, y) in data.items()}
    classes = int(max(int(np.max(y)) for _x, y in data.values())) + 1
    shape = tuple(int(d) for d in data["train"][0].shape[1:])
    local = args.batch_size // world.world_size
    with strategy.scope():
        if usermodel.is_spec(args.model):  # the user's single-device model, built under the strategy's scope
            model = usermodel.build(args.model, "tensorflow", sample_shape, classes)
        else:
            model = _model(keras, args.model, shape, classes)
        optimizer = keras.optimizers.SGD(args.lr, momentum=args.momentum)
        if hvd is not None:
            optimizer = hvd.DistributedOptimizer(optimizer)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        model.compile(optimizer=optimizer, loss=loss, metrics=["accuracy"])
    budget = Budget.of(args, args.target_accuracy)
    criterion, value = budget.criterion()
    framework = _framework(tf, keras, hvd)
    if hvd is not None and args.horovod_timeline and world.is_main:
        # beside rank 0's events: the collector finds it there (it records its own start in epoch time)
        hvd.start_timeline(str(Path(rec.writer.path).parent / "horovod-timeline.json"), mark_cycles=False)
    sizes = Sizes(len(data["train"][1]), len(data["validation"][1]), len(data["test"][1]))
    model_name = usermodel.name(args.model) if usermodel.is_spec(args.model) else args.model
    rec.run_start(
        **run_start_fields(
            args,
            world,
            runner="honestscale.runners.tf_keras",
            default_name=f"{usermodel.label(args.model)}-{usermodel.label(args.dataset)}-{world.world_size}w",
            environment=environment(world, Path(__file__), data_path=path),
            framework=framework,
            model=Model(model_name, _keras.trainable_params(model), sample_shape),
            data=Data(dataset_name, sizes, source, path, local_batch_size=local),
            stop=Stop(criterion, float(value)),
            # as configured: 0 (TensorFlow's default) means TensorFlow chooses when it builds its thread pools
            threads=Threads(
                tf.config.threading.get_intra_op_parallelism_threads(),
                tf.config.threading.get_inter_op_parallelism_threads(),
            ),
        )
    )
    timing = {"data": 0.0}
    steps_per_epoch = len(data["train"][1]) // args.batch_size
    ds = _dataset(tf, args, world, data["train"], local, shape, steps_per_epoch, timing)
    events = _events(keras, rec, budget, data, local, world, timing)
    callbacks = [events]
    if hvd is not None:
        callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))
    model.fit(ds, epochs=args.epochs, steps_per_epoch=steps_per_epoch, verbose=0, callbacks=callbacks)
    if hvd is not None and args.horovod_timeline and world.is_main:
        hvd.stop_timeline()
    x_test, y_test = data["test"]
    test = float(model.evaluate(x_test, y_test, batch_size=256, verbose=0)[1])  # once, at the end
    if world.is_main:
        rec.writer.eval(split="test", metric="accuracy", value=test, samples=len(y_test), epoch=events.epoch)
    if hvd is not None:
        hvd.allreduce(tf.constant(0.0), name="honestscale.end")  # every rank is past its last Horovod call
        # MPI_Finalize (Horovod built with MPI): under srun --mpi=pmix a rank that exits without it makes PMIx
        # abort the step, killing the ranks still writing their last events
        hvd.shutdown()
    check_target(Outcome(reached=events.reached, epochs=events.epoch + 1, steps=events.step), budget)


def _horovod(tf: Any, world: _world.World) -> Any:
    """Horovod's Keras front end, started, its ranks checked against the launcher's."""
    if _keras.legacy_needed(tf):
        raise RuntimeError(
            f"Horovod's Keras front end needs TensorFlow <= 2.15 (Keras 2), this is {tf.__version__}: "
            "use the Horovod environment, bash scripts/build-horovod-env"
        )
    import horovod.tensorflow.keras

    hvd = horovod.tensorflow.keras
    hvd.init()
    if hvd.size() != world.world_size or hvd.rank() != world.rank:
        raise _world.WorldError(
            f"Horovod sees rank {hvd.rank()} of {hvd.size()}, the launcher's environment rank {world.rank} of "
            f"{world.world_size}: start the ranks with horovodrun, or with srun --mpi=pmix and a Horovod built "
            "with MPI"
        )
    return hvd


def _strategy(tf: Any, world: _world.World, hvd: Any) -> Any:
    if world.world_size == 1 or hvd is not None:
        return tf.distribute.get_strategy()
    if world.launcher == "slurm":
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(port_base=world.master_port)
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    return tf.distribute.MultiWorkerMirroredStrategy()


def _arrays(args: argparse.Namespace) -> tuple[dict[str, Any], str, str | None, str]:
    """The splits as NumPy arrays, where they came from (in memory, the filesystem, synthetic), the data path and
    the dataset's name."""
    from honestscale.runners import data as datasets

    if usermodel.is_spec(args.dataset):
        return usermodel.dataset(args.dataset), "in_memory", None, usermodel.name(args.dataset)
    if args.dataset == "digits":
        return datasets.digits_arrays(), "in_memory", None, args.dataset
    if args.dataset == "memmap":
        if args.data_path is None:
            raise datasets.DataError("--dataset memmap needs --data-path FOLDER")
        return datasets.memmap_arrays(args.data_path), "filesystem", str(args.data_path), args.dataset
    if args.dataset == "synthetic":
        return datasets.synthetic_arrays(args.synthetic_size), "synthetic", None, args.dataset
    raise datasets.DataError(f"--dataset {args.dataset!r}: digits, synthetic, memmap or FILE.py:FUNCTION")


def _framework(tf: Any, keras: Any, hvd: Any) -> Framework:
    software = base_software() | {"tensorflow": tf.__version__, "keras": _keras.version(keras)}
    if hvd is None:
        return Framework("tensorflow", tf.__version__, "grpc", software)
    import horovod

    version = str(horovod.__version__)
    return Framework(
        "horovod-tf", version, "mpi" if hvd.mpi_enabled() else "gloo", software | {"horovod": version}
    )


def _dataset(
    tf: Any,
    args: argparse.Namespace,
    world: _world.World,
    train: tuple[Any, Any],
    local: int,
    shape: tuple[int, ...],
    steps_per_epoch: int,
    timing: dict[str, float],
) -> Any:
    """This worker's shard of each global batch, from a generator whose time is the step's data time (no
    prefetch: the step waits for it)."""
    import numpy as np

    x_train, y_train = train

    def batches() -> Any:
        rng = np.random.default_rng(args.seed)
        while True:
            order = rng.permutation(len(y_train))
            for s in range(steps_per_epoch):
                t0 = time.perf_counter()
                first = s * args.batch_size + world.rank * local
                idx = order[first : first + local]
                batch = (x_train[idx], y_train[idx])
                timing["data"] = time.perf_counter() - t0
                yield batch

    spec = (tf.TensorSpec((local, *shape), tf.float32), tf.TensorSpec((local,), tf.int64))
    ds = tf.data.Dataset.from_generator(batches, output_signature=spec)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF  # we shard
    return ds.with_options(options)


def _events(
    keras: Any,
    rec: Recorder,
    budget: Budget,
    data: dict[str, Any],
    local: int,
    world: _world.World,
    timing: dict[str, float],
) -> Any:
    """The callback that writes fit's steps, epochs and evaluations, and stops fit where the shared loop's budget
    says (the sample budget, the target; evaluations every --eval-every epochs)."""
    w = rec.writer

    class Events(keras.callbacks.Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.epoch = 0
            self.step = 0
            self.t0 = 0.0
            self.waited: pressure.Reading | None = None
            self.epoch_t0 = 0.0
            self.epoch_step0 = 0
            self.reached = False
            self.samples = 0  # every worker counts the same global batches, so all stop at the same step

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.epoch = epoch
            self.epoch_t0 = time.perf_counter()
            self.epoch_step0 = self.step

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self.waited = pressure.at_start()
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            total = time.perf_counter() - self.t0
            data_t = min(timing["data"], total)
            # fit's compiled step holds forward, backward, the all-reduce and the update: compute here is all of
            # them, and communication and the optimizer are unknown (absent), never 0
            contention = pressure.waited(self.waited, pressure.now())
            warmup = self.step < budget.warmup_steps
            w.step(epoch=self.epoch, step=self.step, samples=local, t_total=total, t_data=data_t,
                   t_compute=total - data_t, comm_measured=False, warmup=warmup, **contention)  # fmt: skip
            self.step += 1
            self.samples += local * world.world_size
            if budget.spent(self.samples):
                self.model.stop_training = True  # Keras ends the epoch after this step

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            logs = logs or {}
            seconds = time.perf_counter() - self.epoch_t0
            w.epoch(epoch=epoch, train_loss=float(logs.get("loss", float("nan"))), train_accuracy=float(logs.get(
                "accuracy", float("nan"))), samples=(self.step - self.epoch_step0) * local, t_total=seconds)  # fmt: skip
            if not budget.evaluates(epoch, last=epoch == budget.epochs - 1 or self.model.stop_training):
                return
            acc = {}
            for split in ("train", "validation"):
                x, y = data[split]
                acc[split] = float(self.model.evaluate(x, y, batch_size=256, verbose=0)[1])
                if world.is_main:
                    w.eval(split=split, metric="accuracy", value=acc[split], samples=len(y), epoch=epoch)
            if budget.target is not None and acc["validation"] >= budget.target:
                self.reached = True
                self.model.stop_training = True

    return Events()


def run() -> None:
    run_entry(main)


if __name__ == "__main__":
    run()
