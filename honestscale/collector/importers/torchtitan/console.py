"""torchtitan's console log (every version; what Slurm's output file or ``torchrun --tee`` keeps): the run's facts
and rank 0's step lines, with the tokens/s, TFLOP/s and MFU it printed kept as claims.

Its lines (``[rank0]:`` prefixes and colours removed) are ``[titan] 2026-11-25 23:51:21,900 - root - INFO -
<message>``, with the model's configuration (``Building llama3 debugmodel with {json}``, versions up to 0.2), the
accelerator (``CUDA capacity: NVIDIA H200 with 139.80GiB memory``), the parameter count, the peak it divides by
(``Peak FLOPS used for computing MFU: 9.890e+14``), the batch and sequence length (``Trainer is initialized with
local batch size 8, global batch size 8, ...``), the layout (``Building device mesh with parallelism: pp=1,
dp_replicate=1, dp_shard=1, cp=1, tp=1, ...``) and the step lines (``step: 1  loss: 8.0  ...  tps: 6,868  tflops:
0.49  mfu: 0.05%``; the observability branch's aggregator prints ``trainer_throughput/tps_mean: ...``). Its tps,
TFLOP/s and MFU are claims (HS107 checks them against the counts, torchtitan's FLOPs being the PaLM convention: 6 N
+ 12 L d T). What a version does not print (the model's shape, the mesh) is recorded as unknown.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers._build import (
    RankEvents,
    checked,
    config_hash,
    count,
    crash,
    run_id,
    stamp,
)
from honestscale.collector.importers.torchtitan._shared import claims

FORMAT = "torchtitan-console"
LABEL = "torchtitan console log"

_ANSI = re.compile(r"\x1b\[[^m\n]*m")  # any colour escape, even one no terminal knows: never a value
_PREFIX = re.compile(r"^(?:\[(?:rank|default)(?P<rank>\d+)\]:)+")
_STARTS = re.compile(r"^Training starts at step (?P<step>\S+)")
_DATASET = re.compile(r"^Preparing (?P<name>\S+) dataset")
# the timestamp is read loosely here and parsed apart: a line whose time is unreadable still says what it says (a
# model's configuration, the batch sizes); only what needs its time (a step, the end) is quarantined by field
_LINE = re.compile(r"\[titan\] (?P<ts>\S+ \S+) - (?P<logger>\S+) - (?P<level>\w+) - (?P<msg>.*)$")
_BUILD = re.compile(r"^Building (?P<model>\S+) (?P<flavor>\S+?)\s*with \{\s*$")
_CAPACITY = re.compile(r"^(?P<kind>CUDA|ROCm|ROCM|XPU|NPU) capacity: (?P<name>.+?) with \S+GiB memory")
_SIZE = re.compile(r"^Model (?P<model>\S+) (?P<flavor>\S+) size: (?P<n>\S+) total parameters")
_PEAK = re.compile(r"^Peak FLOPS used for computing MFU: (?P<peak>\S+)")
_TRAINER = "Trainer is initialized with "
# its facts read one by one (`local batch size 8, global batch size 8, ...`): one unreadable is quarantined by field,
# the others still read; each printed name and the field of ConsoleFacts it fills
_TRAINER_FACTS = {
    "local batch size": "local_batch",
    "global batch size": "global_batch",
    "gradient accumulation steps": "accumulation",
    "sequence length": "seq",
    "total steps": "total_steps",
}
_NO_TRAINER_FACT = (
    f"a `{_TRAINER}...` line naming none of {', '.join(_TRAINER_FACTS)}: the batch sizes are unknown"
)
_TRAINER_FACT = {name: re.compile(re.escape(name) + r" (?P<value>[^\s,]+)") for name in _TRAINER_FACTS}
_MESH = re.compile(r"^Building device mesh with parallelism: (?P<dims>.*)$")
_CHECKPOINTING = re.compile(r"^Applied (?P<kind>selective|full) activation checkpointing")
_VERSION = re.compile(r"^torchtitan version: (?P<v>\S+)")
_STEP = re.compile(
    r"^step:\s*(?P<step>\S+)\s+(?P<rest>.*)$"
)  # a step that is no number: quarantined by field
# a value is any token (`nan`, `inf` are read, to be quarantined by field, never skipped as no match)
_PAIR = re.compile(r"(?P<key>[\w/]+):\s+(?P<value>[^\s(%]+?)(?P<unit>%|GiB)?(?=[\s(]|$)")
_NOT_FINITE = re.compile(r'"(?P<key>[^"]+)":\s*(?P<value>-?Infinity|NaN)\b')
_MESH_DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")
_AGGREGATOR_RATES = (
    "none: the aggregator process prints these lines, so their timestamps are no step times, and the rates it "
    "prints are the claims themselves (no step events: the claims cannot be checked)"
)


@dataclass
class ConsoleFacts:
    """What a console says about its run, each fact None until a line prints it (a later line of the same fact
    replaces it): the model and its configuration, its parameters, the accelerator and the peak MFU is taken
    over, the batch sizes and sequence length, the device mesh, activation checkpointing, the dataset, the
    version; whose lines they are (the lowest rank printing); whether the step lines are the aggregator's."""

    rank: int = 0  # the rank whose lines are read
    prefixed: bool = False  # lines prefixed `[rankN]:` (torchrun)
    model: str | None = None
    flavor: str | None = None
    config: dict[str, object] | None = None  # the model's configuration ({}: printed, unreadable)
    params: int | None = None
    accelerator: str | None = None
    peak_printed: str | None = None  # the peak FLOP/s as printed (a number or not)
    local_batch: int | None = None
    global_batch: int | None = None
    accumulation: int | None = None
    seq: int | None = None
    total_steps: int | None = None
    trainer_line: int | None = None  # the `Trainer is initialized with` line
    mesh: dict[str, int] | None = None  # the device mesh's dimensions ({}: printed, none read)
    checkpointing: str | None = None  # selective, full
    version_printed: str | None = None  # as printed (0.0.0...: a source tree's)
    first_step: int | None = None  # `Training starts at step N`
    dataset: str | None = None
    aggregated: bool | None = None  # the step lines are the aggregator's (None: no step line yet)

    @property
    def peak(self) -> float | None:
        """The peak FLOP/s MFU is taken over."""
        return _number(self.peak_printed) if self.peak_printed is not None else None

    @property
    def version(self) -> str | None:
        """torchtitan's version (None for a source tree's, which prints 0.0.0)."""
        v = self.version_printed
        return None if v is None or v.startswith("0.0.0") else v

    @property
    def said(self) -> dict[str, object]:
        """What defines the experiment, as its config hash is taken over: each fact the console printed under the
        name it has always been hashed by (one it did not print absent), so a run's hash stays what it was."""
        facts: dict[str, object] = {
            "config": self.config,
            "model": self.model,
            "flavor": self.flavor,
            "accelerator": self.accelerator,
            "params": self.params,
            "local": self.local_batch,
            "global": self.global_batch,
            "accum": self.accumulation,
            "seq": self.seq,
            "steps": self.total_steps,
            "mesh": self.mesh,
            "checkpointing": self.checkpointing,
            "dataset": self.dataset,
            "aggregated": self.aggregated,
        }
        said = {k: v for k, v in facts.items() if v is not None}
        if self.peak_printed is not None:
            said["peak"] = self.peak
        if self.version_printed is not None:
            said["version"] = self.version
        return said

    @property
    def world_size(self) -> int | None:
        """The product of the mesh's dimensions; None without a mesh."""
        mesh = self.mesh or {}
        return math.prod(max(mesh.get(k, 1), 1) for k in _MESH_DIMS) if mesh else None

    @property
    def layout(self) -> dict[str, int]:
        """The parallel layout (the dimensions over 1; data parallel 1 when none is)."""
        mesh = self.mesh or {}
        d = {
            "pp": mesh.get("pp", 1),
            "tp": mesh.get("tp", 1),
            "cp": mesh.get("cp", 1),
            "dp": mesh.get("dp_replicate", 1),
            "fsdp": mesh.get("dp_shard", 1),
            "ep": mesh.get("ep", 1),
        }
        return {k: v for k, v in d.items() if v > 1} or {"dp": 1}

    @property
    def replica(self) -> int:
        """The ranks one model replica spans (tensor, pipeline and context parallel)."""
        layout = self.layout
        return layout.get("tp", 1) * layout.get("pp", 1) * layout.get("cp", 1)

    @property
    def shape(self) -> dict[str, int]:
        """The model's shape, from its configuration (empty when the version does not print it)."""
        return _shape(self.config or {})

    @property
    def embedding(self) -> int | None:
        """The embedding's parameters (vocabulary x hidden), from the model's shape."""
        shape = self.shape
        return shape["vocab"] * shape["hidden"] if {"vocab", "hidden"} <= set(shape) else None

    @property
    def batch_tokens(self) -> int | None:
        """The tokens of a global batch."""
        gbs, seq = self.global_batch, self.seq
        return gbs * seq if gbs and seq else None

    @property
    def stop_samples(self) -> float | None:
        """The samples the run stops at (its total steps' global batches)."""
        gbs, steps = self.global_batch, self.total_steps
        return float(gbs * steps) if gbs and steps else None

    def samples(self, span: int) -> int | None:
        """The samples of ``span`` steps (None when the batch is unknown, or split over a model-parallel replica
        one rank's line cannot tell)."""
        return self.global_batch * span if self.global_batch and self.replica == 1 else None


