"""MXNet Gluon runner: data-parallel training through the kvstore ``dist_sync``, writing honestscale events.

MXNet 1.9.1 is the last release: the project was retired to the Apache Attic in 2023. It runs on Python 3.11
only with ``numpy<1.24``, so it lives in its own environment (``./.venv-mx``), which needs only this module,
the event contract and the instrumentation (standard library), never the store or the report.

One process per worker, like the other runners: ``honestscale run --framework mxnet --workers N`` or
``srun``. MXNet's parameter server needs a scheduler and servers beside the workers; they are derived from
the launcher: rank 0 also starts the scheduler, and local rank 0 of every node starts one server, as
child processes that end with the job (``DMLC_*`` variables already set by the caller win).

    python -m honestscale.runners.mxnet_gluon --model mlp --dataset digits --epochs 3 --out runs/

MXNet's engine is asynchronous: each step waits for its work (``waitall``) at the end of each part, so
data, compute (forward + backward), communication (the kvstore push/pull of the gradients, nothing else
overlaps it) and optimizer (the update on the worker) are each measured, at the cost of that overlap.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from honestscale.record import world as _world
from honestscale.runners._loop import Budget, Done, Loop, check_target
from honestscale.runners._run_start import Data, Framework, Model, Sizes, Stop, Threads
from honestscale.runners.instrument import (
    POSITIVE_INT,
    HostClock,
    Recorder,
    StepTimer,
    add_recording_args,
    add_training_args,
    base_software,
    environment,
    run_entry,
    run_start_fields,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m honestscale.runners.mxnet_gluon", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    g = p.add_argument_group("what to train")
    g.add_argument("--model", default="mlp", choices=["mlp", "cnn"], help="(default: mlp)")
    g.add_argument("--dataset", default="digits", choices=["digits", "synthetic", "memmap"],
                   help="digits (scikit-learn, offline), synthetic, or memmap ({train,validation,test}_{x,y}.npy "
                        "in --data-path) (default: digits)")  # fmt: skip
    g.add_argument("--data-path", type=Path, help="folder of a memmap dataset")
    g.add_argument(
        "--synthetic-size", type=POSITIVE_INT, default=10000, help="train samples of the synthetic dataset"
    )
    add_training_args(p)
    add_recording_args(p)
    return p


def _parameter_server(world: _world.World) -> list[subprocess.Popen[bytes]]:
    """Set this worker's DMLC_* variables; start the scheduler (rank 0) and this node's server (local rank 0)."""
    env = {
        "DMLC_PS_ROOT_URI": world.master_addr,
        "DMLC_PS_ROOT_PORT": str(world.master_port),
        "DMLC_NUM_SERVER": str(world.nodes),
        "DMLC_NUM_WORKER": str(world.world_size),
    }
    if world.master_addr in ("127.0.0.1", "localhost"):
        env["DMLC_NODE_HOST"] = "127.0.0.1"
    for k, v in env.items():
        os.environ.setdefault(k, v)
    children = []
    roles = (["scheduler"] if world.is_main else []) + (["server"] if world.local_rank == 0 else [])
    for role in roles:
        child_env = dict(os.environ, DMLC_ROLE=role, OMP_NUM_THREADS="1")
        # importing mxnet with DMLC_ROLE=scheduler|server runs that role until the workers finish
        children.append(subprocess.Popen([sys.executable, "-c", "import mxnet"], env=child_env,
                                         stdin=subprocess.DEVNULL, start_new_session=True))  # fmt: skip
    os.environ["DMLC_ROLE"] = "worker"
    return children


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _mxnet_threads() -> tuple[int | None, int | None]:
    """MXNet's threads per worker, from the environment it reads them from (it has no call that reports them):
    OpenMP threads per operator (OMP_NUM_THREADS; unknown when unset: MXNet then picks by the cores), and the
    engine's CPU worker threads that run operators at once (MXNET_CPU_WORKER_NTHREADS, 1 unless set)."""
    inter = _env_int("MXNET_CPU_WORKER_NTHREADS")
    return _env_int("OMP_NUM_THREADS"), 1 if inter is None else inter


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        world = _world.discover()
    except _world.WorldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.batch_size % world.world_size:
        print(f"error: --batch-size {args.batch_size} (global) is not divisible by the {world.world_size} workers; "
              f"use a multiple of {world.world_size}", file=sys.stderr)  # fmt: skip
        return 2
    if args.dataset == "memmap" and args.data_path is None:
        print("error: --dataset memmap needs --data-path FOLDER", file=sys.stderr)
        return 2
    run_id = args.run_id or (
        f"{args.name or args.model}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        if world.world_size == 1
        else None
    )
    if run_id is None:
        print("error: --run-id is needed with more than one worker", file=sys.stderr)
        return 2
    children = _parameter_server(world) if world.world_size > 1 else []
    try:
        with Recorder(args.out, run_id, world, sample_interval=args.sample_interval) as rec:
            _train(args, world, rec)
    finally:
        # ps-lite's scheduler and servers would wait for a finalize that os._exit skips: every worker passed a
        # kvstore barrier after its last exchange, so they are stopped (after a short grace for in-flight replies)
        time.sleep(1.0 if children else 0.0)
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
    return 0


