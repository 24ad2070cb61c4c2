"""The honestscale event contract (``SCHEMA_VERSION``, what each version added: ``VERSIONS``): the one place that defines, writes and reads events.

Standard library only. A runner imports this module inside any framework environment
(an NGC container, an MXNet venv pinned to an old NumPy) without the rest of honestscale.

One event per line, JSON, one file per rank (``<out>/<run_id>/events-rank<N>.jsonl``),
append-only, each event written with a single ``write`` of a complete line so that a
killed job keeps every event written before the kill.

The field tables below (:data:`COMMON`, :data:`KIND_FIELDS`) are the single source of
truth: the JSON Schema shipped in the package (``event_schema.json``), the field
reference in ``docs/events.md`` and the collector's fast validation are all derived
from them, and tests check that they agree.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, Unpack, cast

from honestscale import event_records as rec

SCHEMA_VERSION = 6
"""The contract version this module writes and the newest one it reads (every older one is read as it is)."""

MAX_DEPTH = 64
"""The deepest nesting of objects and arrays a line may hold (the event itself is level 1): an event is a flat
object whose extra fields may nest a little; a line nested deeper is quarantined, with this reason (Python's ``json``
gives up near 1,000 levels, so a deeper line could never be read back)."""

VERSIONS: dict[int, str] = {
    1: "The first contract: the six kinds and their fields.",
    2: "run_start records how many threads each rank ran and on which CPUs: `intra_op_threads`, "
    "`inter_op_threads`, `cpu_affinity`, `cpus_allowed` and `launch_env` (the launcher's threading and affinity "
    "knobs). All optional: a version 1 event is a valid version 2 event without them, and lands as it is.",
    3: "run_start records the parallel layout (`parallel` degrees per dimension, `pipeline_schedule`, "
    "`microbatches`, `sequence_length`, `global_batch_tokens`, `activation_checkpointing`, `compute_dtype`), "
    "the parameter counts (`params_total`, `params_embedding`, `params_active`), the `model_shape` FLOPs are "
    "recomputed from, `flops_per_token` under each named convention, `comm_dimensions`, the numbers a tool "
    "printed about itself (`claims`: MFU, TFLOP/s per accelerator, tokens/s, the peak it used) and a "
    "`declared_peak` with its source; step records `tokens`. All optional: older events land as they are, with "
    "the layout unknown (data parallel over every rank).",
    4: "Runs read from other tools' logs: a step may leave `samples` out where the log does not count them "
    "(unknown, never 0), so may run_start `world_size` where the log does not say it, and run_start records "
    "`imported` (the tool, whose ranks' numbers the log holds, what it cannot tell). Every version 3 event is a "
    "valid version 4 event.",
    5: "step records the host's contention during it: `cpu_pressure` (how long the host had more runnable work "
    "than CPUs, Linux's pressure stall information) and `cpu_steal` (the time a virtual machine's CPUs lost to "
    "other guests), so a slowdown from someone else's load is told from a warm-up. Optional: every version 4 "
    "event is a valid version 5 event, and a step without them leaves the host's contention unknown.",
    6: "run_stop records `paused_s`, the seconds between the launches of a resumed training (a job that failed "
    "or was killed and went on from its checkpoint in a new launch): no training happened then, so the time to "
    "train is the stop less the start less these. Optional: every version 5 event is a valid version 6 event.",
}
"""What each contract version added; the field reference (``docs/events.md``) lists them."""

_TYPES = ("string", "integer", "number", "boolean", "object", "array")


@dataclass(frozen=True)
class Field:
    """One field of an event: its JSON type, whether it is required, and what it means."""

    name: str
    type: str
    doc: str
    required: bool = False
    enum: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    required_before: int | None = None  # required in the contract versions below this one (then optional)

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")


KINDS = ("run_start", "step", "epoch", "eval", "system", "run_stop")
PURPOSES = ("final", "tuning", "baseline", "smoke")
LAUNCHERS = ("slurm", "torchrun", "mpirun", "horovodrun", "local")
BACKENDS = ("nccl", "gloo", "mpi", "grpc", "ps", "none")
DATA_SOURCES = ("filesystem", "in_memory", "synthetic")
STOP_CRITERIA = ("target_accuracy", "epochs", "samples", "wall_time")
SCOPES = ("end_to_end", "layer", "kernel", "communication")
SCALING = ("strong", "weak", "time_to_solution", "none")
SPLITS = ("train", "validation", "test")
# parallel dimensions of a layout: replicated data, fully sharded data, tensor, pipeline, context, expert
PARALLEL_DIMS = rec.PARALLEL_DIMS  # the contract's one list (event_records: the layout is typed there)
# A quality's name as the rules name it, whoever wrote it down: the recorder's callbacks and the readers of the same
# tools' logs give one training's metrics one name (``val_acc`` -> ``accuracy``), so the two records of one training
# can be told to be one.
QUALITY_ALIASES = {"acc": "accuracy", "top1": "accuracy", "top1_acc": "accuracy"}


def quality_name(name: str) -> str:
    """``acc`` -> ``accuracy``; any other name as it is."""
    return QUALITY_ALIASES.get(name, name)


CHECKPOINTING = ("none", "selective", "full")
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")
STATUSES = ("success", "aborted", "failed", "timeout", "cancelled")
# The environment variables that set how many threads a rank runs and where (OpenMP, BLAS libraries, the
# frameworks' own, the launchers'): run_start's launch_env records those that are set.
THREAD_KNOBS = (
    "OMP_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "OMP_DYNAMIC",
    "OMP_WAIT_POLICY",
    "GOMP_CPU_AFFINITY",
    "KMP_AFFINITY",
    "KMP_BLOCKTIME",
    "KMP_HW_SUBSET",
    "MKL_NUM_THREADS",
    "MKL_DYNAMIC",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "MXNET_CPU_WORKER_NTHREADS",
    "MXNET_OMP_MAX_THREADS",
    "SLURM_CPUS_PER_TASK",
    "SLURM_CPU_BIND",
    "SLURM_CPU_BIND_LIST",
    "HONESTSCALE_LAUNCHER_SET",
)

COMMON: tuple[Field, ...] = (
    Field(
        "schema",
        "integer",
        f"Contract version of this event; this module writes {SCHEMA_VERSION} and reads 1 to {SCHEMA_VERSION}.",
        True,
        minimum=1,
    ),
    Field("run_id", "string", "Identifier of the run, the same on every rank; also the folder name.", True),
    Field(
        "rank",
        "integer",
        "Global rank of the process that wrote the event (0-based).",
        True,
        minimum=0,
        maximum=2**31 - 1,
    ),
    Field(
        "seq",
        "integer",
        "Per-rank counter starting at 0, +1 per event: dedup on (run_id, rank, seq), gaps show loss.",
        True,
        minimum=0,
    ),
    Field("time", "number", "Wall-clock time the event was written, epoch seconds (float).", True),
    Field("kind", "string", "What the event records; decides which other fields it carries.", True, KINDS),
)

_RUN_START: tuple[Field, ...] = (
    Field("campaign", "string", "Campaign (a set of runs compared together) this run belongs to."),
    Field("name", "string", "Human-readable name of the run or configuration point."),
    Field(
        "purpose", "string", "Why the run exists; tuning runs must be reported beside finals.", enum=PURPOSES
    ),
    Field("tuning_study", "string", "Name of the hyper-parameter study a tuning run belongs to."),
    Field("tuning_trial", "string", "Trial identifier within the tuning study."),
    Field("framework", "string", "Training framework: torch, tensorflow, horovod-torch, mxnet, ...", True),
    Field("framework_version", "string", "Version string of the framework as it reports it."),
    Field("launcher", "string", "What started the ranks.", enum=LAUNCHERS),
    Field("backend", "string", "Collective communication backend.", enum=BACKENDS),
    Field(
        "world_size",
        "integer",
        "Number of ranks (workers) in the run. Required up to contract 3; since contract 4 a run read from a log "
        "that does not say it (Hugging Face's trainer_state.json) leaves it out: unknown, never 1.",
        minimum=1,
        required_before=4,
    ),
    Field("nodes", "integer", "Number of nodes the ranks ran on.", minimum=1),
    Field(
        "accelerators_per_node", "integer", "Accelerators (GPUs) used per node; 0 for CPU-only.", minimum=0
    ),
    Field(
        "accelerator", "string", "Accelerator model, e.g. 'Tesla V100-SXM2-32GB'; absent on CPU-only runs."
    ),
    Field("system", "string", "Name of the system or cluster partition the run used."),
    Field("host", "string", "Host name of the rank that wrote the event."),
    Field("cpu", "string", "Host CPU model."),
    Field("interconnect", "string", "Node interconnect, e.g. 'InfiniBand EDR', '1Gb Ethernet'."),
    Field(
        "intra_op_threads",
        "integer",
        "Threads one operator may use in this rank (intra-op parallelism), as the framework reports it: "
        "torch.get_num_threads(), TensorFlow's intra-op setting, MXNet's OMP_NUM_THREADS; 0: the framework "
        "chooses when it runs (TensorFlow's default). Since contract 2.",
        minimum=0,
    ),
    Field(
        "inter_op_threads",
        "integer",
        "Threads that run independent operators at once in this rank (inter-op parallelism): "
        "torch.get_num_interop_threads(), TensorFlow's inter-op setting, MXNet's MXNET_CPU_WORKER_NTHREADS "
        "(1 unless set); 0: the framework chooses. Since contract 2.",
        minimum=0,
    ),
    Field(
        "cpu_affinity",
        "array",
        "The CPU ids this rank may run on at run start (os.sched_getaffinity), ascending: ranks given the same "
        "CPUs compete for them. Since contract 2.",
    ),
    Field(
        "cpus_allowed",
        "integer",
        "How many CPUs this rank may run on (the length of cpu_affinity). Since contract 2.",
        minimum=1,
    ),
    Field(
        "launch_env",
        "object",
        "The threading and affinity knobs set in this rank's environment, name -> value as set (a knob not set "
        "is left out): "
        + ", ".join(THREAD_KNOBS[:-1])
        + "; HONESTSCALE_LAUNCHER_SET names those honestscale's "
        "launcher set itself (the others came from whoever started it). Since contract 2.",
    ),
    Field(
        "isolation",
        "object",
        "How alone the measurement was, at run start: exclusive (Slurm allocation not shared), host_load_1m, "
        "cpus, ranks_on_host, other_accelerator_processes (NVML), data_filesystem (e.g. ext4, nfs, lustre).",
    ),
    Field(
        "software",
        "object",
        "Software stack: cuda, cudnn, nccl, driver, python, os, mpi ... (name -> version).",
    ),
    Field("model", "string", "Model name, e.g. resnet50, mlp."),
    Field("model_params", "integer", "Number of trainable parameters.", minimum=0),
    Field("dataset", "string", "Dataset name, e.g. imagenet, digits."),
    Field("train_size", "integer", "Samples in the train split.", minimum=0),
    Field("validation_size", "integer", "Samples in the validation split (used for selection).", minimum=0),
    Field(
        "test_size", "integer", "Samples in the held-out test split (never used for selection).", minimum=0
    ),
    Field(
        "data_source",
        "string",
        "Where samples come from; synthetic/in-memory data hides I/O.",
        enum=DATA_SOURCES,
    ),
    Field("data_path", "string", "Path of the dataset on the filesystem."),
    Field("input_shape", "array", "Shape of one input sample, e.g. [3, 224, 224]."),
    Field("global_batch_size", "integer", "Samples per optimizer step summed over all ranks.", minimum=1),
    Field("local_batch_size", "integer", "Samples per optimizer step on one rank.", minimum=1),
    Field("optimizer", "string", "Optimizer name, e.g. sgd, lars, adam."),
    Field("learning_rate", "number", "Base learning rate."),
    Field("lr_schedule", "string", "Learning-rate schedule, e.g. 'cosine', 'step@30,60', 'poly2+warmup5'."),
    Field("precision", "string", "Numeric precision: fp32, tf32, fp16, bf16, amp."),
    Field("grad_compression", "string", "Gradient compression on the wire: none, fp16, powersgd, ..."),
    Field("seed", "integer", "Random seed of the run."),
    Field("stop_criterion", "string", "What ends training.", enum=STOP_CRITERIA),
    Field("stop_value", "number", "Value of the stop criterion (target accuracy, epochs, samples, seconds)."),
    Field("target_metric", "string", "Metric the target accuracy refers to, e.g. top1_accuracy."),
    Field("scope", "string", "What was timed: the whole training, or a part of it.", enum=SCOPES),
    Field("scaling", "string", "Declared scaling intent of the campaign.", enum=SCALING),
    Field(
        "config_hash", "string", "Hash over everything that defines the experiment (not the rank or seed)."
    ),
    Field("git_commit", "string", "Commit of the code that ran."),
    Field("slurm_job_id", "string", "SLURM_JOB_ID (with array index if any)."),
    Field("slurm_step_id", "string", "SLURM_STEP_ID."),
    Field("hyperparameters", "object", "Every other hyper-parameter, name -> value."),
    Field("command", "array", "Command line that started this rank, as a list of arguments."),
    Field("mlperf", "object", "For runs read from MLPerf logs: submission org, division, status, platform."),
    Field(
        "imported",
        "object",
        "For runs read from another tool's log (honestscale ingest's importers): tool, file, ranks_in_log (whose "
        "numbers the log holds: a rank, 'last', 'every rank'), rates_from, clock, unknown (what the log cannot "
        "tell, recorded as unknown: the rules say cannot verify). Since contract 4.",
    ),
    Field(
        "parallel",
        "object",
        "The parallel layout: degree per dimension, name -> integer >= 1, of "
        + ", ".join(PARALLEL_DIMS)
        + " (replicated data, fully sharded data, tensor, pipeline, context, expert parallel). "
        "dp x fsdp x tp x pp x cp = world_size; expert parallelism shares the data-parallel ranks. A dimension "
        "left out has degree 1; no `parallel` at all: data parallel over every rank. Since contract 3.",
    ),
    Field(
        "pipeline_schedule",
        "string",
        "Pipeline schedule, as torch.distributed.pipelining names it: gpipe, 1f1b, interleaved-1f1b, ... "
        "Since contract 3.",
    ),
    Field(
        "microbatches", "integer", "Microbatches per optimizer step (pipeline). Since contract 3.", minimum=1
    ),
    Field(
        "pipeline_virtual_stages",
        "integer",
        "Model chunks per pipeline rank (interleaved schedules; 1 otherwise). Since contract 3.",
        minimum=1,
    ),
    Field(
        "sequence_length",
        "integer",
        "Tokens per sample (sequence) of a language model. Since contract 3.",
        minimum=1,
    ),
    Field(
        "global_batch_tokens",
        "integer",
        "Tokens per optimizer step summed over the data-parallel replicas "
        "(global_batch_size x sequence_length). Since contract 3.",
        minimum=1,
    ),
    Field(
        "activation_checkpointing",
        "string",
        "Activations recomputed in backward: none, selective, full (hardware FLOPs then exceed model FLOPs). "
        "Since contract 3.",
        enum=CHECKPOINTING,
    ),
    Field(
        "compute_dtype",
        "string",
        "Data type of the matrix multiplies (autocast's, or the parameters' without it): the peak MFU is "
        "measured against. Since contract 3.",
        enum=DTYPES,
    ),
    Field(
        "params_total",
        "integer",
        "Parameters of the whole model (every shard, stage and expert), not one rank's. Since contract 3.",
        minimum=0,
    ),
    Field(
        "params_embedding",
        "integer",
        "Of params_total, the token (and position) embeddings; the output "
        "layer when it is not tied to them counts as a matrix multiply, not here. Since contract 3.",
        minimum=0,
    ),
    Field(
        "params_active",
        "integer",
        "Parameters used per token (a mixture of experts uses a few experts); "
        "params_total for a dense model. Since contract 3.",
        minimum=0,
    ),
    Field(
        "model_shape",
        "object",
        "The transformer's shape FLOPs are recomputed from: layers, hidden, heads, ffn_hidden, vocab, kv_heads, "
        "experts, experts_per_token. Since contract 3.",
    ),
    Field(
        "flops_per_token",
        "object",
        "Training FLOPs per token (forward and backward) as the runner counted them, convention -> FLOPs: "
        "palm (6N + 12 L H Q T: full attention), megatron (attention halved for the causal mask). Since contract 3.",
    ),
    Field(
        "comm_dimensions",
        "array",
        "Which dimensions' communication a step's t_comm holds (dp: the gradient all-reduce; pp: send/recv and "
        "the pipeline bubble, the stage's wait); a dimension not named is inside t_compute. Since contract 3.",
    ),
    Field(
        "claims",
        "object",
        "Numbers the training tool printed about itself, checked by HS107 against what the counts give, never "
        "taken as facts: mfu, hfu (fractions), tflops_per_accelerator, tokens_per_s, tokens_per_s_per_accelerator, "
        "peak_tflops (the peak it divided by), peak_dtype, flops_convention, params. Since contract 3.",
    ),
    Field(
        "declared_peak",
        "object",
        "A peak for an accelerator (or CPU) the catalogue has none for: tflops (dense), dtype, source (a "
        "datasheet or a measurement). Since contract 3.",
    ),
)

_STEP: tuple[Field, ...] = (
    Field("epoch", "integer", "Epoch the step belongs to (0-based).", minimum=0),
    Field("step", "integer", "Step index within the run on this rank (0-based).", True, minimum=0),
    Field(
        "samples",
        "integer",
        "Samples processed by this rank in this step; every rank of a tensor, pipeline or context parallel group "
        "counts its replica's samples (rates divide by the layout). Required up to contract 3; since contract 4 "
        "a step read from another tool's log that does not count samples leaves it out (unknown, never 0).",
        minimum=0,
        required_before=4,
    ),
    Field(
        "tokens",
        "integer",
        "Tokens processed by this rank in this step, counted as samples are. Since contract 3.",
        minimum=0,
    ),
    Field("t_total", "number", "Wall time of the whole step on this rank, seconds.", True, minimum=0),
    Field("t_data", "number", "Waiting for the data loader: I/O and preprocessing, seconds.", minimum=0),
    Field("t_compute", "number", "Forward and backward pass, seconds.", minimum=0),
    Field("t_comm", "number", "Gradient exchange not overlapped with compute, seconds.", minimum=0),
    Field("t_optimizer", "number", "Optimizer update, seconds.", minimum=0),
    Field("comm_measured", "boolean", "False when t_comm could not be measured (it is then 0 or absent)."),
    Field("warmup", "boolean", "True for warm-up steps that must not count in throughput."),
    Field(
        "cpu_pressure",
        "number",
        "Time during the step in which some task on the host (this run's own threads or anyone else's) was runnable "
        "and waited for a CPU, seconds: the difference of Linux's pressure stall information (/proc/pressure/cpu, "
        "'some') over the step's span on the host (a step starting within 0.25 ms of the previous step's end starts "
        "from that reading). The runners read the counters at most every 50 ms: a shorter step gets the rise over "
        "its span, linear between the readings around it (steps' sums are the readings' differences). A slowdown "
        "that comes with it is the host's load, not a warm-up. Absent where the kernel does not count it. Since "
        "contract 5.",
        minimum=0,
    ),
    Field(
        "cpu_steal",
        "number",
        "Time during the step in which the host's CPUs wanted to run while the hypervisor ran another guest "
        "(/proc/stat's steal, averaged over the CPUs), seconds: a virtual machine's noise, which cpu_pressure does "
        "not see. Read as cpu_pressure is. Absent where the kernel does not count it. Since contract 5.",
        minimum=0,
    ),
    Field(
        "iterations",
        "integer",
        "Optimizer steps this event covers (absent: 1): a log that prints one line per N steps (Megatron's "
        "log_interval, torchtitan's log_freq) gives one event per line, its times and counts the N steps' "
        "together. Since contract 4.",
        minimum=1,
        # the store's column is a 32-bit integer: more is quarantined, never a crashed batch
        maximum=2**31 - 1,
    ),
)

_EPOCH: tuple[Field, ...] = (
    Field(
        "epoch",
        "integer",
        "Epoch number as the runner counts (honestscale from 0, MLPerf logs from 1).",
        True,
        minimum=0,
    ),
    Field("train_loss", "number", "Mean training loss over the epoch on this rank; null if not finite."),
    Field("train_accuracy", "number", "Training accuracy over the epoch on this rank (0..1)."),
    Field("samples", "integer", "Samples seen by this rank in the epoch.", minimum=0),
    Field("t_total", "number", "Wall time of the epoch, seconds.", minimum=0),
)

_EVAL: tuple[Field, ...] = (
    Field("split", "string", "Which split was evaluated; only 'test' is held out.", True, SPLITS),
    Field("metric", "string", "Metric name, e.g. top1_accuracy, loss.", True),
    Field("value", "number", "Metric value (accuracy as a fraction 0..1).", True),
    Field("samples", "integer", "Samples evaluated.", minimum=0),
    Field("epoch", "integer", "Epoch after which the evaluation ran.", minimum=0),
)

_SYSTEM: tuple[Field, ...] = (
    Field("device", "integer", "Accelerator index the sample is for, if any.", minimum=0),
    Field("accel_util", "number", "Accelerator utilisation, percent.", minimum=0),
    Field("accel_mem_bytes", "integer", "Accelerator memory in use, bytes.", minimum=0),
    Field("power_w", "number", "Accelerator power draw, watts.", minimum=0),
    Field("energy_j", "number", "Accelerator total-energy counter (NVML), joules.", minimum=0),
    Field("cpu_percent", "number", "Host CPU use of this process, percent of one core.", minimum=0),
    Field("rss_bytes", "integer", "Resident memory of this process, bytes.", minimum=0),
    Field("host_load", "number", "Host 1-minute load average.", minimum=0),
)

_RUN_STOP: tuple[Field, ...] = (
    Field("status", "string", "How the run ended on this rank.", True, STATUSES),
    Field("reason", "string", "Why: the exception, the signal, the target not reached ..."),
    Field(
        "energy_j",
        "number",
        "Energy to train of the whole run, joules, measured outside the runner (MLPerf power logs: every "
        "node's AC power and the interconnect's, over run_start..run_stop); written by one rank.",
        minimum=0,
    ),
    Field(
        "paused_s",
        "number",
        "Seconds between the launches of a resumed training (each launch's end to the next's start), in which "
        "it did not train: the time to train leaves them out. Written where a run's launches are known.",
        minimum=0,
    ),
)

KIND_FIELDS: dict[str, tuple[Field, ...]] = {
    "run_start": _RUN_START,
    "step": _STEP,
    "epoch": _EPOCH,
    "eval": _EVAL,
    "system": _SYSTEM,
    "run_stop": _RUN_STOP,
}

KIND_DOCS: dict[str, str] = {
    "run_start": "Written once per rank at start: everything that defines and describes the experiment.",
    "step": "One optimizer step on one rank, with its wall time split into data, compute, communication "
    "and optimizer.",
    "epoch": "End of an epoch on one rank.",
    "eval": "An evaluation of the model on one split.",
    "system": "A sample of accelerator and host counters, taken by a sampler thread.",
    "run_stop": "Written on every exit path: success, exception, time limit, target never reached.",
}


def fields_of(kind: str) -> tuple[Field, ...]:
    """Common fields followed by the fields of ``kind``."""
    return COMMON + KIND_FIELDS[kind]


class EventError(ValueError):
    """An event that breaks the contract. ``field`` names the offending field, if one."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# Integers are 64-bit signed (what the store keeps); numbers are finite (JSON has no infinity: 1e400 overflows).
INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def _type_ok(value: Any, type_: str) -> bool:
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if type_ == "boolean":
        return isinstance(value, bool)
    if type_ == "object":
        return isinstance(value, dict)
    return isinstance(value, list)


def _json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def validate(event: Any) -> dict[str, object]:
    """Check one decoded event against the contract; return it, or raise :class:`EventError`.

    Unknown extra fields are allowed (runners may record more); a known field may be
    ``null`` unless it is required. The message names the field and what is wrong.
    """
    if not isinstance(event, dict):
        raise EventError(f"not an event: a JSON {_json_type_name(event)}, expected an object with 'kind'")
    missing_envelope = [f.name for f in COMMON if f.name not in event]
    if missing_envelope and len(missing_envelope) == len(COMMON):
        raise EventError(
            "valid JSON but not a honestscale event: none of the fields schema, run_id, rank, seq, time, kind"
        )
    schema = event.get("schema")
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA_VERSION:
        raise EventError(
            f"event schema {schema} is newer than this honestscale reads ({SCHEMA_VERSION}): "
            "upgrade honestscale, then ingest again with --force",
            "schema",
        )
    kind = event.get("kind")
    if not isinstance(kind, str) or kind not in KIND_FIELDS:
        raise EventError(f"field 'kind': {kind!r} is not one of {', '.join(KINDS)}", "kind")
    for f in fields_of(kind):
        value = event.get(f.name)
        if value is None:
            older = f.required_before is not None and isinstance(schema, int) and schema < f.required_before
            if f.required or older:
                what = "missing" if f.name not in event else "null"
                since = f" in contract version {schema}" if older else ""
                raise EventError(f"{kind}: required field '{f.name}' is {what}{since} ({f.doc})", f.name)
            continue
        if not _type_ok(value, f.type):
            raise EventError(
                f"{kind}: field '{f.name}' must be {f.type}, got {_json_type_name(value)} {value!r:.60}",
                f.name,
            )
        if f.type == "integer" and not INT_MIN <= value <= INT_MAX:
            raise EventError(
                f"{kind}: field '{f.name}' is {value:.3g}, beyond the 64-bit integers the store keeps", f.name
            )
        if f.type == "number" and not math.isfinite(value):
            raise EventError(
                f"{kind}: field '{f.name}' is not a finite number (a literal too large for a double, such as "
                "1e400); write null for a value that is not a number",
                f.name,
            )
        if f.enum is not None and value not in f.enum:
            raise EventError(
                f"{kind}: field '{f.name}' is {value!r}, expected one of {', '.join(f.enum)}", f.name
            )
        if f.minimum is not None and value < f.minimum:
            raise EventError(f"{kind}: field '{f.name}' is {value}, must be >= {f.minimum:g}", f.name)
        if f.maximum is not None and value > f.maximum:
            raise EventError(f"{kind}: field '{f.name}' is {value}, must be <= {f.maximum:.0f}", f.name)
    return event


