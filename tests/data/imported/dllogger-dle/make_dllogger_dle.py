"""A DLLogger log written by NVIDIA DeepLearningExamples' own image-classification code (PyTorch/Classification/
ConvNets), on the CPU, and beside it what the training measured, recorded as it was logged (``expected.json``).

Nothing of the logging is imitated: the log is written by DLE's ``image_classification.logger.Logger``,
``TrainingMetrics`` and ``ValidationMetrics`` (their DEFAULT and VERBOSE metrics, two ``dllogger.log`` calls per
iteration), driven by DLE's ``train_loop`` / ``train`` / ``validate`` with DLE's ``Executor`` and ``Trainer``, set
up as ``main.py``'s ``prepare_for_training`` does (the arguments parsed by main.py's own ``add_parser_arguments``,
the same two backends, the same two PARAMETER calls), with the real dllogger package. Both are imported from
their repositories, never copied here::

    git --git-dir=<DeepLearningExamples mirror> archive HEAD PyTorch/Classification/ConvNets | tar -x -C /tmp/dle-src
    git --git-dir=<dllogger mirror> archive HEAD | tar -x -C /tmp/dllogger-src
    python examples/record/digits_npz.py /tmp/digits.npz
    cd tests/data/imported/dllogger-dle && \\
    PYTHONPATH=/tmp/dllogger-src:/tmp/dle-src/PyTorch/Classification/ConvNets \\
        python make_dllogger_dle.py /tmp/digits.npz > dllogger-stdout.log

It writes into the folder it runs in. ``--print-freq N`` and ``--batch-size B`` (1 and 32 unless given) are passed on
to main.py's parser as they are; with ``--print-freq`` above 1 (DLE's convergence default is 20), ``expected.json``
also holds the per-iteration times and the rows DLE's ``Logger`` wrote (``logged_rows``, see ``_logged``)::

    cd tests/data/imported/dllogger-dle-pf20 && \\
    PYTHONPATH=... python ../dllogger-dle/make_dllogger_dle.py /tmp/digits.npz --print-freq 20 --batch-size 16 \\
        > dllogger-stdout.log

What DLE cannot do on a CPU-only machine, and what this script puts in its place (README.md says the same):

* ``main.py`` itself cannot be imported (its data loaders need torchvision and DALI): its ``add_parser_arguments``
  is read from main.py and run, and ``prepare_for_training``'s steps are done here in its order;
* the data are scikit-learn's digits (1x8x8 images, 10 classes) in plain ``DataLoader``s (DLE's PyTorch loader
  keeps ``drop_last=True`` for training, ``False`` for validation: so do these), the model a small CNN;
* ``torch.cuda.synchronize`` (called by DLE's ``train_step`` and ``validate``) is a no-op, and numpy 2.4's
  ``np.quantile`` is given back the ``interpolation=`` keyword DLE's ``QuantileMeter`` still passes (numpy
  renamed it ``method=`` and removed the old name; the same computation);
* ConvNets' ``main()`` measures the experiment's duration (``exp_duration``) but never logs it: it is logged as
  BERT's ``run_pretraining.py`` logs its own (``e2e_train_time``, ``raw_train_time``, units from
  ``dllogger.metadata(..., {"unit": "s"})``), in a last ``step=tuple()`` row.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import time
from pathlib import Path
from typing import Any

import dllogger  # type: ignore[import-not-found]
import image_classification  # type: ignore[import-not-found]
import image_classification.logger as log  # type: ignore[import-not-found]
import image_classification.training as training  # type: ignore[import-not-found]
import numpy as np
import torch
from image_classification.gpu_affinity import AffinityMode  # type: ignore[import-not-found]
from image_classification.optimizers import (  # type: ignore[import-not-found]
    get_optimizer,
    lr_cosine_policy,
)

ARCH = "digits_cnn"
CONVNETS = Path(image_classification.__file__).resolve().parent.parent
_quantile = np.quantile


def _np_quantile(a: Any, q: Any, *args: Any, interpolation: str | None = None, **kwargs: Any) -> Any:
    """numpy < 2.4's ``np.quantile(..., interpolation=)``: renamed ``method=``, the same computation."""
    if interpolation is not None:
        kwargs["method"] = interpolation
    return _quantile(a, q, *args, **kwargs)


def _main_parser() -> argparse.ArgumentParser:
    """main.py's own ``add_parser_arguments``, read from main.py and run (main.py cannot be imported here)."""
    tree = ast.parse((CONVNETS / "main.py").read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "add_parser_arguments"]
    scope: dict[str, Any] = {
        "DATA_BACKEND_CHOICES": ["pytorch", "synthetic"],  # dataloaders.py's list without DALI
        "AffinityMode": AffinityMode,
        "available_models": lambda: {ARCH: None},
    }
    exec(compile(ast.Module([fn], []), str(CONVNETS / "main.py"), "exec"), scope)
    parser = argparse.ArgumentParser(description="PyTorch ImageNet Training")
    scope["add_parser_arguments"](parser)
    return parser


