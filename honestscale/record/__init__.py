"""Record your own training as honestscale events: one :class:`Recorder` per rank, called from your loop.

::

    import honestscale.record

    rec = honestscale.record.start(campaign="mine", model="resnet50", dataset="imagenet", global_batch=256)
    for epoch in range(epochs):
        for x, y in loader:  # (time the loader with a data phase, as below, to have it in the data time)
            with rec.step(samples=len(x)) as s:
                with s.phase("compute"):
                    loss = model(x, y)
                    loss.backward()
                with s.phase("optimizer"):
                    opt.step()
                    opt.zero_grad()
        rec.epoch()
        rec.eval("validation", "accuracy", evaluate(model))
    rec.stop()

Every rank records its own file ``<out>/<run_id>/events-rank<N>.jsonl`` (``out``: the argument, else
``HONESTSCALE_OUT``, else ``./honestscale-events``), each event a complete line written before the call returns;
``honestscale ingest <out>`` lands them. The same recorder is what honestscale's runners use; the callbacks for
Lightning, Hugging Face's Trainer and Keras wrap it (``honestscale.record.lightning``, ``.hf``, ``.keras``).
docs/record.md has the whole API.

Standard library only at import time: a framework is read from ``sys.modules`` when the process imported it, so
this package runs in any framework's environment (the runners' rule, as for :mod:`honestscale.events`).
"""

from honestscale.record._clocks import Clock, CudaClock, HostClock
from honestscale.record._lifecycle import PeerFailed, RunTerminated, TargetNotReached
from honestscale.record._recorder import Recorder
from honestscale.record._sampler import SystemSampler
from honestscale.record._start import DEFAULT_OUT, config_hash, start
from honestscale.record._step import PHASES, RecordError, Step
from honestscale.record._timer import StepTimer
from honestscale.record.world import World, WorldError, discover

__all__ = [
    "DEFAULT_OUT",
    "PHASES",
    "Clock",
    "CudaClock",
    "HostClock",
    "PeerFailed",
    "RecordError",
    "Recorder",
    "RunTerminated",
    "Step",
    "StepTimer",
    "SystemSampler",
    "TargetNotReached",
    "World",
    "WorldError",
    "config_hash",
    "discover",
    "start",
]