@dataclass(frozen=True)
class StepLine:
    """A step line of the rank read: its line number, time, step and the ``key: value`` pairs it printed."""

    line: int
    t: float
    step: int
    values: dict[str, float]

    def value(self, key: str, otherwise: str) -> float | None:
        """The value of ``key`` or, not printed, of ``otherwise`` (the aggregator's ``tps_mean``, the plain
        ``tps``)."""
        return self.values.get(key, self.values.get(otherwise))


@dataclass
class Console:
    """A console as read line by line: its run's facts, its step lines, the first line with a time (the run's
    start), the ``Training completed`` line, the traceback it ends in and its number of lines."""

    facts: ConsoleFacts
    n_lines: int
    steps: list[StepLine] = field(default_factory=list)
    start: tuple[int, float] | None = None
    completed: tuple[int, float] | None = None
    crash: str | None = None
    config_lines: list[str] | None = None  # the model's configuration's lines, while it is being read


def sniff(path: Path, head: bytes) -> bool:
    """The console: [titan] lines of torchtitan's logger."""
    text = _ANSI.sub("", head[:200_000].decode("utf-8", "replace"))
    return (
        "[titan] " in text
        and (" - root - INFO - " in text or "torchtitan" in text)
        and bool(re.search(r"torchtitan version:|Model \S+ \S+ size:|step:\s*\d+\s", text))
    )


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    """The console log."""
    out = Parsed()
    lines = [_ANSI.sub("", raw) for raw in text.splitlines()]
    console = _read(lines, out)
    if console.start is None or (not console.steps and console.facts.first_step is None):
        out.warnings.append("no step line (`step: N  loss: ...`): no run")
        return out
    console.crash = crash("\n".join(lines), console.steps[-1].line if console.steps else 0)
    out.events = _console_events(path, console, console.start, campaign, out)
    return out