class Model(torch.nn.Module):
    def __init__(self, num_classes: int, width: int) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, width, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(width, 2 * width, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
        )
        self.fc = torch.nn.Linear(2 * width * 16, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).flatten(1))  # type: ignore[no-any-return]


class Timed:
    """A loader that notes the wall clock at each batch asked for and each batch's size (this script's own clock,
    not the log's): an iteration's wall time is from its batch's request to the next one's."""

    def __init__(
        self, loader: torch.utils.data.DataLoader[Any], clock: list[list[float]], sizes: list[int]
    ) -> None:
        self.loader, self.clock, self.sizes = loader, clock, sizes

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Any:
        ticks: list[float] = []
        self.clock.append(ticks)
        for x, y in self.loader:
            ticks.append(time.time())
            self.sizes.append(int(x.size(0)))
            yield x, y
        ticks.append(time.time())


calls: list[dict[str, Any]] = []  # every TrainingMetrics.log call, as DLE's train() made it


class RecordedTrainingMetrics(log.TrainingMetrics):  # type: ignore[misc]
    """DLE's TrainingMetrics, noting what ``train()`` hands it and the logger's step key when it does."""

    def log(self, **kwargs: Any) -> None:
        calls.append({"step": [self.logger.epoch, self.logger.iteration], **kwargs})
        super().log(**kwargs)


rows: list[dict[str, Any]] = []  # every training row DLE's Logger wrote: its key, what its means average


class RecordedLogger(log.Logger):  # type: ignore[misc]
    """DLE's Logger, noting each training row its ``end_iteration`` writes (a row resets the iteration meters): the
    step key, and how many of ``train()``'s calls its means average (the meter's own count), ending with the last."""

    def end_iteration(self, mode: str = "train") -> None:
        meter = self.metrics["train.data_time"]["meter"].iteration_aggregator if mode == "train" else None
        pending = meter.n if meter is not None else 0
        super().end_iteration(mode=mode)
        if pending and meter is not None and meter.n == 0:
            rows.append(
                {"step": [self.epoch, self.iteration], "iterations": pending, "calls_until": len(calls)}
            )


def _logged(sizes: list[int]) -> dict[str, Any]:
    """The training rows DLE logged, each with what the script measured of the iterations it averages (its count,
    samples, summed phase times), and those totals over every logged row; the iterations no row covers (an
    epoch's last ones after its last multiple of ``--print-freq``: only its ``[epoch]`` means hold them)."""
    got = []
    for r in rows:
        covered = range(r["calls_until"] - r["iterations"], r["calls_until"])
        got.append({"step": r["step"], "iterations": r["iterations"], "samples": sum(sizes[i] for i in covered),
                    "data_time_s": sum(calls[i]["data_time"] for i in covered),
                    "compute_time_s": sum(calls[i]["compute_time"] for i in covered)})  # fmt: skip
    return {
        "logged_rows": got,
        "logged_iterations": sum(r["iterations"] for r in got),
        "logged_samples": sum(r["samples"] for r in got),
        "logged_data_time_sum_s": sum(r["data_time_s"] for r in got),
        "logged_compute_time_sum_s": sum(r["compute_time_s"] for r in got),
        "unlogged_step_keys": [c["step"] for i, c in enumerate(calls)
                               if not any(r["calls_until"] - r["iterations"] <= i < r["calls_until"] for r in rows)],
        "data_time_s": [c["data_time"] for c in calls],
        "compute_time_s": [c["compute_time"] for c in calls],
    }  # fmt: skip


