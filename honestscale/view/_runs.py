"""A run as every judge reads it: its ``runs`` row as typed fields, its evaluations, steps, power and ranks.

Built from the store's typed queries (``view.build``); nothing here holds a connection. The derived rates (throughput,
steady-state rate, stall shares) are defined here once, for the rules, the statistics and the report alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from honestscale.event_records import Layout
from honestscale.events import PARALLEL_DIMS


@dataclass(frozen=True)
class Eval:
    split: str
    metric: str
    value: float
    time: float
    epoch: int | None
    samples_trained: float | None = None  # samples every rank had trained by then (from the steps)


@dataclass(frozen=True)
class PowerSample:
    """One NVML reading of one accelerator: its power draw and its total-energy counter, either may be missing."""

    rank: int
    device: int  # -1: the sample names no device
    time: float
    power_w: float | None
    energy_j: float | None


# a run's fields that are not columns of its ``runs`` row: what else was read about it
_COMM_DIMENSIONS, _COMMAND = "comm_dimensions", "command"
PARTS = frozenset({"attrs", "evals", "steps", "power", "ranks", "energy_records", "series"})


@dataclass(frozen=True)
class StepSeries:
    """The lowest rank's step times in order, warm-up included: where the steady state is found in the data."""

    times: tuple[float, ...]
    marked: int  # steps the run marked warm-up
    iterations: int  # the most iterations one step event covers (a log's line per interval: > 1)
    pressure: tuple[
        float | None, ...
    ] = ()  # the host's CPU wait during each step, seconds (None: not measured)


@dataclass(frozen=True)
class EnergyRecord:
    """Energy measured outside the run's events: a CodeCarbon tracker's row or a Slurm accounting line."""

    format: str  # "codecarbon" | "slurm-sacct"
    job_id: str | None
    step_id: str | None
    host: str | None
    nodes: int | None
    started_at: float | None
    stopped_at: float | None
    energy_j: float | None  # None: not measured
    method: str  # "measured ...", "estimated ...", "not measured ..."
    state: str | None
    source: str  # file:line


@dataclass(frozen=True)
class Steps:
    steps: int
    warmup_steps: int
    warmup_marked: int
    steps_with_data: int
    median_step_s: float | None
    first_steps_max_s: float | None
    first_unmarked_max_s: float | None
    # synchronous steps (slowest rank per step), warm-up excluded; None when the run has no such step
    sync_steps: int | None = None
    sync_median_s: float | None = None
    fence_s: float | None = None  # Tukey's upper fence, Q3 + 1.5 IQR
    samples_per_step: float | None = None  # median samples of all ranks per step
    step_time_s: float | None = None  # sum of the synchronous steps
    samples_timed: float | None = None  # samples of those steps, each replica's once
    tokens_timed: float | None = None  # tokens of those steps, counted as samples are; None: no step says
    outliers: int | None = None  # steps above the fence
    outlier_excess_s: float | None = None  # their time beyond the median step
    slowest_step_s: float | None = None
    samples_trained: float | None = None  # every step, warm-up included


@dataclass(frozen=True)
class Ranks:
    """What the ranks of one run wrote: which ranks, whether their clocks ran forward, whether they agree."""

    seen: tuple[int, ...] = ()  # ranks with events in the store
    clock_backwards: int = 0  # events stamped earlier than the event before them on the same rank (by seq)
    clock_backwards_s: float = 0.0  # the largest such step back
    disagree: tuple[
        tuple[str, tuple[str, ...]], ...
    ] = ()  # run_start fields whose values differ across ranks
    stepped: tuple[int, ...] = ()  # ranks with steps in the store, warm-up included


_DIMS = PARALLEL_DIMS


def layout_text(degrees: Mapping[str, Any]) -> str:
    """Degrees per dimension as ``--parallel`` writes them: ``dp2,tp2`` (the dimensions above 1), ``dp1`` for one
    rank (the contract's ``Layout.text``)."""
    return Layout.of(degrees).text


# Vendors, brands, form factors and memory sizes: "Nvidia Tesla V100-SXM2-32GB" and "NVIDIA V100" are one chip.
_HARDWARE_NOISE = re.compile(
    r"\b(nvidia|amd|intel|google|habana|tesla|instinct|radeon|gaudi-?|cloud)\b|[-_ ]?(sxm\d?|pcie|nvl|hbm\d?e?|"
    r"\d+\s*gb|oam)\b|\(r\)|\(tm\)",
    re.IGNORECASE,
)