# ---- reading the lines ---------------------------------------------------------------------------------------


def _read(lines: list[str], out: Parsed) -> Console:
    """The console's lines of one rank: a console of several ranks (torchrun without --local-ranks-filter)
    interleaves them, the lowest is read."""
    ranks = {int(m.group("rank")) for line in lines if (m := _PREFIX.match(line))}
    keep = min(ranks) if ranks else None
    facts = ConsoleFacts(rank=keep if keep is not None else 0, prefixed=bool(ranks))
    console = Console(facts, n_lines=len(lines))
    if len(ranks) > 1:
        out.notes.append(f"ranks {sorted(ranks)} print into this console: rank {keep}'s lines are read")
    for n, prefixed in enumerate(lines, 1):
        m0 = _PREFIX.match(prefixed)
        if len(ranks) > 1 and (m0 is None or int(m0.group("rank")) != keep):
            out.other_lines += 1
            continue
        _line(n, _PREFIX.sub("", prefixed), console, out)
    return console


def _line(n: int, line: str, console: Console, out: Parsed) -> None:
    """One line of the rank read: a line of the model's configuration, a step, the end, or a fact."""
    if console.config_lines is not None:
        _config_line(n, line, console.config_lines, console, out)
        return
    m = _LINE.search(line)
    if m is None:
        out.other_lines += 1
        return
    msg, t = m.group("msg").rstrip(), _ts(m.group("ts"))
    if t is None and (_STEP.match(msg) or msg.startswith("Training completed")):
        out.bad.append(BadLine(n, line, f"field 'timestamp': {m['ts']!r} is no time: the line is left out"))
        return
    if console.start is None and t is not None:
        console.start = (n, t)
    facts = console.facts
    if g := _BUILD.match(msg):
        facts.model, facts.flavor = g.group("model"), g.group("flavor")
        console.config_lines = []
    elif (g := _STEP.match(msg)) and not g["step"].isdigit():
        out.bad.append(
            BadLine(n, line, f"field 'step': {g['step']!r} is no whole number: the step is left out")
        )
    elif g and t is not None:
        console.steps.append(
            StepLine(n, t, int(g.group("step")), _step_values(g.group("rest"), n, line, out))
        )
        if facts.aggregated is None:
            facts.aggregated = "torchtitan.observability" in m.group("logger")
    elif msg.startswith("Training completed") and t is not None:
        console.completed = (n, t)
    else:
        _fact(msg, n, line, facts, out)


