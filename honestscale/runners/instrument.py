"""Instrumentation shared by every runner: step timer, system sampler, environment capture, run lifecycle.

Standard library only at import time (framework modules are imported inside the functions
that need them), so the Horovod and MXNet environments can use it as they are. The pieces live in
small private modules; this one is what runners import.
"""

from honestscale.record import (
    Clock,
    CudaClock,
    HostClock,
    PeerFailed,
    Recorder,
    RunTerminated,
    StepTimer,
    SystemSampler,
    TargetNotReached,
    config_hash,
)
from honestscale.record.environment import base_software, cpu_model, environment, git_commit, isolation
from honestscale.runners._arguments import (
    COUNT,
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    RECORDING_KEYS,
    add_recording_args,
    add_training_args,
    run_entry,
    unknown_names,
)
from honestscale.runners._run_start import hyperparameters, run_start_fields

__all__ = [
    "COUNT",
    "NON_NEGATIVE",
    "POSITIVE",
    "POSITIVE_INT",
    "RECORDING_KEYS",
    "Clock",
    "CudaClock",
    "HostClock",
    "PeerFailed",
    "Recorder",
    "RunTerminated",
    "StepTimer",
    "SystemSampler",
    "TargetNotReached",
    "add_recording_args",
    "add_training_args",
    "base_software",
    "config_hash",
    "cpu_model",
    "environment",
    "git_commit",
    "hyperparameters",
    "isolation",
    "run_entry",
    "run_start_fields",
    "unknown_names",
]
