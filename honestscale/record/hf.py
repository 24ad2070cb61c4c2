"""``HonestscaleCallback`` for Hugging Face Transformers' ``Trainer`` (``pip install 'honestscale[hf]'``).

::

    from honestscale.record.hf import HonestscaleCallback

    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=valid,
                      callbacks=[HonestscaleCallback(campaign="mine", dataset="wikitext-103")])

Every process records its own file. What the Trainer lets the callback see:

* steps: one per optimizer step (``gradient_accumulation_steps`` micro-batches), its samples and tokens counted by a
  forward pre-hook on the model as the batches go in (the batch dimension of ``input_ids``, or of the first tensor;
  tokens: the ``attention_mask``'s sum, else the size of ``input_ids``), so a short last batch counts as it is;
* phases: data from the end of one step (or its logging, evaluation, checkpoint) to ``on_step_begin`` of the next
  (``get_batch_samples`` fetches every micro-batch of the step there, and all-gathers their token counts when
  ``average_tokens_across_devices``: a collective inside the data time); compute to ``on_pre_optimizer_step`` (forward, backward, its gradient all-reduce
  and the gradient clipping: communication is unknown); optimizer to ``on_step_end`` (the update, the scheduler,
  ``zero_grad``). Evaluation and checkpointing between steps belong to no step;
* evaluations: ``on_evaluate``'s metrics on rank 0, ``eval_*`` as the split ``validation``, ``test_*`` (``evaluate(...,
  metric_key_prefix="test")`` or ``predict``) as ``test``; the Trainer's own timings (``*_runtime``,
  ``*_per_second``) are not evaluations and are left out;
* world size and rank from ``TrainingArguments``, the layout (FSDP when ``args.fsdp`` is set, else data parallel),
  DeepSpeed's ZeRO stage, the precision.

The run ends when training ends, or with ``test=True`` after the first test evaluation. The Trainer has no hook for
exceptions: an uncaught one reaches ``sys.excepthook``, which :func:`honestscale.record.start` wraps to end the file
with ``failed``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from transformers import TrainerCallback

from honestscale.record._hooks import Boundaries
from honestscale.record._recorder import Recorder
from honestscale.record._start import start
from honestscale.record._step import defer
from honestscale.record.world import discover

_TIMINGS = (
    "runtime",
    "samples_per_second",
    "steps_per_second",
    "jit_compilation_time",
    "model_preparation_time",
)
_SPLITS = {"eval": "validation", "test": "test"}


def trainer_metrics(metrics: dict[str, Any]) -> dict[str, tuple[str, str, float]]:
    """``eval_accuracy`` -> (validation, accuracy, value); the Trainer's timings and non-numbers left out."""
    out: dict[str, tuple[str, str, float]] = {}
    for key, value in metrics.items():
        prefix, _, name = key.partition("_")
        if prefix not in _SPLITS or not name or name in _TIMINGS or isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            out[key] = (_SPLITS[prefix], name, float(value))
    return out