def _config_line(n: int, line: str, config_lines: list[str], console: Console, out: Parsed) -> None:
    """A line of the model's configuration; the one that closes it (``}``) reads it."""
    config_lines.append(line)
    if line.startswith("}"):
        console.facts.config = _config(config_lines, n - len(config_lines), out)
        console.config_lines = None


def _ts(text: str) -> float | None:
    return stamp(text, "%Y-%m-%d %H:%M:%S,%f")


def _number(text: str) -> float | None:
    """A number as printed; None for a word, NaN or an infinity (``float`` takes ``nan``)."""
    try:
        got = float(text.replace(",", ""))
    except ValueError:
        return None
    return got if math.isfinite(got) else None


def _config(lines: list[str], built: int, out: Parsed) -> dict[str, object]:
    """The model's configuration, printed as JSON after ``Building <model> <flavor> with {`` (line ``built``); a
    number that is not finite is quarantined by field (the field then unknown), a configuration that is no JSON
    is quarantined at the line the JSON breaks on."""
    for i, text in enumerate(lines, built + 1):
        for g in _NOT_FINITE.finditer(text):
            out.bad.append(
                BadLine(i, text, f"field {g['key']!r}: {g['value']} is no finite number: left out")
            )
    try:
        config = json.loads("{" + "\n".join(lines), parse_constant=lambda _: None)
    except json.JSONDecodeError as exc:
        at = built + exc.lineno
        why = f"the model's configuration is no JSON here ({exc.msg}): its shape is unknown"
        out.bad.append(BadLine(at, lines[exc.lineno - 1], why))
        return {}
    return config if isinstance(config, dict) else {}


def _trainer(msg: str, n: int, line: str, facts: ConsoleFacts, out: Parsed) -> None:
    """``Trainer is initialized with local batch size 8, global batch size 8, ...``: each fact printed, read; one
    that is no whole number is quarantined by field (the others still read)."""
    found = False
    for name, pattern in _TRAINER_FACT.items():
        if (g := pattern.search(msg)) is None:
            continue
        if g["value"].isdigit():
            setattr(facts, _TRAINER_FACTS[name], int(g["value"]))
            found = True
        else:
            out.bad.append(BadLine(n, line, f"field {name!r}: {g['value']!r} is no whole number: left out"))
    if not found:
        out.bad.append(BadLine(n, line, _NO_TRAINER_FACT))
    facts.trainer_line = n


def _step_values(rest: str, n: int, line: str, out: Parsed) -> dict[str, float]:
    """A step line's ``key: value`` pairs; a value that is no finite number (``loss: nan``) quarantined by field."""
    values: dict[str, float] = {}
    for p in _PAIR.finditer(rest):
        key = p["key"].split("/")[-1]
        value = checked(out, n, line, p["key"], p["value"].replace(",", ""), what=f"step's {key}")
        if value is not None:
            values[key] = value
    return values


def _whole(value: str, n: int, line: str, name: str, out: Parsed) -> int | None:
    """A whole number as the console prints it (``6,163,712``); one that is none (``NaN``, a word) quarantined
    by field and None (the fact then unknown, never a guess)."""
    if re.fullmatch(r"-?\d[\d,]*", value):
        return int(value.replace(",", ""))
    out.bad.append(BadLine(n, line, f"field {name!r}: {value!r} is no whole number: left out"))
    return None


