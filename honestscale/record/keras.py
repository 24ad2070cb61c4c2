"""``HonestscaleCallback`` for Keras ``fit`` (Keras 3, and tf-keras: ``pip install 'honestscale[tensorflow]'``).

::

    from honestscale.record.keras import HonestscaleCallback

    model.fit(x, y, batch_size=64, epochs=10, validation_data=(xv, yv),
              callbacks=[HonestscaleCallback(batch_size=64, train_size=len(x), campaign="mine", dataset="digits")])

``HonestscaleCallback`` is a callback of the Keras that ``tf.keras`` is (Keras 3; tf-keras where
``TF_USE_LEGACY_KERAS=1``); ``LegacyHonestscaleCallback`` is always tf-keras's. Every worker records its own file.
What ``fit`` lets a callback see:

* steps: one per call of ``on_train_batch_begin``/``end`` (``steps_per_execution`` batches), its samples from
  ``batch_size`` (fit's, global: split over the workers of a multi-worker strategy), the epoch's last short batch
  from ``train_size`` where given;
* phases: none. ``fit`` runs the input pipeline, forward, backward, the all-reduce and the update in one compiled
  function, between the two hooks: data, compute, communication and optimizer stay unknown (HS106 cannot verify;
  it never passes on a guess), only each step's total is measured;
* evaluations: ``val_*`` of ``on_epoch_end``'s logs on the chief, as the split ``validation``; with ``test=True`` the
  run stays open for an ``evaluate`` after ``fit`` (given this callback), recorded as ``test``;
* world size and rank from the model's ``tf.distribute`` strategy (its workers; a Horovod or launcher world
  otherwise), the strategy's class.

The run ends when ``fit`` ends, or with ``test=True`` after the test evaluation; an uncaught exception ends it as
``failed`` through ``sys.excepthook`` (Keras has no hook for it).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from typing import Any

from honestscale.record._hooks import Boundaries
from honestscale.record._recorder import Recorder
from honestscale.record._start import start
from honestscale.record.world import World, discover


def _world(model: Any) -> tuple[World, str]:
    """This worker's rank and the workers of the model's strategy (replicas on one worker share its file)."""
    world = discover()
    strategy = getattr(model, "distribute_strategy", None)
    name = type(strategy).__name__ if strategy is not None else "none"
    resolver: Any = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    workers = len(spec.get("worker", [])) + len(spec.get("chief", []))
    if workers > 1:
        rank = int(resolver.task_id) + (len(spec.get("chief", [])) if resolver.task_type == "worker" else 0)
        world = dataclasses.replace(world, rank=rank, world_size=workers)
    return world, name


def _steps_per_execution(model: Any) -> int:
    value: Any = getattr(model, "steps_per_execution", None) or getattr(model, "_steps_per_execution", None)
    try:
        return max(1, int(value.numpy() if hasattr(value, "numpy") else value))
    except (TypeError, ValueError):
        return 1


class _Recording:
    """The callback's behaviour, on whichever Keras callback class it is mixed into."""

    model: Any
    params: dict[str, Any]

    def _setup(
        self, batch_size: int, train_size: int | None, test: bool, start_kwargs: dict[str, Any]
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(
                f"HonestscaleCallback(batch_size={batch_size!r}): fit's batch_size, an integer >= 1"
            )
        self.batch_size = batch_size
        self.train_size = train_size
        self.test = test
        self.start_kwargs = start_kwargs
        self.recorder: Recorder | None = None
        self._bounds: Boundaries | None = None
        self._training = False
        self._in_epoch = 0  # samples this worker has seen in the epoch
        self._first_batch = 0
        self._batches = 0  # batches of the epoch counted so far

    def on_train_begin(self, logs: Any = None) -> None:
        self._training = True
        if self.recorder is not None and not self.recorder.writer.stopped:
            return  # a second fit: a new run
        world, strategy = _world(self.model)
        kw = dict(self.start_kwargs)
        kw.setdefault("model", str(getattr(self.model, "name", None) or type(self.model).__name__))
        kw.setdefault(
            "model_params", int(sum(int(w.shape.num_elements() or 0) for w in self.model.trainable_weights))
        )
        kw.setdefault("global_batch", self.batch_size)
        if self.train_size is not None:
            kw.setdefault("train_size", self.train_size)
        else:
            warnings.warn("HonestscaleCallback without train_size=: an epoch's short last batch is counted as a full "
                          "one (its samples are not visible to a callback)", stacklevel=2)  # fmt: skip
            kw.setdefault("samples_counted", "every batch as full: train_size not given")
        if "target" not in kw and "stop_criterion" not in kw:
            kw.update(stop_criterion="epochs", stop_value=float(self.params.get("epochs") or 0))
        if world.world_size > 1:
            kw.setdefault("parallel", {"dp": world.world_size})
        kw["hyperparameters"] = {"strategy": strategy, "steps_per_execution": _steps_per_execution(self.model),
                                 **(kw.get("hyperparameters") or {})}  # fmt: skip
        tf = sys.modules.get("tensorflow")
        if tf is not None:
            kw.setdefault("accelerators_per_node", len(tf.config.list_physical_devices("GPU")))
        self.recorder = start(world=world, framework="tensorflow", handle_signals="if-default", **kw)
        self._bounds = Boundaries(self.recorder, data_phase=False)

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        if self.recorder is not None:
            self.recorder.current_epoch = int(epoch)
            self._in_epoch = self._batches = 0

    def _samples(self, batches: int) -> int:
        """This worker's samples in ``batches`` batches (no more than the epoch's steps; the epoch's short last
        batch from train_size)."""
        assert self.recorder is not None
        steps = self.params.get("steps")
        if steps:
            batches = max(0, min(batches, int(steps) - self._batches))
        self._batches += batches
        workers = self.recorder.world_size
        samples = batches * self.batch_size // workers
        if self.train_size is not None:
            samples = max(0, min(samples, self.train_size // workers - self._in_epoch))
        self._in_epoch += samples
        return samples

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._first_batch = int(batch)
        if self._bounds is not None:
            self._bounds.batch_start(None)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        # one call spans the batches from begin's index to this one (steps_per_execution; fewer at an epoch's end)
        if self._bounds is not None:
            self._bounds.batch_end(
                True, phases=False, samples=self._samples(int(batch) - self._first_batch + 1)
            )

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        rec, logs = self.recorder, dict(logs or {})
        if rec is None:
            return
        rec.epoch(
            int(epoch), train_loss=_number(logs.get("loss")), train_accuracy=_number(logs.get("accuracy"))
        )
        if rec.rank == 0:
            for key, value in logs.items():
                if key.startswith("val_") and _number(value) is not None:
                    rec.eval("validation", key.removeprefix("val_"), float(value), epoch=int(epoch))

    def on_test_end(self, logs: Any = None) -> None:
        rec = self.recorder
        if self._training or rec is None or rec.writer.stopped or not self.test:
            return  # validation inside fit: on_epoch_end has its val_ logs
        if rec.rank == 0:
            for key, value in dict(logs or {}).items():
                if _number(value) is not None:
                    rec.eval("test", key, float(value))
        self._end()

    def on_train_end(self, logs: Any = None) -> None:
        self._training = False
        if not self.test:
            self._end()

    def _end(self) -> None:
        if self.recorder is not None:
            self.recorder.stop("success")
            self.recorder.writer.close()


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _keras_callback_base(legacy: bool) -> Any:
    if legacy:
        import tf_keras

        return tf_keras.callbacks.Callback
    if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
        return _keras_callback_base(True)
    import keras

    return keras.callbacks.Callback


def _callback_class(legacy: bool) -> Any:
    base = _keras_callback_base(legacy)

    def __init__(self: Any, *, batch_size: int, train_size: int | None = None, test: bool = False,
                 **start_kwargs: Any) -> None:  # fmt: skip
        base.__init__(self)
        self._setup(batch_size, train_size, test, start_kwargs)

    name = "LegacyHonestscaleCallback" if legacy else "HonestscaleCallback"
    return type(name, (_Recording, base), {"__init__": __init__, "__module__": __name__,
                                           "__doc__": "Records this worker's fit with honestscale.record: "
                                           "batch_size (fit's), train_size, test; other keywords go to start()."})  # fmt: skip


HonestscaleCallback: Any = _callback_class(legacy=False)


def __getattr__(name: str) -> Any:
    if name == "LegacyHonestscaleCallback":  # tf-keras only where asked: it may not be installed
        cls = _callback_class(legacy=True)
        globals()[name] = cls
        return cls
    raise AttributeError(name)
