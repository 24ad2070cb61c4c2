"""What recording costs a user's training: each callback (and the plain recorder) against the same training without
it, alternating blocks in one process, one rank on the CPU.

A block is one ``fit`` (``trainer.train()``, a loop of steps) of ``--skip`` + ``--steps`` steps; a stopwatch present
in both kinds (a callback of its own, or two clock reads in the plain loop) times the ``--steps`` steps after the
first ``--skip``, so both kinds measure the same steady-state steps and the recorder's one-off start (run_start: the
git commit, the environment, the sampler thread) is printed apart, not spread over a short block. The figure is the
ratio of the median per-step times, with each pair of blocks' ratio beside it: on a shared machine a ratio below 1
is noise, never a speedup. Goal: at most 1.01.

    python benchmarks/callback_overhead.py --framework lightning|hf|plain [--blocks 8] [--steps 60]
    .venv-tf/bin/python benchmarks/callback_overhead.py --framework keras
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks._alternate import alternate, overhead_figures, paired  # noqa: E402
from benchmarks._results import Session  # noqa: E402

Block = Callable[[bool], float]


def _window(skip: int, steps: int) -> tuple[Callable[[], None], Callable[[], None], Callable[[], float]]:
    """A stopwatch over steps skip .. skip+steps: call ``begin`` at each step's start, ``end`` at its end."""
    state = {"n": 0, "t0": 0.0, "t1": 0.0}

    def begin() -> None:
        if state["n"] == skip:
            state["t0"] = time.perf_counter()

    def end() -> None:
        state["n"] += 1
        if state["n"] == skip + steps:
            state["t1"] = time.perf_counter()

    def per_step() -> float:
        got = (state["t1"] - state["t0"]) / steps
        state["n"] = 0
        return got

    return begin, end, per_step


def lightning(args: argparse.Namespace, out: str) -> Block:
    import lightning.pytorch as pl
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from honestscale.record.lightning import HonestscaleCallback

    begin, end, per_step = _window(args.skip, args.steps)

    class Stopwatch(pl.Callback):  # type: ignore[misc]
        def on_train_batch_start(self, *a: Any) -> None:
            begin()

        def on_train_batch_end(self, *a: Any) -> None:
            end()

    class Net(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                                           torch.nn.ReLU(), torch.nn.Linear(2048, 10))  # fmt: skip

        def training_step(self, batch: list[torch.Tensor], i: int) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(self.net(batch[0]), batch[1])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    n = (args.skip + args.steps) * 128
    data = DataLoader(TensorDataset(torch.randn(n, 512), torch.randint(0, 10, (n,))), batch_size=128)
    model = Net()

    def block(instrumented: bool) -> float:
        callbacks: list[Any] = [Stopwatch()]
        if instrumented:
            callbacks.append(HonestscaleCallback(out=out, campaign="overhead", sample_interval=0.1))
        trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=1, logger=False, callbacks=callbacks,
                             enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)  # fmt: skip
        trainer.fit(model, data)
        return per_step()

    return block