def _mesh(dims: str, n: int, line: str, out: Parsed) -> dict[str, int]:
    """``pp=1, dp_replicate=1, ...``: each dimension read; one that is no whole number quarantined by field (the
    mesh then unknown: a world size made of the others would be wrong)."""
    pairs = re.findall(r"(\w+)=([^,\s]*)", dims)
    mesh = {k: _whole(v, n, line, f"mesh {k}", out) for k, v in pairs}
    return {k: v for k, v in mesh.items() if v is not None} if None not in mesh.values() else {}


def _fact(msg: str, n: int, line: str, facts: ConsoleFacts, out: Parsed) -> None:
    """A line that tells one fact of the run (the accelerator, the model's size, the batch sizes, the mesh ...);
    a number of it that is none is quarantined by field, never a line skipped as no match."""
    if g := _CAPACITY.match(msg):
        facts.accelerator = g.group("name")
    elif g := _SIZE.match(msg):
        facts.model, facts.flavor = g.group("model"), g.group("flavor")
        facts.params = _whole(g.group("n"), n, line, "total parameters", out)
    elif g := _PEAK.match(msg):
        facts.peak_printed = g.group("peak")
        if _number(g.group("peak")) is None:
            out.bad.append(
                BadLine(n, line, f"field 'peak FLOPS': {g.group('peak')!r} is no number: MFU unknown")
            )
    elif msg.startswith(_TRAINER):
        _trainer(msg, n, line, facts, out)
    elif g := _MESH.match(msg):
        facts.mesh = _mesh(g.group("dims"), n, line, out)
    elif g := _CHECKPOINTING.match(msg):
        facts.checkpointing = g.group("kind")
    elif g := _VERSION.match(msg):
        facts.version_printed = g.group("v")
    elif g := _STARTS.match(msg):
        facts.first_step = _whole(g.group("step"), n, line, "training starts at step", out)
    elif g := _DATASET.match(msg):
        facts.dataset = g.group("name")


def _shape(config: dict[str, object]) -> dict[str, int]:
    def part(d: dict[str, object], key: str) -> dict[str, object]:
        got = d.get(key)
        return got if isinstance(got, dict) else {}

    layer = part(config, "layer")
    attention, ffn = part(layer, "attention"), part(layer, "feed_forward")
    shape = {
        "layers": count(config.get("n_layers"), 1),
        "hidden": count(config.get("dim"), 1),
        "heads": count(attention.get("n_heads") or config.get("n_heads"), 1),
        "kv_heads": count(attention.get("n_kv_heads") or config.get("n_kv_heads"), 1),
        "ffn_hidden": count(ffn.get("hidden_dim"), 1),
        "vocab": count(config.get("vocab_size"), 1),
    }
    return {k: v for k, v in shape.items() if v is not None}


# ---- the events ----------------------------------------------------------------------------------------------


def _console_events(
    path: Path, console: Console, start: tuple[int, float], campaign: str | None, out: Parsed
) -> list[tuple[int, dict[str, object]]]:
    """The run of the rank read: its start, a step per step line (none for the aggregator's), its stop."""
    facts = console.facts
    opening = [(s.t, s.step) for s in console.steps[:1]]
    identity = f"{start[1]}|{facts.params}|{opening}|{facts.rank}"
    rank = RankEvents(run_id("torchtitan", identity), facts.rank)
    _run_start(rank, console, start, campaign)
    last_t = start[1] if facts.aggregated else _steps(rank, console, start[1], out)
    _run_stop(rank, console, last_t, out)
    return rank.numbered()


def _unknown(facts: ConsoleFacts) -> list[str]:
    unknown = []
    if facts.mesh is None:
        unknown.append("world_size (no `Building device mesh` line)")
    elif not facts.mesh:
        unknown.append("world_size (the `Building device mesh` line is unreadable: quarantined)")
    if not facts.shape:
        unknown.append("model shape (this version does not print the model's configuration)")
    return [*unknown, "the other ranks' step times"]