def _too_deep(depth: int) -> str:
    return (
        f"JSON nested {depth:,} levels deep, deeper than the contract's {MAX_DEPTH}: not an event line (events are "
        "flat objects)"
    )


def _depth(value: Any) -> int:
    """How deeply objects and arrays nest in a decoded value (a scalar 0, a flat object 1), without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            todo.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def nesting(text: str) -> int:
    """How deeply objects and arrays nest in a JSON text, read as characters (strings and their escapes skipped):
    for a line too deep to decode, and for the collector's check of the lines it lands without decoding them."""
    deepest = level = 0
    quoted = escaped = False
    for ch in text:
        if quoted:
            escaped, quoted = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            quoted = True
        elif ch in "[{":
            level += 1
            deepest = max(deepest, level)
        elif ch in "]}":
            level -= 1
    return deepest


def parse_line(line: str | bytes) -> dict[str, object]:
    """Decode and validate one line of an event file; raise :class:`EventError` with the reason."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EventError(f"not UTF-8 text (byte {exc.start}): binary data, not an event line") from None
    objects: list[list[tuple[str, Any]]] = []  # every object's pairs, the outermost last

    def pairs(found: list[tuple[str, Any]]) -> dict[str, object]:
        objects.append(found)
        return dict(found)

    try:
        obj = json.loads(line, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise EventError(f"not JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise EventError(_too_deep(nesting(line))) from None
    if (depth := _depth(obj)) > MAX_DEPTH:
        raise EventError(_too_deep(depth))
    if isinstance(obj, dict):
        names = [name for name, _ in objects[-1]]
        if len(names) != len(set(obj)):
            twice = next(n for i, n in enumerate(names) if n in names[:i])
            raise EventError(
                f"field {twice!r} appears twice in the line: which value is meant is ambiguous (readers differ: "
                "some take the first, some the last); write each field once",
                twice,
            )
    refuse_unpaired_surrogates(line, obj)
    return validate(obj)


def refuse_unpaired_surrogates(text: str, decoded: Any) -> None:
    """Raise :class:`EventError` when JSON ``text`` decoded to a string holding half a UTF-16 surrogate pair.

    Python decodes the escape ``\\ud800`` alone; DuckDB (the store) refuses it, and no UTF-8 text can hold it.
    """
    if not _SURROGATE_ESCAPE.search(text):
        return
    try:
        json.dumps(decoded, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EventError(
            f"not valid Unicode: the JSON escape \\u{ord(exc.object[exc.start]):04x} is half of a surrogate "
            "pair with no other half; write text as UTF-8 (json.dumps does)"
        ) from None


# A JSON escape of a UTF-16 surrogate (\ud800-\udfff): valid only as one half of a pair.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def finite_json(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null (a diverged loss is then null, not a crash)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def event_path(out_dir: str | os.PathLike[str], run_id: str, rank: int) -> Path:
    """Where rank ``rank`` of ``run_id`` writes: ``<out_dir>/<run_id>/events-rank<rank>.jsonl``."""
    return Path(out_dir) / run_id / f"events-rank{rank}.jsonl"


def _last_seq(path: Path) -> int:
    """The seq of the last complete event in an existing file, or -1."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            tail = fh.read().split(b"\n")
    except FileNotFoundError:
        return -1
    for raw in reversed(tail):
        try:
            seq = json.loads(raw).get("seq")
        except (ValueError, AttributeError):
            continue
        if isinstance(seq, int):
            return seq
    return -1