class _Counter:
    """Samples and tokens of the training batches as the model's forward sees them."""

    def __init__(self) -> None:
        self.samples = 0
        self.tokens: list[Any] = []

    def __call__(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not module.training:
            return
        ids = kwargs.get("input_ids")
        first = (
            ids
            if ids is not None
            else next((a for a in (*args, *kwargs.values()) if hasattr(a, "shape")), None)
        )
        if first is None or not getattr(first, "shape", None):
            return
        self.samples += int(first.shape[0])
        if ids is not None:  # a count on a GPU is copied behind an event and read a step later
            mask = kwargs.get("attention_mask")
            self.tokens.append(defer(mask.sum()) if mask is not None else int(ids.numel()))

    def take(self) -> tuple[int | None, Any]:
        got = (self.samples or None, self.tokens or None)
        self.samples, self.tokens = 0, []
        return got


def _layout(args: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {"parallel_mode": str(getattr(args.parallel_mode, "value", args.parallel_mode)),
                             "gradient_accumulation_steps": int(args.gradient_accumulation_steps),
                             "bf16": bool(args.bf16), "fp16": bool(args.fp16)}  # fmt: skip
    if getattr(args, "fsdp", None):
        facts["fsdp"] = str(args.fsdp)
    if getattr(args, "deepspeed", None):
        config = getattr(getattr(args, "hf_deepspeed_config", None), "config", None) or {}
        facts["zero_stage"] = config.get("zero_optimization", {}).get("stage")
    return facts


class HonestscaleCallback(TrainerCallback):  # type: ignore[misc]
    """Records the Trainer's run of this process with :mod:`honestscale.record`; keywords go to
    :func:`honestscale.record.start` (campaign, model, dataset, target, out, run_id, ... and any run_start field)."""

    def __init__(self, *, test: bool = False, **start_kwargs: Any) -> None:
        self.test = test
        self.start_kwargs = start_kwargs
        self.recorder: Recorder | None = None
        self._bounds: Boundaries | None = None
        self._counter = _Counter()
        self._hook: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self.recorder is not None and not self.recorder.writer.stopped:
            return  # a second train(): a new run
        world = dataclasses.replace(discover(), rank=int(args.process_index), world_size=int(args.world_size))
        layout = _layout(args)
        kw = dict(self.start_kwargs)
        if model is not None:
            kw.setdefault("model", type(model).__name__)
            kw.setdefault("model_params", sum(int(p.numel()) for p in model.parameters()))
            self._hook = model.register_forward_pre_hook(self._counter, with_kwargs=True)
        local = int(args.train_batch_size)  # per process: the devices of DataParallel together
        kw.setdefault("local_batch_size", local * int(args.gradient_accumulation_steps))
        kw.setdefault("global_batch", local * int(args.gradient_accumulation_steps) * world.world_size)
        if world.world_size > 1:
            kw.setdefault("parallel", {"fsdp" if layout.get("fsdp") else "dp": world.world_size})
        kw.setdefault("precision", "amp-bf16" if args.bf16 else "amp-fp16" if args.fp16 else "fp32")
        if "target" not in kw and "stop_criterion" not in kw:
            if args.max_steps and args.max_steps > 0:
                kw.update(stop_criterion="samples", stop_value=float(args.max_steps * kw["global_batch"]))
            else:
                kw.update(stop_criterion="epochs", stop_value=float(args.num_train_epochs))
        kw.setdefault("seed", int(args.seed))
        kw.setdefault("learning_rate", float(args.learning_rate))
        kw["hyperparameters"] = {**layout, **(kw.get("hyperparameters") or {})}
        device = args.device
        self.recorder = start(world=world, framework="torch", device=device.index if device.type == "cuda" else None,
                              handle_signals="if-default", **kw)  # fmt: skip
        self._bounds = Boundaries(self.recorder)

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.recorder is not None and self._bounds is not None:
            self.recorder.current_epoch = int(state.epoch or 0)
            self._bounds.epoch_start()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._bounds is not None:
            self._counter.take()  # nothing before the step is its batch
            self._bounds.batch_start(None)

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._bounds is not None:
            self._bounds.before_optimizer()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._bounds is not None:
            samples, tokens = self._counter.take()
            self._bounds.batch_end(True, samples=samples, tokens=tokens)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.recorder is not None and not self.recorder.writer.stopped:
            self.recorder.epoch(self.recorder.current_epoch)

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: dict[str, Any] | None = None,
                    **kwargs: Any) -> None:  # fmt: skip
        self._evaluations(state, metrics or {})
        if self._bounds is not None:
            self._bounds.pause()

    def on_predict(self, args: Any, state: Any, control: Any, metrics: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:  # fmt: skip
        self._evaluations(state, metrics or {})

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._bounds is not None:
            self._bounds.pause()

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._bounds is not None:
            self._bounds.pause()  # logging gathers the loss over the ranks: in no step's data time

    def _evaluations(self, state: Any, metrics: dict[str, Any]) -> None:
        rec = self.recorder
        if rec is None or rec.writer.stopped:
            return
        found = trainer_metrics(metrics)
        if rec.rank == 0:
            for split, metric, value in found.values():
                rec.eval(
                    split, metric, value
                )  # validation after an epoch belongs to it, mid-epoch to the current
        if self.test and any(split == "test" for split, _, _ in found.values()):
            self._end()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.test:
            self._end()

    def _end(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self.recorder is not None:
            self.recorder.stop("success")
            self.recorder.writer.close()
