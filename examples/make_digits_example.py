"""Make the bundled example campaign: real data-parallel PyTorch training runs on scikit-learn's digits.

This is how ``examples/digits-ddp/`` was made (the README's main command ingests it), and a
small demonstration of the event contract; the full runners come with the runners issue.

Each run trains an MLP (64-128-10) on the 8x8 digits images (1,797 samples: 1,257 train /
270 validation / 270 test, split once with a fixed seed) with plain SGD, data-parallel over
N ranks with the ``gloo`` backend: each rank takes its shard of every global batch, the
gradients are averaged with an explicit ``all_reduce`` (timed as communication), and every
rank writes its events with :class:`honestscale.events.EventWriter`.

    pip install torch==2.13.0 scikit-learn
    python examples/make_digits_example.py --out examples/digits-ddp --workers 1 2 --repeats 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from honestscale.events import EventWriter

GLOBAL_BATCH = 64
EPOCHS = 40
LR = 0.1


def _split() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    x_train, x_rest, y_train, y_rest = train_test_split(x, y, test_size=540, random_state=0, stratify=y)
    x_val, x_test, y_val, y_test = train_test_split(
        x_rest, y_rest, test_size=270, random_state=0, stratify=y_rest
    )
    return {
        name: (torch.from_numpy(a), torch.from_numpy(b).long())
        for name, a, b in (
            ("train", x_train, y_train),
            ("validation", x_val, y_val),
            ("test", x_test, y_test),
        )
    }


def _accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def _sampler(writer: EventWriter, stop: threading.Event, interval: float) -> None:
    page = os.sysconf("SC_PAGE_SIZE")
    last_cpu, last_t = time.process_time(), time.perf_counter()
    while not stop.wait(interval):
        cpu, now = time.process_time(), time.perf_counter()
        rss = int(Path("/proc/self/statm").read_text().split()[1]) * page
        writer.system(
            cpu_percent=100.0 * (cpu - last_cpu) / (now - last_t), rss_bytes=rss, host_load=os.getloadavg()[0]
        )
        last_cpu, last_t = cpu, now


def _git_commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _worker(rank: int, world: int, out: str, run_id: str, seed: int, port: int, campaign: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    data = _split()
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    local = GLOBAL_BATCH // world
    config = {"model": "mlp-64-128-10", "dataset": "digits", "global_batch_size": GLOBAL_BATCH, "lr": LR,
              "epochs": EPOCHS, "optimizer": "sgd+momentum0.9", "world_size": world}  # fmt: skip
    with EventWriter(out, run_id, rank) as w:
        w.run_start(
            campaign=campaign, name=f"mlp-digits-{world}w", purpose="final", framework="torch",
            framework_version=torch.__version__, launcher="local", backend="gloo", world_size=world, nodes=1,
            accelerators_per_node=0, system=platform.node(), cpu=platform.processor() or platform.machine(),
            software={"python": platform.python_version(), "numpy": np.__version__}, model="mlp-64-128-10",
            model_params=sum(p.numel() for p in model.parameters()), dataset="digits",
            train_size=len(data["train"][1]), validation_size=len(data["validation"][1]),
            test_size=len(data["test"][1]), data_source="in_memory", input_shape=[64],
            global_batch_size=GLOBAL_BATCH, local_batch_size=local, optimizer="sgd", learning_rate=LR,
            lr_schedule="constant", precision="fp32", grad_compression="none", seed=seed,
            stop_criterion="epochs", stop_value=EPOCHS, target_metric="accuracy", scope="end_to_end",
            scaling="strong", config_hash=hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16],
            git_commit=_git_commit(), hyperparameters={"momentum": 0.9}, command=["python", *sys.argv],
        )  # fmt: skip
        stop = threading.Event()
        sampler = threading.Thread(target=_sampler, args=(w, stop, 0.1), daemon=True)
        sampler.start()
        x_train, y_train = data["train"]
        g = torch.Generator().manual_seed(seed)
        step = 0
        for epoch in range(EPOCHS):
            t_epoch = time.perf_counter()
            order = torch.randperm(len(y_train), generator=g)
            losses, seen = [], 0
            for start in range(0, len(order) - GLOBAL_BATCH + 1, GLOBAL_BATCH):
                t0 = time.perf_counter()
                idx = order[start + rank * local : start + (rank + 1) * local]
                xb, yb = x_train[idx], y_train[idx]
                t1 = time.perf_counter()
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xb), yb)
                loss.backward()  # type: ignore[no-untyped-call]
                t2 = time.perf_counter()
                if world > 1:
                    grads = [p.grad for p in model.parameters() if p.grad is not None]
                    flat = torch.cat([grad.reshape(-1) for grad in grads])
                    dist.all_reduce(flat)
                    flat /= world
                    off = 0
                    for grad in grads:
                        n = grad.numel()
                        grad.copy_(flat[off : off + n].view_as(grad))
                        off += n
                t3 = time.perf_counter()
                opt.step()
                t4 = time.perf_counter()
                w.step(epoch=epoch, step=step, samples=len(yb), t_total=t4 - t0, t_data=t1 - t0,
                       t_compute=t2 - t1, t_comm=t3 - t2, t_optimizer=t4 - t3, comm_measured=world > 1,
                       warmup=step < 2)  # fmt: skip
                losses.append(loss.item())
                seen += len(yb)
                step += 1
            w.epoch(epoch=epoch, train_loss=float(np.mean(losses)), samples=seen,
                    train_accuracy=_accuracy(model, x_train, y_train), t_total=time.perf_counter() - t_epoch)  # fmt: skip
            if rank == 0 and (epoch % 10 == 9 or epoch == EPOCHS - 1):
                for split in (
                    ("train", "validation") if epoch < EPOCHS - 1 else ("train", "validation", "test")
                ):
                    xs, ys = data[split]
                    w.eval(split=split, metric="accuracy", value=_accuracy(model, xs, ys), samples=len(ys),
                           epoch=epoch)  # fmt: skip
        stop.set()
        sampler.join()
        dist.barrier()
        w.run_stop("success")
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="examples/digits-ddp")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--campaign", default="digits-ddp-example")
    args = ap.parse_args()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for world in args.workers:
        for rep in range(args.repeats):
            run_id = f"digits-mlp-{world}w-r{rep}-{stamp}"
            seed = 1000 + rep
            mp.spawn(  # type: ignore[attr-defined,no-untyped-call]
                _worker, args=(world, args.out, run_id, seed, _free_port(), args.campaign), nprocs=world
            )
            print(f"wrote {args.out}/{run_id}")


if __name__ == "__main__":
    main()
