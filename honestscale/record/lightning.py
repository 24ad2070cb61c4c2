"""``HonestscaleCallback`` for PyTorch Lightning (``pip install 'honestscale[lightning]'``).

::

    from honestscale.record.lightning import HonestscaleCallback

    trainer = L.Trainer(strategy="ddp", devices=2, callbacks=[HonestscaleCallback(campaign="mine", dataset="digits")])

Every process records its own file (no ``rank_zero_only``). What Lightning lets the callback see:

* steps: one per optimizer step (``accumulate_grad_batches`` batches; a second ``fit`` is a new run), its samples from each batch
  (``extract_batch_size``), its tokens where the batch is a mapping with ``input_ids`` (``attention_mask`` counted
  where there is one);
* phases: data from one batch's end to the next one's start (the loader, the transfer, the loop's own work between);
  compute to ``on_before_optimizer_step`` (backward's gradient all-reduce inside it: communication is unknown);
  optimizer to the batch's end (gradient clipping, which Lightning runs after that hook, included). Under manual
  optimisation the optimizer hook is the first ``optimizer.step``. Validation in mid-epoch belongs to no step;
* evaluations: the metrics logged during validation (``val_``/``valid_``/``validation_`` prefix, or ``/``) on rank 0,
  as the split ``validation`` (``acc`` named ``accuracy``, as the rules name it); with ``test=True`` the run stays open for ``trainer.test`` and its ``test_`` metrics.
  Rank 0's value: log with ``sync_dist=True`` for the mean over the ranks;
* world size and rank from the trainer, the strategy's name, its layout (DDP: dp, FSDP: fsdp) and its precision.

The run ends (run_stop) when fit ends, or after the test with ``test=True``; an exception Lightning hands to
``on_exception`` ends it as ``failed`` (Ctrl-C: ``cancelled``; SIGTERM: Lightning's own handling decides, the
callback sees the exception it raises).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from typing import Any

try:
    import lightning.pytorch as pl
except ImportError:  # the standalone package
    import pytorch_lightning as pl  # type: ignore[no-redef]

from honestscale.events import quality_name
from honestscale.record._hooks import Boundaries
from honestscale.record._lifecycle import RunTerminated
from honestscale.record._recorder import Recorder
from honestscale.record._start import start
from honestscale.record._step import defer
from honestscale.record.world import discover

_SPLITS = {"val": "validation", "valid": "validation", "validation": "validation", "test": "test"}
_PREFIX = re.compile(r"^(val|valid|validation|test)[_/](.+)$")
_PRECISION = {"32-true": "fp32", "64-true": "fp64", "16-true": "fp16", "bf16-true": "bf16", "16-mixed": "amp-fp16",
              "bf16-mixed": "amp-bf16", "transformer-engine": "fp8"}  # fmt: skip
_LAYOUT = {"DDPStrategy": "dp", "DDPSpawnStrategy": "dp", "DeepSpeedStrategy": "dp", "FSDPStrategy": "fsdp"}


def logged_metrics(metrics: dict[str, Any], split: str) -> dict[str, float]:
    """The metrics of ``split`` among Lightning's logged ones (``val_acc`` -> ``acc``), as numbers."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        found = _PREFIX.match(key)
        if found and _SPLITS[found.group(1)] == split:
            try:
                name = found.group(2).removesuffix("_epoch")
                out[quality_name(name)] = float(value)
            except (TypeError, ValueError):
                continue
    return out


def _batch_facts(batch: Any) -> tuple[int | None, Any]:
    extract_batch_size = importlib.import_module(f"{pl.__name__}.utilities.data").extract_batch_size
    try:
        samples = int(extract_batch_size(batch))
    except Exception:  # Lightning cannot tell: the step's samples stay unknown and the step is refused
        samples = None
    tokens = None
    if isinstance(batch, dict) and "input_ids" in batch:
        mask = batch.get("attention_mask")
        tokens = defer(mask.sum()) if mask is not None else int(batch["input_ids"].numel())
    return samples, tokens


def _strategy(trainer: Any) -> dict[str, Any]:
    strategy = trainer.strategy
    name = type(strategy).__name__
    facts: dict[str, Any] = {"strategy": name, "precision": str(trainer.precision),
                             "accumulate_grad_batches": int(trainer.accumulate_grad_batches)}  # fmt: skip
    stage = getattr(strategy, "config", None) or {}
    if name == "DeepSpeedStrategy" and isinstance(stage, dict):
        facts["zero_stage"] = stage.get("zero_optimization", {}).get("stage")
    return facts