def _arrays(args: argparse.Namespace) -> tuple[dict[str, Any], str, str | None]:
    from honestscale.runners import data as datasets

    if args.dataset == "digits":
        return datasets.digits_arrays(), "in_memory", None
    if args.dataset == "memmap":
        return datasets.memmap_arrays(args.data_path), "filesystem", str(args.data_path)
    return datasets.synthetic_arrays(args.synthetic_size), "synthetic", None


def _train(args: argparse.Namespace, world: _world.World, rec: Recorder) -> None:
    import mxnet as mx
    import numpy as np
    from mxnet import autograd, gluon

    mx.random.seed(args.seed)
    np.random.seed(args.seed)
    data, source, path = _arrays(args)
    x_train, y_train = data["train"]
    shape = tuple(int(d) for d in x_train.shape[1:])
    classes = int(max(int(np.max(y)) for _x, y in data.values())) + 1
    net = gluon.nn.HybridSequential()
    if args.model == "cnn":
        net.add(gluon.nn.Conv2D(32, 3, padding=1, activation="relu"),
                gluon.nn.Conv2D(64, 3, padding=1, activation="relu"),
                gluon.nn.GlobalAvgPool2D())  # fmt: skip
    net.add(gluon.nn.Flatten(), gluon.nn.Dense(128, activation="relu"), gluon.nn.Dense(128, activation="relu"),
            gluon.nn.Dense(classes))  # fmt: skip
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net(mx.nd.zeros((1, *shape)))  # shapes are inferred on the first call
    net.hybridize()
    params = sum(int(np.prod(p.shape)) for p in net.collect_params().values() if p.grad_req != "null")
    kv = mx.kv.create("dist_sync") if world.world_size > 1 else None
    if kv is not None and (kv.rank != world.rank or kv.num_workers != world.world_size):
        # ps-lite numbers workers in the order they reach the scheduler: its rank decides the shard
        world = _world.World(**{**world.__dict__, "rank": kv.rank})
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": args.lr, "momentum": args.momentum},
                            kvstore=kv, update_on_kvstore=False)  # fmt: skip
    local = args.batch_size // world.world_size
    budget = Budget.of(args, args.target_accuracy)
    criterion, value = budget.criterion()
    rec.run_start(**run_start_fields(
        args, world, runner="honestscale.runners.mxnet_gluon", default_name=f"{args.model}-{args.dataset}-{world.world_size}w",
        environment=environment(world, Path(__file__), data_path=path),
        framework=Framework("mxnet", mx.__version__, "ps", base_software() | {"mxnet": mx.__version__, "numpy": np.__version__}),
        model=Model(args.model, params, tuple(shape)),
        data=Data(args.dataset, Sizes(len(y_train), len(data["validation"][1]), len(data["test"][1])), source, path,
                  local_batch_size=local),
        stop=Stop(criterion, float(value)), threads=Threads(*_mxnet_threads()),
    ))  # fmt: skip
    w = rec.writer
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    clock = HostClock()
    timer = StepTimer(clock)
    steps_per_epoch = len(y_train) // args.batch_size
    if steps_per_epoch == 0:
        raise ValueError(f"{len(y_train)} train samples give no full global batch of {args.batch_size}")
    flag_key = 1_000_000  # a kvstore key beside the trainer's parameter indices
    if kv is not None:
        kv.init(flag_key, mx.nd.zeros((1,)))

    def decide(flag: bool) -> bool:
        """Rank 0's decision, shared by every worker (a push/pull through the kvstore is a collective)."""
        if kv is None:
            return flag
        out = mx.nd.zeros((1,))
        kv.push(flag_key, mx.nd.array([1.0 if (flag and world.is_main) else 0.0]))
        kv.pull(flag_key, out=out)
        return bool(out.asscalar() > 0)

    def evaluate(split: str, epoch: int, limit: int | None = None) -> float:
        x, y = data[split]
        n = min(len(y), limit) if limit else len(y)
        correct = 0
        for i in range(0, n, 512):
            pred = net(mx.nd.array(np.asarray(x[i : min(i + 512, n)]))).argmax(axis=1).asnumpy()
            correct += int((pred.astype("int64") == np.asarray(y[i : min(i + 512, n)])).sum())
        acc = correct / max(n, 1)
        w.eval(split=split, metric="accuracy", value=acc, samples=n, epoch=epoch)
        return acc

    rng = np.random.default_rng(args.seed)

    def shard(order: Any, s: int) -> tuple[Any, Any]:
        """This worker's shard of global batch ``s``, on the device: the step's data time."""
        first = s * args.batch_size + world.rank * local
        idx = np.sort(order[first : first + local])
        xb, yb = mx.nd.array(np.asarray(x_train[idx])), mx.nd.array(np.asarray(y_train[idx]))
        mx.nd.waitall()
        return xb, yb

    def batches(epoch: int) -> Any:
        """The epoch's batches; its permutation is drawn here, before the first step is timed."""
        order = rng.permutation(len(y_train))  # the same permutation on every worker: each takes its shard
        return (shard(order, s) for s in range(steps_per_epoch))

    def train_step(batch: Any) -> Done:
        """Forward and backward, the kvstore's all-reduce (push/pull), the update; each part waited for, as the
        engine is asynchronous."""
        xb, yb = batch
        with autograd.record():
            loss = loss_fn(net(xb), yb)
        loss.backward()
        mx.nd.waitall()
        comm_from = clock.now()
        if kv is not None:
            trainer.allreduce_grads()
            mx.nd.waitall()
        timer.mark("compute")
        trainer.update(args.batch_size)  # gradients are summed over the global batch
        mx.nd.waitall()
        timer.mark("optimizer")
        return Done(loss=float(loss.mean().asscalar()), samples=local, comm_from=comm_from if kv else None)

    def train_and_validation(epoch: int, last: bool) -> float:
        evaluate("train", epoch, limit=10000)
        return evaluate("validation", epoch)

    loop = Loop(
        w,
        timer,
        budget,
        decide=decide,
        replicas=world.world_size,
        is_main=world.is_main,
        mean_loss=lambda losses: float(np.mean(losses)) if losses else None,
    )
    outcome = loop.run(
        batches,
        train_step,
        train_and_validation,
        lambda acc: acc >= float(args.target_accuracy),
        lambda epoch: evaluate("test", epoch),
    )
    if kv is not None:
        kv._barrier()  # every worker is past its last push/pull: the scheduler and servers may now be stopped
    check_target(outcome, budget)


def run() -> None:
    run_entry(main)


if __name__ == "__main__":
    run()
