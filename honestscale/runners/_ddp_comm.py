"""The exposed communication of a DistributedDataParallel step, measured through a DDP communication hook.

Standard library only at import time (see :mod:`honestscale.runners.instrument`).
"""

from __future__ import annotations

from typing import Any


class DDPCommTiming:
    """Marks when DDP hands the last gradient bucket to the all-reduce (via a communication hook).

    The time from that mark to the end of backward is the communication the step waited for
    (what overlapping did not hide). Wraps the plain all-reduce hook, or the fp16 / PowerSGD
    compression hooks.
    """

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.last_ready: Any = None

    def begin_step(self) -> None:
        self.last_ready = None

    def register(self, ddp: Any, compression: str) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

        state: Any
        hook: Any
        if compression == "fp16":
            state, hook = None, default_hooks.fp16_compress_hook
        elif compression == "powersgd":
            state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                                start_powerSGD_iter=2)  # fmt: skip
            hook = powerSGD_hook.powerSGD_hook
        else:
            state, hook = None, default_hooks.allreduce_hook

        # No annotations: DDP checks them against dist.GradBucket, and this module's are strings.
        def timed(hook_state, bucket):  # type: ignore[no-untyped-def]
            self.last_ready = self.clock.now()
            return hook(hook_state, bucket)

        ddp.register_comm_hook(state, timed)
