"""A typed record per event kind, beside the field tables of ``events.py`` (the contract): the fields a runner, the
recorder or a test gives ``EventWriter.run_start(...)``, ``.step(...)`` and the others are checked by mypy where they
are written (a field's name or type mistaken is an error before any run), and the event written is typed for
whoever reads it back.

``<Kind>Fields`` are a kind's own fields (a required one ``Required``; every other one may be left out or null, as
``events.validate`` allows); ``<Kind>`` is the event as written, with the envelope (schema, run_id, rank, seq,
time, kind). ``tests/unit/test_events.py`` keeps them equal to the field tables. Standard library only, like
``events``: runners import it inside framework environments.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Required, TypedDict

# the parallel dimensions a layout names (contract 3): replicated data, fully sharded data, tensor, pipeline,
# context and expert parallel
PARALLEL_DIMS = ("dp", "fsdp", "tp", "pp", "cp", "ep")


class Envelope(TypedDict):
    """What every event carries: the contract version, the run, the rank, its counter, the time and the kind."""

    schema: int
    run_id: str
    rank: int
    seq: int
    time: float


class RunStartFields(TypedDict, total=False):
    """``run_start``'s own fields: written once per rank at start: everything that defines and describes the experiment."""

    campaign: str | None
    name: str | None
    purpose: str | None
    tuning_study: str | None
    tuning_trial: str | None
    framework: Required[str]
    framework_version: str | None
    launcher: str | None
    backend: str | None
    world_size: int | None
    nodes: int | None
    accelerators_per_node: int | None
    accelerator: str | None
    system: str | None
    host: str | None
    cpu: str | None
    interconnect: str | None
    intra_op_threads: int | None
    inter_op_threads: int | None
    cpu_affinity: list[object] | None
    cpus_allowed: int | None
    launch_env: dict[str, object] | None
    isolation: dict[str, object] | None
    software: dict[str, object] | None
    model: str | None
    model_params: int | None
    dataset: str | None
    train_size: int | None
    validation_size: int | None
    test_size: int | None
    data_source: str | None
    data_path: str | None
    input_shape: list[object] | None
    global_batch_size: int | None
    local_batch_size: int | None
    optimizer: str | None
    learning_rate: float | None
    lr_schedule: str | None
    precision: str | None
    grad_compression: str | None
    seed: int | None
    stop_criterion: str | None
    stop_value: float | None
    target_metric: str | None
    scope: str | None
    scaling: str | None
    config_hash: str | None
    git_commit: str | None
    slurm_job_id: str | None
    slurm_step_id: str | None
    hyperparameters: dict[str, object] | None
    command: list[object] | None
    mlperf: dict[str, object] | None
    imported: dict[str, object] | None
    parallel: dict[str, object] | None
    pipeline_schedule: str | None
    microbatches: int | None
    pipeline_virtual_stages: int | None
    sequence_length: int | None
    global_batch_tokens: int | None
    activation_checkpointing: str | None
    compute_dtype: str | None
    params_total: int | None
    params_embedding: int | None
    params_active: int | None
    model_shape: dict[str, object] | None
    flops_per_token: dict[str, object] | None
    comm_dimensions: list[object] | None
    claims: dict[str, object] | None
    declared_peak: dict[str, object] | None


class RunStart(Envelope, RunStartFields, total=False):
    """A ``run_start`` event as written."""

    kind: Required[Literal["run_start"]]


class StepFields(TypedDict, total=False):
    """``step``'s own fields: one optimizer step on one rank, with its wall time split into data, compute, communication and optimizer."""

    epoch: int | None
    step: Required[int]
    samples: int | None
    tokens: int | None
    t_total: Required[float]
    t_data: float | None
    t_compute: float | None
    t_comm: float | None
    t_optimizer: float | None
    comm_measured: bool | None
    warmup: bool | None
    cpu_pressure: float | None
    cpu_steal: float | None
    iterations: int | None


class Step(Envelope, StepFields, total=False):
    """A ``step`` event as written."""

    kind: Required[Literal["step"]]


class EpochFields(TypedDict, total=False):
    """``epoch``'s own fields: end of an epoch on one rank."""

    epoch: Required[int]
    train_loss: float | None
    train_accuracy: float | None
    samples: int | None
    t_total: float | None