class HonestscaleCallback(pl.Callback):  # type: ignore[misc]
    """Records the Lightning run of this process with :mod:`honestscale.record`; keywords go to
    :func:`honestscale.record.start` (campaign, model, dataset, target, out, run_id, ... and any run_start field)."""

    def __init__(self, *, test: bool = False, **start_kwargs: Any) -> None:
        super().__init__()
        self.test = test
        self.start_kwargs = start_kwargs
        self.recorder: Recorder | None = None
        self._bounds: Boundaries | None = None
        self._global_step = 0

    # -- the run --------------------------------------------------------------------------------------------------

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if self.recorder is not None and not self.recorder.writer.stopped:
            return  # a second fit: a new run
        world = dataclasses.replace(
            discover(), rank=int(trainer.global_rank), world_size=int(trainer.world_size)
        )
        strategy = _strategy(trainer)
        loader = trainer.train_dataloader
        local = getattr(loader, "batch_size", None)
        kw = dict(self.start_kwargs)
        kw.setdefault("model", type(pl_module).__name__)
        layout = _LAYOUT.get(strategy["strategy"])
        if layout is not None and world.world_size > 1:
            kw.setdefault("parallel", {layout: world.world_size})
        if local:  # per optimizer step, as the contract counts it
            kw.setdefault("local_batch_size", int(local) * strategy["accumulate_grad_batches"])
            kw.setdefault("global_batch", int(local) * world.world_size * strategy["accumulate_grad_batches"])
        dataset = getattr(loader, "dataset", None)
        if dataset is not None and hasattr(dataset, "__len__"):
            kw.setdefault("train_size", len(dataset))
        if (
            layout != "fsdp" and strategy["strategy"] != "DeepSpeedStrategy"
        ):  # sharded: the local count misleads
            kw.setdefault("model_params", sum(int(p.numel()) for p in pl_module.parameters()))
        if "target" not in kw and "stop_criterion" not in kw:
            if trainer.max_steps not in (-1, None) and kw.get("global_batch"):
                kw.update(stop_criterion="samples", stop_value=float(trainer.max_steps * kw["global_batch"]))
            elif trainer.max_epochs not in (-1, None):
                kw.update(stop_criterion="epochs", stop_value=float(trainer.max_epochs))
        kw.setdefault("precision", _PRECISION.get(strategy["precision"], strategy["precision"]))
        kw["hyperparameters"] = {**strategy, **(kw.get("hyperparameters") or {})}
        device = pl_module.device
        self.recorder = start(
            world=world,
            framework="torch",
            agree=lambda value: str(trainer.strategy.broadcast(value, src=0)),
            device=device.index if device.type == "cuda" else None,
            handle_signals=False,  # Lightning's signal connector handles SIGTERM (and Slurm's requeue)
            **kw,
        )
        self._bounds = Boundaries(self.recorder)
        self._global_step = int(trainer.global_step)

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.recorder is not None and self._bounds is not None:
            self.recorder.current_epoch = int(trainer.current_epoch)
            self._bounds.epoch_start()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self._bounds is not None:
            self._bounds.batch_start(*_batch_facts(batch))

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        if self._bounds is not None:
            self._bounds.before_optimizer()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._bounds is None:
            return
        stepped = int(trainer.global_step) > self._global_step
        self._global_step = int(trainer.global_step)
        self._bounds.batch_end(stepped)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if self.recorder is None or self._bounds is None:
            return
        if self._bounds.step is not None:  # the epoch's last batches never reached an optimizer step
            self._bounds.batch_end(True, phases=False)
        loss = trainer.callback_metrics.get("train_loss_epoch")  # the epoch's mean (log with on_epoch=True)
        self.recorder.epoch(int(trainer.current_epoch), train_loss=None if loss is None else float(loss))

    # -- evaluations ----------------------------------------------------------------------------------------------

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._evaluations(trainer, "validation")
        if self._bounds is not None:
            self._bounds.pause()  # validation in mid-epoch is in no step's data time

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        self._evaluations(trainer, "test")

    def _evaluations(self, trainer: Any, split: str) -> None:
        if self.recorder is None or trainer.sanity_checking or trainer.global_rank != 0:
            return
        if self.recorder.writer.stopped:
            return
        for metric, value in logged_metrics(dict(trainer.callback_metrics), split).items():
            # validation runs inside a training epoch; a test after fit belongs to the last epoch trained
            self.recorder.eval(
                split, metric, value, epoch=int(trainer.current_epoch) if split == "validation" else None
            )

    # -- the end ---------------------------------------------------------------------------------------------------

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.recorder is None or (stage == "fit" and self.test):
            return
        if stage in ("fit", "test"):
            self.recorder.stop("success")
            self.recorder.writer.close()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self.recorder is None:
            return
        if self._bounds is not None:
            self._bounds.abandon()
        if (
            type(exception).__name__ == "SIGTERMException"
        ):  # Lightning's signal connector turned SIGTERM into it
            exception = RunTerminated("SIGTERM (raised by Lightning's signal handler)")
        self.recorder.__exit__(type(exception), exception, exception.__traceback__)