def hf(args: argparse.Namespace, out: str) -> Block:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    from honestscale.record.hf import HonestscaleCallback

    begin, end, per_step = _window(args.skip, args.steps)

    class Stopwatch(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            begin()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            end()

    class Rows(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
        def __len__(self) -> int:
            return int((args.skip + args.steps) * 8)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            ids = torch.randint(0, 256, (128,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=128, n_embd=256, n_layer=4, n_head=4))

    def block(instrumented: bool) -> float:
        callbacks: list[Any] = [Stopwatch()]
        if instrumented:
            callbacks.append(HonestscaleCallback(out=out, campaign="overhead", sample_interval=0.1))
        targs = TrainingArguments(output_dir=out, per_device_train_batch_size=8, num_train_epochs=1, save_strategy="no",
                                  report_to="none", use_cpu=True, disable_tqdm=True, logging_strategy="no")  # fmt: skip
        Trainer(model=model, args=targs, train_dataset=Rows(), callbacks=callbacks).train()
        return per_step()

    return block


def keras(args: argparse.Namespace, out: str) -> Block:
    import keras as k
    import numpy as np

    from honestscale.record.keras import HonestscaleCallback

    begin, end, per_step = _window(args.skip, args.steps)

    class Stopwatch(k.callbacks.Callback):  # type: ignore[misc]
        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            begin()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            end()

    n = (args.skip + args.steps) * 128
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((n, 512), dtype=np.float32), rng.integers(0, 10, n)
    model = k.Sequential([k.Input((512,)), k.layers.Dense(2048, activation="relu"),
                          k.layers.Dense(2048, activation="relu"), k.layers.Dense(10)])  # fmt: skip
    model.compile(
        optimizer=k.optimizers.SGD(0.01), loss=k.losses.SparseCategoricalCrossentropy(from_logits=True)
    )

    def block(instrumented: bool) -> float:
        callbacks: list[Any] = [Stopwatch()]
        if instrumented:
            callbacks.append(
                HonestscaleCallback(batch_size=128, out=out, campaign="overhead", sample_interval=0.1)
            )
        model.fit(x, y, batch_size=128, epochs=1, verbose=0, callbacks=callbacks)
        return per_step()

    return block


def plain(args: argparse.Namespace, out: str) -> Block:
    import torch

    import honestscale.record

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                              torch.nn.ReLU(), torch.nn.Linear(2048, 10))  # fmt: skip
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    batches = [(torch.randn(128, 512), torch.randint(0, 10, (128,))) for _ in range(8)]

    def train(x: torch.Tensor, y: torch.Tensor) -> None:
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    def block(instrumented: bool) -> float:
        total = args.skip + args.steps
        rec = honestscale.record.start(out=out, framework="torch", campaign="overhead", sample_interval=0.1,
                                       handle_signals=False) if instrumented else None  # fmt: skip
        t0 = 0.0
        for i in range(total):
            if i == args.skip:
                t0 = time.perf_counter()
            x, y = batches[i % len(batches)]
            if rec is None:
                train(x, y)
                continue
            with rec.step(samples=len(x)) as s:
                with s.phase("compute"):
                    loss = torch.nn.functional.cross_entropy(net(x), y)
                    loss.backward()
                with s.phase("optimizer"):
                    opt.step()
                    opt.zero_grad()
        per = (time.perf_counter() - t0) / int(args.steps)
        if rec is not None:
            rec.stop()
        return per

    return block


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", required=True, choices=["lightning", "hf", "keras", "plain"])
    ap.add_argument("--blocks", type=int, default=8, help="blocks of each kind (they alternate)")
    ap.add_argument("--steps", type=int, default=60, help="steps timed per block")
    ap.add_argument("--skip", type=int, default=5, help="steps before the timed ones, per block")
    ap.add_argument("--record", action="store_true", help="append the figures to benchmarks/results.jsonl")
    args = ap.parse_args()
    session = Session("callback_overhead")
    with tempfile.TemporaryDirectory() as out:
        block = {"lightning": lightning, "hf": hf, "keras": keras, "plain": plain}[args.framework](args, out)
        t0 = time.perf_counter()
        import honestscale.record as record

        rec = record.start(
            out=out, framework="torch", campaign="overhead-start", sample_interval=0.1, handle_signals=False
        )
        started = time.perf_counter() - t0
        rec.stop()
        plain_s, instrumented = alternate(block, args.blocks)
        runs = sum(1 for _ in Path(out).glob("*/events-rank0.jsonl"))
    p, q = statistics.median(plain_s), statistics.median(instrumented)
    pairs = [b / a for a, b in zip(plain_s, instrumented, strict=True)]
    print(f"{args.framework}: {args.blocks} blocks of each kind, alternating, {args.steps} steps timed in each "
          f"(after {args.skip}); {runs} runs recorded")  # fmt: skip
    print(
        f"without the recorder : {p * 1e3:.3f} ms a step (median of blocks; {min(plain_s) * 1e3:.2f}-{max(plain_s) * 1e3:.2f})"
    )
    print(f"with it              : {q * 1e3:.3f} ms a step ({min(instrumented) * 1e3:.2f}-{max(instrumented) * 1e3:.2f}; "
          "sampler every 0.1 s)")  # fmt: skip
    print(f"ratio with/without   : {q / p:.4f}  (goal <= 1.01; block pairs {min(pairs):.3f}-{max(pairs):.3f}: a ratio "
          "below 1 is the machine's noise, not a speedup)")  # fmt: skip
    print(
        f"start(), once a run  : {started * 1e3:.1f} ms (run_start: environment, git commit, sampler thread)"
    )
    got = paired(plain_s, instrumented)
    print(got.line())
    session.finish(overhead_figures("callback_overhead", args.framework, got, 1.01, q * 1e3), args.record)


if __name__ == "__main__":
    main()