def accelerator_model(name: str | None) -> str | None:
    """The accelerator's model with vendor, brand, form factor and memory size left out (``v100``, ``a100``), or
    None: the name every hardware comparison uses, so that two spellings of one chip are one accelerator."""
    if not name:
        return None
    text = _HARDWARE_NOISE.sub(" ", name.lower())
    text = re.sub(r"[\s\-_]+", " ", text).strip()
    return text or name.strip().lower()


BUSY_LOAD = 1.5  # a host whose 1-minute load is above this many times its CPUs is busy (HS208, HS205)
CONTENDED = 0.5  # a run whose steps waited for a CPU this share of their time ran on a busy host (HS208)


@dataclass(frozen=True)
class Run:
    """One run: the columns of its ``runs`` row (the store's projection) as typed fields, and what hangs off it."""

    run_id: str
    source: str | None = None  # native | mlperf
    campaign: str | None = None
    name: str | None = None
    purpose: str | None = None
    tuning_study: str | None = None
    tuning_trial: str | None = None
    framework: str | None = None
    framework_version: str | None = None
    launcher: str | None = None
    backend: str | None = None
    world_size: int | None = None
    n_nodes: int | None = None
    accelerators_per_node: int | None = None
    n_accelerators: int | None = None
    accelerator: str | None = None
    system: str | None = None
    host: str | None = None
    cpu: str | None = None
    interconnect: str | None = None
    # threads per worker (contract 2): as the lowest rank's framework reported them (0: it chooses); None: unknown
    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    cpus_allowed: int | None = None  # CPUs the lowest rank could run on (its affinity)
    cpu_affinity: str | None = None  # JSON text: those CPUs' ids
    launch_env: str | None = None  # JSON text: the threading and affinity knobs set in its environment
    software: str | None = None  # JSON text
    model: str | None = None
    model_params: int | None = None
    dataset: str | None = None
    train_size: int | None = None
    validation_size: int | None = None
    test_size: int | None = None
    data_source: str | None = None
    data_path: str | None = None
    input_shape: str | None = None  # JSON text
    global_batch_size: int | None = None
    local_batch_size: int | None = None
    optimizer: str | None = None
    learning_rate: float | None = None
    lr_schedule: str | None = None
    precision: str | None = None
    grad_compression: str | None = None
    seed: int | None = None
    stop_criterion: str | None = None
    stop_value: float | None = None
    target_metric: str | None = None
    scope: str | None = None
    scaling: str | None = None
    config_hash: str | None = None
    git_commit: str | None = None
    slurm_job_id: str | None = None
    slurm_step_id: str | None = None
    status: str | None = None
    reason: str | None = None
    ranks_seen: int | None = None
    ranks_stopped: int | None = None
    started_at: float | None = None
    stopped_at: float | None = None
    time_to_train_s: float | None = None
    final_split: str | None = None
    final_metric: str | None = None
    final_value: float | None = None
    source_file: str | None = None
    final_quality: str | None = None  # JSON text
    energy_to_train_j: float | None = None
    # the parallel layout (contract 3): degrees as JSON text; ranks that share one replica's samples (tp x pp x cp)
    parallel: str | None = None
    replica_ranks: int | None = None
    pipeline_schedule: str | None = None
    microbatches: int | None = None
    sequence_length: int | None = None
    global_batch_tokens: int | None = None
    activation_checkpointing: str | None = None
    compute_dtype: str | None = None
    params_total: int | None = None
    params_embedding: int | None = None
    params_active: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)  # the run_start payload
    evals: tuple[Eval, ...] = ()
    steps: Steps | None = None
    power: tuple[PowerSample, ...] = ()  # in time order per rank and device
    ranks: Ranks = Ranks()
    # energy records that may concern the run: its Slurm job's accounting, trackers whose window overlaps it
    energy_records: tuple[EnergyRecord, ...] = ()
    series: StepSeries | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any], **parts: Any) -> Run:
        """A run from a ``runs`` row (columns it does not know are ignored) and its parts (evals, steps, ...)."""
        known = {f.name for f in fields(cls)} - PARTS
        values = {k: v for k, v in row.items() if k in known}
        attrs = row.get("attrs")
        if isinstance(attrs, str):
            attrs = json.loads(attrs) if attrs else {}
        return cls(**values, attrs=dict(attrs or {}), **parts)

    # the run_start payload's records, typed (events.py's field table names each): read here, never by key elsewhere
    def _record(self, name: str) -> Mapping[str, object]:
        got = self.attrs.get(name)
        return got if isinstance(got, dict) else {}

    @property
    def software_stack(self) -> Mapping[str, object]:
        """The software stack, name -> version, as run_start gave it (``{}`` where not recorded)."""
        return self._record("software")

    @property
    def hyperparameters(self) -> Mapping[str, object]:
        """Every other hyper-parameter, name -> value (``{}`` where not recorded)."""
        return self._record("hyperparameters")

    @property
    def mlperf(self) -> Mapping[str, object] | None:
        """An MLPerf log's submission: benchmark, round, org, division, status, platform (None: not from one)."""
        return self._record("mlperf") or None

    @property
    def isolation(self) -> Mapping[str, object] | None:
        """How alone the measurement was at run start (None where the run did not record it)."""
        return self._record("isolation") or None

    @property
    def imported(self) -> Mapping[str, object] | None:
        """For a run read from another tool's log: the tool, whose ranks' numbers it holds, what it cannot tell."""
        return self._record("imported") or None

    @property
    def model_shape(self) -> Mapping[str, object]:
        """The transformer's shape FLOPs are recomputed from (``{}`` where not recorded)."""
        return self._record("model_shape")

    @property
    def tool_claims(self) -> Mapping[str, object] | None:
        """The numbers the training tool printed about itself (``claims``), None where it printed none."""
        return self._record("claims") or None

    @property
    def declared_peak(self) -> Mapping[str, object]:
        """A peak the run declares for hardware the catalogue lacks: tflops, dtype, source (``{}``: none)."""
        return self._record("declared_peak")

    @property
    def flops_per_token(self) -> Mapping[str, object] | None:
        """Training FLOPs per token as the runner counted them, convention -> FLOPs (None: not recorded)."""
        return self._record("flops_per_token") or None

    @property
    def comm_dimensions(self) -> tuple[str, ...] | None:
        """Which dimensions' communication a step's t_comm holds (None where not recorded; ``()``: none)."""
        got = self.attrs.get(_COMM_DIMENSIONS)
        return tuple(str(d) for d in got) if isinstance(got, list) else None

    @property
    def command(self) -> list[str] | None:
        """The command line that started the run's rank, as its arguments."""
        got = self.attrs.get(_COMMAND)
        return [str(a) for a in got] if isinstance(got, list) else None

    @property
    def peak_tflops(self) -> float | None:
        """A peak named at run_start's top level (HS104 normalises hardware by it; the contract's field table names
        no such field: ``declared_peak`` is the contract's)."""
        got = self.attrs.get("peak_tflops")
        return float(got) if isinstance(got, int | float) and not isinstance(got, bool) else None

    def _whole(self, name: str) -> int | None:
        got = self.attrs.get(name)
        return got if isinstance(got, int) and not isinstance(got, bool) else None

    @property
    def pipeline_virtual_stages(self) -> int | None:
        return self._whole("pipeline_virtual_stages")

    @property
    def cores_per_node(self) -> int | None:
        return self._whole("cores_per_node")

    def value(self, name: str) -> Any:
        """The column ``name`` (``workers`` for the worker count): for grouping by a field named at run time."""
        return self.workers if name == "workers" else getattr(self, name)

    @property
    def host_load(self) -> tuple[float, int] | None:
        """The host's 1-minute load and its CPUs as the run started (its isolation record); None where the run did
        not record them."""
        iso = self.isolation
        if iso is None:
            return None
        load, cpus = iso.get("host_load_1m"), iso.get("cpus")
        if isinstance(load, int | float) and isinstance(cpus, int) and cpus > 0:
            return float(load), cpus
        return None

    @property
    def busy_host(self) -> str | None:
        """``host load L on N CPUs at the start`` where the host was busy as the run started: its 1-minute load
        above BUSY_LOAD times its CPUs (or the run's own ranks on it, if more). None where it was not, or where the
        run did not record it."""
        if (host := self.host_load) is None:
            return None
        (load, cpus), on_host = host, (self.isolation or {}).get("ranks_on_host")
        ranks = on_host if isinstance(on_host, int) and on_host > 0 else 1
        if load > BUSY_LOAD * max(cpus, ranks):
            return f"host load {load:g} on {cpus} CPUs at the start"
        return None

    @property
    def contended(self) -> str | None:
        """``its steps waited for a CPU P % of their time ...`` where the host had more runnable work than CPUs for
        at least half of the run's step time (contract 5's ``cpu_pressure``, Linux's pressure stall information),
        and the run's own ranks and threads do not exceed the host's CPUs (its own work would then be the wait).
        None where it did not, where the steps did not measure it, or where the run could have caused it."""
        s = self.series
        if s is None or not s.times or len(s.pressure) != len(s.times) or any(p is None for p in s.pressure):
            return None
        iso = self.isolation or {}
        cpus, on_host = iso.get("cpus"), iso.get("ranks_on_host")
        ranks = on_host if isinstance(on_host, int) and on_host > 0 else 1
        if not isinstance(cpus, int) or ranks * (self.intra_op_threads or 1) > cpus:
            return None
        share = sum(float(p or 0.0) for p in s.pressure) / max(sum(s.times), 1e-12)
        if share < CONTENDED:
            return None
        return (
            f"its steps waited for a CPU {100 * min(share, 1.0):.0f} % of their time (Linux's CPU pressure: the host "
            f"had more runnable work than its {cpus} CPUs, while the run's own {ranks} rank(s) x "
            f"{self.intra_op_threads or 1} thread(s) ask no more than {cpus})"
        )

    @property
    def id(self) -> str:
        return self.run_id

    @property
    def workers(self) -> int | None:
        """Accelerators in use; on a CPU-only run, its worker processes (an MLPerf CPU system: its nodes)."""
        n = self.n_accelerators or self.world_size
        return int(n) if n else None

    @property
    def cpu_only(self) -> bool:
        """No accelerator: counted in nodes and cores, never in accelerator-hours."""
        # a run read from another tool's log that names no accelerator is not known to be a CPU run: unknown
        return not self.accelerator and not self.accelerators_per_node and self.imported is None

    @property
    def accelerator_model(self) -> str | None:
        """The accelerator's normalised model (``v100``), what hardware comparisons compare."""
        return accelerator_model(self.accelerator)

    @property
    def hardware(self) -> str:
        """The normalised accelerator, or the CPU of a CPU-only run."""
        return self.accelerator_model or f"cpu {(self.cpu or '?').lower()}"

    @property
    def ok(self) -> bool:
        """Succeeded, with a time to train that can be one: a run that stopped before it started (a clock gone
        backwards) is no success, whatever its status says; HS213 names it."""
        return self.status == "success" and (self.time_to_train_s is None or self.time_to_train_s >= 0)

    @property
    def throughput(self) -> float | None:
        """Samples/s over the run's timed steps: samples of every rank over the synchronous steps' time
        (warm-up excluded, stalls included)."""
        s = self.steps
        if s is None or not s.step_time_s or not s.samples_timed:
            return None
        return s.samples_timed / s.step_time_s

    @property
    def layout_of(self) -> Layout:
        """The run's layout (the contract's type, as its runner recorded it); a run that recorded none is data
        parallel over its ranks."""
        try:
            got = json.loads(self.parallel) if self.parallel else None
        except ValueError:
            got = None
        schedule, microbatches = self.pipeline_schedule, self.microbatches
        return Layout.of(got, self.world_size, schedule, microbatches, self.pipeline_virtual_stages)

    @property
    def degrees(self) -> dict[str, int]:
        """The layout's degree per dimension (dp, fsdp, tp, pp, cp, ep), each >= 1; a run that recorded no layout
        is data parallel over its ranks (dp = world_size)."""
        return self.layout_of.degrees

    @property
    def layout(self) -> str | None:
        """The layout as the runner's ``--parallel`` names it: ``dp2,tp2``; ``dp4`` for plain data parallel; None
        where neither a layout nor the ranks are known."""
        if not self.parallel and not self.world_size:
            return None
        return layout_text(self.degrees)

    @property
    def layout_name(self) -> str:
        """The layout as its runs are grouped and named: ``tp2``, ``dp2,pp2 (1f1b, 4 microbatches)`` (a pipeline's
        schedule, microbatches and virtual stages make another layout); ``?`` where nothing is known."""
        return (self.layout or "?") + self._pipeline_text()

    def _pipeline_text(self) -> str:
        if self.degrees["pp"] <= 1:
            return ""
        v = self.pipeline_virtual_stages
        extra = [self.pipeline_schedule or "schedule?", f"{self.microbatches or '?'} microbatches"]
        if isinstance(v, int) and v > 1:
            extra.append(f"{v} virtual stages")
        return f" ({', '.join(extra)})"

    @property
    def layout_key(self) -> str | None:
        """The layout where it is more than data parallel (``tp2``, ``fsdp2``, ``pp2 (1f1b, 4 microbatches)``),
        else None: runs of different layouts are different configurations, never pooled; plain data-parallel runs,
        recorded with a layout or before contract 3, are one."""
        d = self.degrees
        return self.layout_name if any(d[k] > 1 for k in _DIMS if k != "dp") else None

    @property
    def layout_family(self) -> str | None:
        """The layout a scaling series keeps while its data-parallel degree grows: the model-parallel degrees and
        the pipeline's schedule (``tp2`` for tp2, dp2,tp2 and dp4,tp2; ``fsdp`` for fsdp2 and fsdp4, fully sharded
        data parallel growing), None for plain data parallel."""
        d = self.degrees
        parts = [("fsdp" if k == "fsdp" else f"{k}{d[k]}") for k in _DIMS if k != "dp" and d[k] > 1]
        return ",".join(parts) + self._pipeline_text() if parts else None

    @property
    def tokens_per_s(self) -> float | None:
        """Tokens/s over the run's timed steps: every rank's tokens, each replica's once (the layout's tensor,
        pipeline and context-parallel ranks count the same tokens), over the synchronous steps' time."""
        s = self.steps
        if s is None or not s.step_time_s or not s.tokens_timed:
            return None
        return s.tokens_timed / s.step_time_s

    @property
    def tokens_per_s_per_accelerator(self) -> float | None:
        """Tokens/s over the accelerators in use (the workers of a CPU run): the total divided, never one rank's."""
        t, n = self.tokens_per_s, self.workers
        return None if t is None or not n else t / n

    @property
    def steady_rate(self) -> float | None:
        """Steady-state throughput, samples/s: samples per step over the median synchronous step (warm-up
        excluded), which stalls and outliers do not move."""
        s = self.steps
        if s is None or not s.sync_median_s or not s.samples_per_step:
            return None
        return s.samples_per_step / s.sync_median_s

    @property
    def end_to_end_rate(self) -> float | None:
        """Samples trained over the time to train (evaluations, stalls and warm-up included)."""
        s, t = self.steps, self.time_to_train_s
        if s is None or not s.samples_trained or not t or t <= 0:
            return None
        return float(s.samples_trained) / float(t)

    @property
    def stall_share(self) -> float | None:
        """The outlier steps' time beyond the median step, as a share of the time to train."""
        s, t = self.steps, self.time_to_train_s
        if s is None or s.outlier_excess_s is None or not t or t <= 0:
            return None
        return min(1.0, float(s.outlier_excess_s) / float(t))

    @property
    def slow_share(self) -> float | None:
        """The steps' time beyond the median step's pace (steps x median), as a share of the time to train: what
        stalls cost even when they are too many for Tukey's fence (more than a quarter of the steps)."""
        s, t = self.steps, self.time_to_train_s
        if s is None or not s.step_time_s or not s.sync_steps or s.sync_median_s is None or not t or t <= 0:
            return None
        return max(0.0, min(1.0, (float(s.step_time_s) - s.sync_steps * float(s.sync_median_s)) / float(t)))

    @property
    def lost_share(self) -> float | None:
        """The larger of the two: time to train lost to outlier steps, or to steps slower than the median."""
        vals = [v for v in (self.stall_share, self.slow_share) if v is not None]
        return max(vals) if vals else None

    @property
    def knobs(self) -> dict[str, str]:
        """The threading and affinity knobs set in the run's environment (``launch_env``), name -> value."""
        try:
            got = json.loads(self.launch_env) if self.launch_env else {}
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}

    @property
    def cores(self) -> int | None:
        """CPU cores of the run's nodes, where recorded (an MLPerf system description: sockets x cores per node)."""
        per_node = self.cores_per_node
        if per_node is not None and per_node > 0 and self.n_nodes:
            return per_node * self.n_nodes
        return None

    def node_hours(self) -> float | None:
        t = self.time_to_train_s
        return None if t is None or t < 0 or not self.n_nodes else t * self.n_nodes / 3600.0

    def core_hours(self) -> float | None:
        t, cores = self.time_to_train_s, self.cores
        return None if t is None or t < 0 or cores is None else t * cores / 3600.0

    def accelerator_hours(self) -> float | None:
        """Time to train x accelerators; None for a CPU-only run (no accelerator was spent)."""
        t, n = self.time_to_train_s, self.workers
        if t is None or n is None or t < 0 or self.cpu_only:
            return None
        return t * n / 3600.0