class EventWriter:
    """Append events of one rank to ``<out_dir>/<run_id>/events-rank<rank>.jsonl``.

    Every event is validated, serialised to one line and written with a single
    ``os.write`` on a file opened with ``O_APPEND``, under a lock so that a sampler thread
    and the training loop never share a ``seq``: the line reaches the kernel before
    :meth:`emit` returns, so a killed process loses nothing it emitted. ``fsync=True``
    also survives a node crash, at the price of a disk flush per event. Reopening an
    existing file continues its ``seq``.

    Used as a context manager, leaving the block by an exception writes a
    ``run_stop`` with status ``failed`` and the exception as reason, unless a
    ``run_stop`` was already written.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        run_id: str,
        rank: int = 0,
        *,
        fsync: bool = False,
        clock: Any = None,
    ) -> None:
        if not run_id or "/" in run_id or run_id in (".", ".."):
            raise EventError(f"run_id {run_id!r} must be non-empty and usable as a folder name", "run_id")
        self.run_id = run_id
        self.rank = rank
        self.path = event_path(out_dir, run_id, rank)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._seq = _last_seq(self.path) + 1
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fsync = fsync
        self._clock = clock
        self._lock = threading.Lock()  # the system sampler thread emits beside the training loop
        self.stopped = False

    @property
    def next_seq(self) -> int:
        return self._seq

    def _now(self) -> float:
        if self._clock is not None:
            return float(self._clock())
        import time

        return time.time()

    def emit(self, kind: str, **fields: Any) -> dict[str, object]:
        """Validate and append one event of ``kind``; return it as written."""
        with self._lock:
            event: dict[str, object] = {
                "schema": SCHEMA_VERSION,
                "run_id": self.run_id,
                "rank": self.rank,
                "seq": self._seq,
                "time": self._now(),
                "kind": kind,
            }
            for key, value in fields.items():
                if value is None:
                    continue
                if type(value) is float:
                    event[key] = value if math.isfinite(value) else None
                elif isinstance(value, dict | list | tuple):
                    event[key] = finite_json(value)
                else:
                    event[key] = value
            validate(event)
            for f in fields_of(
                kind
            ):  # optional since contract 4 for imported logs only: a writer measures them
                if f.required_before is not None and event.get(f.name) is None:
                    raise EventError(f"{kind}: required field '{f.name}' is missing ({f.doc})", f.name)
            data = (json.dumps(event, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
            # The seq is taken before the write: a signal handler that raises (SIGTERM -> RunTerminated) between
            # the write and the increment would otherwise hand the same seq to the run_stop written next. An
            # interrupted write now leaves a gap, never two events with one seq.
            self._seq += 1
            written = os.write(self._fd, data)
            if written != len(data):  # pragma: no cover - only on a full disk with a short write
                raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes (disk full?)")
            if self._fsync:
                os.fsync(self._fd)
            if kind == "run_stop":
                self.stopped = True
            return event

    def run_start(self, **fields: Unpack[rec.RunStartFields]) -> rec.RunStart:
        fields.setdefault("host", socket.gethostname())
        return cast("rec.RunStart", self.emit("run_start", **fields))

    def step(self, **fields: Unpack[rec.StepFields]) -> rec.Step:
        return cast("rec.Step", self.emit("step", **fields))

    def epoch(self, **fields: Unpack[rec.EpochFields]) -> rec.Epoch:
        return cast("rec.Epoch", self.emit("epoch", **fields))

    def eval(self, **fields: Unpack[rec.EvalFields]) -> rec.Eval:
        return cast("rec.Eval", self.emit("eval", **fields))

    def system(self, **fields: Unpack[rec.SystemFields]) -> rec.System:
        return cast("rec.System", self.emit("system", **fields))

    def run_stop(self, status: str, reason: str | None = None) -> rec.RunStop:
        return cast("rec.RunStop", self.emit("run_stop", status=status, reason=reason))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            if exc is not None and not self.stopped:
                status = "cancelled" if isinstance(exc, KeyboardInterrupt) else "failed"
                self.run_stop(status, f"{type(exc).__name__}: {exc}"[:2000])
        finally:
            self.close()


def _open_text(path: Path) -> TextIO:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape", newline="\n")
    return path.open(encoding="utf-8", errors="surrogateescape", newline="\n")


def read_events(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, object] | EventError]]:
    """Yield ``(line_number, event or EventError)`` for every non-empty line of an event file.

    Lines are numbered from 1. A bad line yields an :class:`EventError` with the reason
    instead of stopping the iteration, so a reader sees every valid event around it.
    """
    with _open_text(Path(path)) as fh:
        for number, line in enumerate(fh, start=1):
            stripped = line.rstrip("\n")
            if not stripped.strip():
                continue
            try:
                yield number, parse_line(stripped.encode("utf-8", "surrogateescape"))
            except EventError as err:
                yield number, err


def json_schema() -> dict[str, object]:
    """The contract as a JSON Schema (draft 2020-12), derived from the field tables."""

    def prop(f: Field) -> dict[str, object]:
        p: dict[str, object] = {"description": f.doc}
        p["type"] = [f.type] if f.required else [f.type, "null"]
        if f.enum is not None:
            p["enum"] = list(f.enum) if f.required else [*f.enum, None]
        if f.minimum is not None:
            p["minimum"] = f.minimum if f.type == "number" else int(f.minimum)
        if f.maximum is not None:
            p["maximum"] = f.maximum if f.type == "number" else int(f.maximum)
        return p

    variants = []
    for kind in KINDS:
        fields = fields_of(kind)
        props = {f.name: prop(f) for f in fields}
        props["kind"] = {"const": kind, "description": KIND_DOCS[kind]}
        props["schema"] = {
            "type": "integer",
            "minimum": 1,
            "maximum": SCHEMA_VERSION,
            "description": COMMON[0].doc,
        }
        variants.append(
            {
                "title": kind,
                "type": "object",
                "properties": props,
                "required": [f.name for f in fields if f.required],
                "additionalProperties": True,
            }
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://honestscale.invalid/schema/events-v{SCHEMA_VERSION}.json",
        "title": f"honestscale event, contract version {SCHEMA_VERSION}",
        "description": "One JSON object per line, one file per rank: <run_id>/events-rank<N>.jsonl. Objects and "
        f"arrays nest at most {MAX_DEPTH} levels deep in a line (the event itself is level 1); a deeper line is "
        "quarantined.",
        "oneOf": variants,
    }


def markdown_reference() -> str:
    """The field reference of every kind, as Markdown (``docs/events.md`` is this text)."""
    out = [
        f"# The event contract, version {SCHEMA_VERSION}",
        "",
        "Generated from `honestscale/events.py` by `honestscale contract --markdown`; do not edit by hand.",
        "",
        "One event per line, JSON, one file per rank (`<run_id>/events-rank<N>.jsonl`), append-only, written "
        "with one `write` per complete line so a killed job keeps every event written before the kill. "
        f"Extra fields are allowed and kept (objects and arrays nested at most {MAX_DEPTH} levels deep in a line, the "
        "event itself level 1: a deeper line is quarantined); a known field may be `null` unless required. Non-finite numbers "
        "(NaN, infinity) are written as `null`; integers are 64-bit signed. A field written twice in one line is "
        "refused (readers disagree on which value counts). An event whose `schema` is newer than the reader's is "
        "quarantined, never guessed at.",
        "",
        "## Versions",
        "",
        "An event says its contract version in `schema`; honestscale reads every version up to its own, each "
        "as it is (a field a version added is absent from older events, and unknown, not zero).",
        "",
        *(f"- **{v}**: {text}" for v, text in sorted(VERSIONS.items())),
        "",
    ]

    def table(fields: tuple[Field, ...]) -> list[str]:
        rows = ["| field | type | required | meaning |", "|---|---|---|---|"]
        for f in fields:
            extra = ""
            if f.enum:
                extra = " One of: " + ", ".join(f"`{v}`" for v in f.enum) + "."
            if f.minimum is not None:
                extra += f" At least {f.minimum:g}."
            if f.maximum is not None:
                extra += f" At most {f.maximum:.0f}."
            rows.append(f"| `{f.name}` | {f.type} | {'yes' if f.required else ''} | {f.doc}{extra} |")
        return rows

    out += ["## Every event", "", *table(COMMON), ""]
    for kind in KINDS:
        out += [f"## `{kind}`", "", KIND_DOCS[kind], "", *table(KIND_FIELDS[kind]), ""]
    return "\n".join(out)