def _own_arguments() -> argparse.Namespace:
    """The data, and the two of main.py's arguments this script lets vary (the first fixture's values by default)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--print-freq", default="1")
    parser.add_argument("--batch-size", default="32")
    return parser.parse_args()


def main() -> None:
    np.quantile = _np_quantile
    torch.cuda.synchronize = lambda device=None: None
    training.TrainingMetrics = RecordedTrainingMetrics
    own = _own_arguments()
    data_path = own.data
    args, rest = _main_parser().parse_known_args(
        [data_path, "--arch", ARCH, "--data-backend", "pytorch", "--epochs", "3", "--batch-size", own.batch_size,
         "--lr", "0.1", "--lr-schedule", "cosine", "--momentum", "0.9", "--weight-decay", "5e-4",
         "--print-freq", own.print_freq, "--seed", "0", "--workers", "0", "--no-checkpoints", "--workspace", ".",
         "--raport-file", "dllogger.json", "--topk", "5"]
    )  # fmt: skip
    assert not rest, rest
    exp_start_time = time.time()  # ConvNets' main(), after the arguments: the experiment's clock starts here
    model_args = argparse.Namespace(num_classes=10, width=16)
    # prepare_for_training, in its order
    args.distributed, args.local_rank, args.gpu, args.world_size = False, 0, 0, 1
    torch.manual_seed(args.seed + args.local_rank)
    np.random.seed(seed=args.seed + args.local_rank)
    batch_size_multiplier = 1  # args.optimizer_batch_size < 0
    model = Model(**model_args.__dict__)
    scaler = torch.amp.GradScaler("cuda", init_scale=args.static_loss_scale, growth_factor=2, backoff_factor=0.5,
                                  growth_interval=100, enabled=args.amp)  # fmt: skip
    executor = training.Executor(model, torch.nn.CrossEntropyLoss(), cuda=False, amp=args.amp, scaler=scaler,
                                 divide_loss=batch_size_multiplier, ts_script=args.jit == "script")  # fmt: skip
    data = np.load(data_path)
    x = torch.tensor(data["x_train"]).reshape(-1, 1, 8, 8)
    xv = torch.tensor(data["x_validation"]).reshape(-1, 1, 8, 8)
    shuffle = torch.Generator().manual_seed(args.seed)
    clock: list[list[float]] = []
    sizes: list[int] = []
    train_loader = Timed(
        torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, torch.tensor(data["y_train"])),
                                    batch_size=args.batch_size, shuffle=True, drop_last=True, generator=shuffle),
        clock, sizes,
    )  # fmt: skip
    val_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(xv, torch.tensor(data["y_validation"])), batch_size=args.batch_size,
        drop_last=False,
    )  # fmt: skip
    logger = RecordedLogger(
        args.print_freq,
        [
            dllogger.StdOutBackend(dllogger.Verbosity.DEFAULT, step_format=log.format_step),
            dllogger.JSONStreamBackend(
                dllogger.Verbosity.VERBOSE, str(Path(args.workspace) / args.raport_file)
            ),
        ],
        start_epoch=-1,
    )
    # BERT's run_pretraining.py, right after its dllogger.init: the units of the times it logs at the end
    dllogger.metadata("e2e_train_time", {"unit": "s"})
    dllogger.metadata("raw_train_time", {"unit": "s"})
    logger.log_parameter(args.__dict__, verbosity=dllogger.Verbosity.DEFAULT)
    logger.log_parameter({f"model.{k}": v for k, v in model_args.__dict__.items()},
                         verbosity=dllogger.Verbosity.DEFAULT)  # fmt: skip
    optimizer = get_optimizer(list(executor.model.named_parameters()), args.lr, args=args, state=None)
    lr_policy = lr_cosine_policy(args.lr, args.warmup, args.epochs, end_lr=args.end_lr)
    trainer = training.Trainer(executor, optimizer, grad_acc_steps=batch_size_multiplier, ema=args.use_ema)
    train_start = time.time()
    training.train_loop(
        trainer, lr_policy, train_loader, len(train_loader), val_loader, logger, start_epoch=0,
        end_epoch=args.epochs, early_stopping_patience=args.early_stopping_patience, best_prec1=0, prof=args.prof,
        skip_training=args.evaluate, skip_validation=args.training_only,
        save_checkpoints=args.save_checkpoints and not args.evaluate, checkpoint_dir=args.workspace,
        checkpoint_filename=args.checkpoint_filename, keep_last_n_checkpoints=args.gather_checkpoints, topk=args.topk,
    )  # fmt: skip
    raw_train_time = time.time() - train_start
    exp_duration = time.time() - exp_start_time
    logger.end()
    # BERT's `step=tuple()` (ruff: `()`, the same tuple)
    dllogger.log(step=(), data={"e2e_train_time": exp_duration, "raw_train_time": raw_train_time})
    dllogger.flush()
    # what the training measured, noted as it went (never read back from the log)
    executor.model.eval()
    with torch.no_grad():
        top1 = (executor.model(xv).argmax(1) == torch.tensor(data["y_validation"])).float().mean().item()
    walls = [b - a for ticks in clock for a, b in itertools.pairwise(ticks)]
    assert len(walls) == len(sizes) == len(calls)
    expected = {
        "iterations": len(calls), "epochs": args.epochs,
        # DLE's end_iteration makes one dllogger.log call per verbosity level of the training metrics
        "log_rows_per_iteration": len({m["level"] for n, m in logger.metrics.items() if n.startswith("train")}),
        "samples_per_iteration": args.batch_size, "samples_total": sum(sizes), "samples": sizes,
        "step_keys": [c["step"] for c in calls],
        "data_time_sum_s": sum(c["data_time"] for c in calls),
        "compute_time_sum_s": sum(c["compute_time"] for c in calls),
        "iteration_wall_s": walls,
        "steady_samples_per_s": sum(sizes[1:]) / sum(walls[1:]),
        "steady_from": "this script's clock: each iteration from its batch's request to the next request (the "
                       "end of the epoch's loader for its last), the first iteration left out",
        "final_top1": top1,
        "final_top1_from": "the trained model on the validation split, argmax == label, computed here",
        "e2e_train_time_s": exp_duration, "e2e_from": "ConvNets main()'s exp_start_time to after train_loop",
        "raw_train_time_s": raw_train_time, "raw_from": "train_loop's wall time (training and validation)",
        "validation_samples": len(xv), "validation_batches": len(val_loader) * args.epochs,
    }  # fmt: skip
    if args.print_freq > 1:
        expected.update(print_freq=args.print_freq, iterations_per_epoch=len(train_loader), **_logged(sizes))
    Path("expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