def _rates_from(facts: ConsoleFacts) -> str:
    """Where the run's rates come from: the console's step times, or none (the aggregator's lines)."""
    if facts.aggregated:
        said = _AGGREGATOR_RATES
    else:
        said = f"the console's timestamps between step lines (ms resolution), rank {facts.rank}'s"
    if facts.replica > 1:
        said += "; samples and tokens per step left out (model parallel: one rank's line cannot split them)"
    return said


def _claims(console: Console) -> dict[str, object]:
    steps = console.steps
    return claims(
        [s.value("tps_mean", "tps") for s in steps],
        [s.value("tflops_mean", "tflops") for s in steps],
        [s.value("mfu_pct_mean", "mfu") for s in steps],
        console.facts.peak,
    )


def _imported(facts: ConsoleFacts) -> dict[str, object]:
    """What the run's start says of the console it was read from."""
    return {
        "tool": "torchtitan",
        "layout": "console (aggregator)" if facts.aggregated else "console",
        "accelerated": True if facts.accelerator else None,
        "ranks_in_log": f"rank {facts.rank}",
        "rates_from": _rates_from(facts),
        "compute_dtype_from": "torchtitan's default mixed precision (bfloat16)",
        "unknown": _unknown(facts),
    }


def _run_start(rank: RankEvents, console: Console, start: tuple[int, float], campaign: str | None) -> None:
    facts = console.facts
    shape = facts.shape
    name = f"{facts.model if facts.model is not None else 'model'} {facts.flavor or ''}".strip()
    rank.add(
        facts.trainer_line if facts.trainer_line is not None else start[0],
        "run_start",
        start[1],
        campaign=campaign,
        name=name,
        purpose="final",
        config_hash=config_hash(facts.said),
        framework="torchtitan",
        framework_version=facts.version,
        launcher="torchrun" if facts.prefixed else None,
        world_size=facts.world_size,
        dataset=facts.dataset,
        accelerator=facts.accelerator,
        accelerators_per_node=None,
        model=facts.model,
        global_batch_size=facts.global_batch,
        local_batch_size=facts.local_batch,
        sequence_length=facts.seq,
        global_batch_tokens=facts.batch_tokens,
        scope="end_to_end",
        parallel=facts.layout if facts.mesh else None,
        activation_checkpointing=facts.checkpointing if facts.checkpointing is not None else "none",
        compute_dtype="bf16",
        params_total=facts.params,
        params_embedding=facts.embedding if facts.params else None,
        params_active=facts.params,
        model_shape=shape or None,
        claims=_claims(console) or None,
        stop_criterion="samples",
        stop_value=facts.stop_samples,
        imported=_imported(facts),
    )


def _steps(rank: RankEvents, console: Console, t: float, out: Parsed) -> float:
    """A step per step line after the one before (its time the span since that line's); a step that does not
    follow, or goes back in time, is no step. The last step's time."""
    facts = console.facts
    previous_step, previous_t = (facts.first_step if facts.first_step is not None else 1) - 1, t
    first = previous_step
    for s in console.steps:
        span = s.step - previous_step
        if span <= 0:
            out.warnings.append(
                f"line {s.line}: step {s.step} does not follow step {previous_step}: not a step"
            )
            continue
        total = s.t - previous_t
        if total < 0:
            out.warnings.append(f"line {s.line}: no time for step {s.step}: not a step")
            previous_step = s.step
            continue
        samples = facts.samples(span)
        rank.add(
            s.line,
            "step",
            s.t,
            step=s.step - 1,
            samples=samples,
            tokens=samples * facts.seq if samples is not None and facts.seq else None,
            t_total=total,
            iterations=span,
            train_loss=s.value("loss", "loss_mean"),
            comm_measured=False,
            warmup=previous_step == first,
        )
        previous_step, previous_t = s.step, s.t
    return previous_t


def _run_stop(rank: RankEvents, console: Console, t: float, out: Parsed) -> None:
    """The run's stop: at ``Training completed``, a failure when the console ends in a traceback, else none."""
    if console.completed is not None:
        rank.add(console.completed[0], "run_stop", console.completed[1], status="success")
    elif console.crash is not None:
        why = f"the console ends in a traceback: {console.crash}"
        rank.add(console.n_lines, "run_stop", t, status="failed", reason=why)
    else:
        out.notes.append("no `Training completed` line: the run is left without a stop (incomplete)")