class Epoch(Envelope, EpochFields, total=False):
    """A ``epoch`` event as written."""

    kind: Required[Literal["epoch"]]


class EvalFields(TypedDict, total=False):
    """``eval``'s own fields: an evaluation of the model on one split."""

    split: Required[str]
    metric: Required[str]
    value: Required[float]
    samples: int | None
    epoch: int | None


class Eval(Envelope, EvalFields, total=False):
    """A ``eval`` event as written."""

    kind: Required[Literal["eval"]]


class SystemFields(TypedDict, total=False):
    """``system``'s own fields: a sample of accelerator and host counters, taken by a sampler thread."""

    device: int | None
    accel_util: float | None
    accel_mem_bytes: int | None
    power_w: float | None
    energy_j: float | None
    cpu_percent: float | None
    rss_bytes: int | None
    host_load: float | None


class System(Envelope, SystemFields, total=False):
    """A ``system`` event as written."""

    kind: Required[Literal["system"]]


class RunStopFields(TypedDict, total=False):
    """``run_stop``'s own fields: written on every exit path: success, exception, time limit, target never reached."""

    status: Required[str]
    reason: str | None
    energy_j: float | None
    paused_s: float | None


class RunStop(Envelope, RunStopFields, total=False):
    """A ``run_stop`` event as written."""

    kind: Required[Literal["run_stop"]]


Event = RunStart | Step | Epoch | Eval | System | RunStop


class LayoutFields(TypedDict, total=False):
    """The run_start fields a layout records (of ``RunStartFields``)."""

    parallel: dict[str, object] | None
    pipeline_schedule: str | None
    microbatches: int | None
    pipeline_virtual_stages: int | None


@dataclass(frozen=True)
class Layout:
    """A run's parallel layout, one type for who records it (the runners: ``fields()``), who reads it back
    (``view.Run.layout_of``: ``of``) and who shows it (``text``): a degree per dimension of ``PARALLEL_DIMS`` (1
    where not used) and, for a pipeline, its schedule, microbatches and model chunks per rank."""

    degrees: dict[str, int]
    schedule: str | None = None
    microbatches: int = 1
    virtual: int = 1  # pipeline stages per rank

    @classmethod
    def of(
        cls,
        parallel: object,
        world_size: int | None = None,
        schedule: str | None = None,
        microbatches: int | None = None,
        virtual: int | None = None,
    ) -> "Layout":
        """The layout run_start's fields give: each dimension's recorded degree where it is a whole number of 1 or
        more; no ``parallel`` object at all: data parallel over ``world_size`` ranks."""
        degrees = dict.fromkeys(PARALLEL_DIMS, 1)
        if not isinstance(parallel, Mapping):
            degrees["dp"] = int(world_size or 1)
        else:
            for d in PARALLEL_DIMS:
                v = parallel.get(d)
                if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
                    degrees[d] = v
        return cls(degrees, schedule, microbatches or 1, virtual or 1)

    @property
    def replicas(self) -> int:
        """Data-parallel replicas: each trains a different part of the global batch."""
        return self.degrees["dp"] * self.degrees["fsdp"]

    @property
    def text(self) -> str:
        """As ``--parallel`` writes it: ``dp2,tp2`` (the dimensions above 1), ``dp1`` for one rank."""
        return ",".join(f"{k}{v}" for k in PARALLEL_DIMS if (v := self.degrees[k]) > 1) or "dp1"

    def fields(self) -> LayoutFields:
        """run_start's layout fields."""
        out: LayoutFields = {"parallel": dict(self.degrees)}
        if self.degrees["pp"] > 1:
            out |= {
                "pipeline_schedule": self.schedule,
                "microbatches": self.microbatches,
                "pipeline_virtual_stages": self.virtual,
            }
        return out


__all__ = [
    "PARALLEL_DIMS",
    "Envelope",
    "Epoch",
    "EpochFields",
    "Eval",
    "EvalFields",
    "Event",
    "Layout",
    "LayoutFields",
    "RunStart",
    "RunStartFields",
    "RunStop",
    "RunStopFields",
    "Step",
    "StepFields",
    "System",
    "SystemFields",
]
