"""Megatron-LM (and NeMo's Megatron) training logs: the arguments block, the per-interval iteration lines and the
validation lines, as ``pretrain_gpt.py`` prints them.

* ``------------------------ arguments ------------------------`` ... ``  name ...... value`` ...
  ``-------------------- end of arguments ---------------------``: the layout (tensor, pipeline, context, expert
  and data parallel sizes, ``world_size``), the batch (micro and global), the sequence length, the model's shape
  (layers, hidden, heads, query groups, FFN, padded vocabulary), the precision and the recomputation.
* `` [2026-11-25 23:59:01] iteration       10/     100 | consumed samples: 320 | elapsed time per iteration (ms):
  123.4 | throughput per GPU (TFLOP/s/GPU): 45.6 | ... | global batch size: 32 | lm loss: 1.0E+01 | ...``:
  printed by the last rank, each line the mean of the ``log_interval`` iterations since the line before. One step
  event per line: its samples are the consumed samples since the line before (every replica's: the line is global),
  its time the mean iteration time times the iterations it covers; the TFLOP/s per GPU it prints are a claim.
* `` validation loss at iteration 50 | lm loss value: 5.1E+00 | lm loss PPL: 1.6E+02 |`` and ``... at the end of
  training for val data`` / ``for test data``: evaluations.
* ``[before the start of training step] datetime: 2026-11-25 23:58:59`` and ``[after training is done] datetime:``:
  the run's start and end (the log's local time, read as UTC: only differences are used).

The log is one rank's (the last): the run's numbers come from it alone, said in ``imported.ranks_in_log``.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from statistics import harmonic_mean
from typing import Any

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers._build import (
    RankEvents,
    checked,
    config_hash,
    count,
    crash,
    number,
    run_id,
    stamp,
)

FORMAT = "megatron-log"
LABEL = "Megatron-LM training log"

_ARGS_START = re.compile(r"^-+ arguments -+\s*$")
_ARGS_END = re.compile(r"^-+ end of arguments -+\s*$")
_ARG = re.compile(r"^\s+(\w+) \.{2,} (.*?)\s*$")
_ITERATION = re.compile(
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\]\s*)?iteration\s+(?P<it>\d+)/\s*(?P<of>\d+) \|(?P<rest>.*)$"
)
# an iteration line whose numbers are unreadable (`iteration oops/ 100 |`): quarantined by field, never counted as
# another line (the next line's step would then cover its iterations in silence)
_ITERATION_LIKE = re.compile(r"\biteration\s+(?P<it>\S+)/\s*(?P<of>\S+) \|.*\| elapsed time per iteration")
_UNREADABLE_ITERATION = (
    "field {field!r}: {value!r} is no whole number: the line is left out (an iteration line's iterations are then "
    "covered by the next one's step)"
)
_VALIDATION = re.compile(
    r"validation loss (?:at iteration (?P<it>\S+?)(?: on (?P<set>\w+) set)?|at the end of training for (?P<which>\w+) data)\s*\|(?P<rest>.*)$"
)
_PADDED = re.compile(r"> padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (?P<n>\d+)\)")
_ENERGY = re.compile(r"^Total training energy \(GPU\): (?P<mj>\S+) MJ")
_DATETIME = re.compile(
    r"\[(?P<what>before the start of training step|after training is done)\] datetime: (?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)"
)
_VERSIONS = re.compile(r"^> (?P<what>PyTorch|Megatron-Core|Transformer Engine) version \.+ (?P<v>\S+)")
_PARAMS = re.compile(
    r"number of parameters on \((?P<dims>[\w, ]+)\) model parallel rank \((?P<ranks>[\d, ]+)\): (?P<n>\d+)"
)
# arguments that do not change the experiment: the seed, where things are written, how much is logged
_NOT_CONFIG = {"save", "load", "rank", "local_rank", "distributed_timeout_minutes"}
_NOT_CONFIG_PARTS = re.compile(r"seed|_dir$|_path$|_name$|_port$|^log_|^profile|^wandb|^tensorboard|timing_|"
                               r"logger|snapshot|flight_recorder|^save_|^load_|_interval$|^exit_")  # fmt: skip
_SNIFF = re.compile(rb"^-+ arguments -+\s*$|\| elapsed time per iteration \(ms\):", re.MULTILINE)


def sniff(path: Path, head: bytes) -> bool:
    return bool(_SNIFF.search(head)) and b"iteration" in head


def _when(text: str) -> float | None:
    return stamp(text, "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")


def _value(raw: str) -> Any:
    raw = raw.strip()
    if raw in ("True", "False"):
        return raw == "True"
    if raw == "None":
        return None
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


# the arguments read as whole numbers (the layout, the batch, the shape): one that is neither a count nor None
# (unset) is quarantined by field, never read as unset
_COUNTS = frozenset(
    [
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
        "data_parallel_size",
        "world_size",
        "global_batch_size",
        "micro_batch_size",
        "seq_length",
        "max_position_embeddings",
        "num_layers",
        "hidden_size",
        "ffn_hidden_size",
        "num_attention_heads",
        "num_query_groups",
        "kv_channels",
        "num_experts",
        "moe_router_topk",
        "train_iters",
        "log_interval",
    ]
)


def _finite(value: Any, name: str, line: int, raw: str, out: Parsed) -> bool:
    """An argument that is a number is finite, and one read as a count is one, or it is quarantined by field (never
    kept to vanish from the hyper-parameters, or to be read as unset, later)."""
    if (
        name in _COUNTS
        and value is not None
        and (not isinstance(value, int) or isinstance(value, bool) or value < 0)
    ):
        out.bad.append(BadLine(line, raw, f"field {name!r}: {value!r} is no whole number: left out"))
        return False
    return not isinstance(value, float) or checked(out, line, raw, name, value, what="argument") is not None


Fields = dict[str, int | float]  # an iteration's or validation's numbers, by the log's names


def _fields(rest: str, line: int, raw: str, out: Parsed) -> Fields:
    """``| key: value | key: value |`` -> {key: value}: every value of an iteration or validation line is a number,
    and one that is no finite number (``lm loss: NAN``, what ``{:E}`` writes for a diverged loss; a word) is
    quarantined by field, never left out in silence."""
    got: Fields = {}
    for part in rest.split("|"):
        key, sep, value = part.partition(":")
        parsed = _value(value)
        if (
            sep
            and checked(out, line, raw, key.strip(), parsed, what="value") is not None
            and isinstance(parsed, int | float)
        ):
            got[key.strip()] = parsed
    return got


@dataclass
class _Read:
    """What the log's lines said, as they are read."""

    out: Parsed
    args: dict[str, Any] = field(default_factory=dict)
    iterations: list[tuple[int, Fields, float | None]] = field(default_factory=list)  # line, fields, time
    validations: list[tuple[int, str, int | None, Fields]] = field(default_factory=list)
    began: tuple[int, float] | None = None
    ended: tuple[int, float] | None = None


def _progress(line: str, n: int, r: _Read) -> bool:
    """An iteration or validation line (read, or quarantined by field when its iteration is no number)."""
    if m := _ITERATION.search(line):
        fields = _fields(m.group("rest"), n, line, r.out)
        fields["iteration"], fields["train_iters"] = int(m.group("it")), int(m.group("of"))
        r.iterations.append((n, fields, _when(m.group("ts")) if m.group("ts") else None))
    elif m := _ITERATION_LIKE.search(line):
        field_, value = ("iteration", m["it"]) if not m["it"].isdigit() else ("train_iters", m["of"])
        r.out.bad.append(BadLine(n, line, _UNREADABLE_ITERATION.format(field=field_, value=value)))
    elif (m := _VALIDATION.search(line)) and m["it"] and not m["it"].isdigit():
        r.out.bad.append(BadLine(n, line, _UNREADABLE_ITERATION.format(field="iteration", value=m["it"])))
    elif m:
        split = "test" if "test" in (m.group("set"), m.group("which")) else "validation"
        it = count(int(m.group("it"))) if m.group("it") else None
        r.validations.append((n, split, it, _fields(m.group("rest"), n, line, r.out)))
    else:
        return False
    return True


def _fact(line: str, n: int, r: _Read) -> bool:
    """A line that tells one fact of the run: the padded vocabulary, the energy, versions, a shard's parameters,
    when training began or ended."""
    if m := _PADDED.search(line):
        r.args["padded_vocab_size"] = int(m.group("n"))
    elif m := _ENERGY.match(line):
        mj = checked(r.out, n, line, "Total training energy (GPU)", m["mj"], least=0.0, what="energy")
        if mj is not None:
            r.args["_energy_mj"] = mj
    elif m := _VERSIONS.match(line):
        r.args.setdefault("_versions", {})[m.group("what")] = m.group("v")
    elif m := _PARAMS.search(line):
        r.args.setdefault("_shard_params", []).append((m.group("ranks").replace(" ", ""), int(m.group("n"))))
    elif (m := _DATETIME.search(line)) and (t := _when(m.group("ts"))) is not None:
        if m.group("what").startswith("before"):
            r.began = (n, t)
        else:
            r.ended = (n, t)
    else:
        return False
    return True


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    r = _Read(Parsed())
    in_args = False
    for n, line in enumerate(text.splitlines(), 1):
        if in_args:
            if _ARGS_END.match(line):
                in_args = False
            elif (m := _ARG.match(line)) and _finite(value := _value(m.group(2)), m.group(1), n, line, r.out):
                r.args[m.group(1)] = value
        elif _ARGS_START.match(line):
            in_args = True
        elif not (_progress(line, n, r) or _fact(line, n, r)):
            r.out.other_lines += 1
    if not r.iterations and not r.args:
        r.out.warnings.append(
            "no iteration line (`iteration N/ M | ... elapsed time per iteration (ms)`) and no arguments block: no run"
        )
        return r.out
    r.out.events = _events(path, text, r.args, r.iterations, r.validations, r.began, r.ended, campaign, r.out)
    return r.out


def _layout(args: dict[str, Any]) -> dict[str, int]:
    degrees = {
        "tp": count(args.get("tensor_model_parallel_size"), 1),
        "pp": count(args.get("pipeline_model_parallel_size"), 1),
        "cp": count(args.get("context_parallel_size"), 1),
        "ep": count(args.get("expert_model_parallel_size"), 1),
        "dp": count(args.get("data_parallel_size"), 1),
    }
    return {k: v for k, v in degrees.items() if v is not None}


def _dtype(args: dict[str, Any]) -> str | None:
    if args.get("fp8"):
        return "fp8"
    if args.get("bf16"):
        return "bf16"
    if args.get("fp16"):
        return "fp16"
    return "fp32" if args else None


def _shape(args: dict[str, Any]) -> dict[str, int]:
    shape = {
        "layers": count(args.get("num_layers"), 1),
        "hidden": count(args.get("hidden_size"), 1),
        "heads": count(args.get("num_attention_heads"), 1),
        "kv_heads": count(args.get("num_query_groups"), 1) if args.get("group_query_attention") else None,
        "ffn_hidden": count(args.get("ffn_hidden_size"), 1),
        "vocab": count(args.get("padded_vocab_size"), 1),
        "experts": count(args.get("num_experts"), 1),
        "experts_per_token": count(args.get("moe_router_topk"), 1) if args.get("num_experts") else None,
    }
    return {k: v for k, v in shape.items() if v is not None}


def _params(args: dict[str, Any]) -> tuple[int | None, int | None]:
    """Total and embedding parameters of a dense GPT from its printed shape (Megatron prints each model-parallel
    rank's own count, a shard, not the model's), None where the shape is not all there or not dense."""
    s = _shape(args)
    need = ("layers", "hidden", "heads", "ffn_hidden", "vocab")
    if any(k not in s for k in need) or args.get("num_experts"):
        return None, None
    h, layers, ffn, vocab = s["hidden"], s["layers"], s["ffn_hidden"], s["vocab"]
    kv = s.get("kv_heads", s["heads"])
    head_dim = count(args.get("kv_channels"), 1) or h // s["heads"]
    bias = 0 if args.get("disable_bias_linear") else 1
    gated = 2 if args.get("swiglu") else 1
    rms = args.get("normalization") == "RMSNorm"
    norm = h if rms else 2 * h
    qkv = h * head_dim * (s["heads"] + 2 * kv) + bias * head_dim * (s["heads"] + 2 * kv)
    proj = s["heads"] * head_dim * h + bias * h
    mlp = h * ffn * gated + bias * ffn * gated + ffn * h + bias * h
    per_layer = qkv + proj + mlp + 2 * norm
    embedding = vocab * h
    if args.get("position_embedding_type") == "learned_absolute":
        embedding += count(args.get("max_position_embeddings"), 1) or 0
        embedding += (count(args.get("max_position_embeddings"), 1) or 0) * (h - 1)
    output = 0 if not args.get("untie_embeddings_and_output_weights") else vocab * h
    total = layers * per_layer + norm + embedding + output
    return total, embedding


Iteration = tuple[int, Fields, float | None]  # line, its fields, its timestamp
Validation = tuple[int, str, int | None, Fields]  # line, split, iteration, its fields


def _clock(iterations: list[Iteration], began: tuple[int, float] | None, out: Parsed) -> tuple[float, str]:
    """When the run started (the log's first timestamp) and how its clock reads; 0 (said) where it has none."""
    stamps = [t for _, _, t in iterations if t is not None]
    start_time = began[1] if began else (stamps[0] if stamps else None)
    if start_time is None:
        out.warnings.append("no timestamp in the log: the run's times count from 0, its date is unknown")
        return 0.0, "no timestamp in the log: times count from 0 (the run's date is unknown)"
    return start_time, "the log's local timestamps, read as UTC"


def _claims(iterations: list[Iteration]) -> dict[str, Any]:
    """Megatron-LM's own TFLOP/s per GPU, as a claim (the lines after the first: the first interval holds the
    warm-up, compilation and the allocator). Not one of honestscale's conventions: its count adds the logits layer."""
    tflops = [
        v for _, f, _ in iterations if (v := number(f.get("throughput per GPU (TFLOP/s/GPU)"))) is not None
    ]
    if not tflops or min(tflops) <= 0:
        return {}
    used = tflops[1:] or tflops
    return {"tflops_per_accelerator": harmonic_mean(used),
            "flops_convention": "num_floating_point_operations of pretrain_gpt (the logits layer counted)",
            "from": f"harmonic mean of the {len(used)} per-interval values printed after the first"}  # fmt: skip


def _batches(args: dict[str, Any], layout: dict[str, int], gbs: int | None) -> dict[str, Any]:
    """The batch per data-parallel replica, the microbatches per step and the stop (samples) the arguments give."""
    dp, iters = layout.get("dp"), count(args.get("train_iters"), 1)
    micro = count(args.get("micro_batch_size"), 1) or 1
    return {"local_batch_size": (gbs // dp) if gbs and dp and gbs % dp == 0 else None,
            "microbatches": (gbs // micro // dp) if gbs and dp else None,
            "stop_criterion": "samples" if gbs and iters else None,
            "stop_value": float(gbs * iters) if gbs and iters else None}  # fmt: skip


def _software(args: dict[str, Any], versions: dict[str, Any]) -> dict[str, Any]:
    """The configuration's hash (what defines the experiment), the software and the precision and recomputation."""
    wanted = {k: v for k, v in args.items() if k not in _NOT_CONFIG and not _NOT_CONFIG_PARTS.search(k)}
    software = {k: v for k, v in {"torch": versions.get("PyTorch"),
                                  "transformer_engine": versions.get("Transformer Engine")}.items() if v}  # fmt: skip
    recompute = {"full": "full", "selective": "selective"}.get(str(args.get("recompute_granularity")), "none")
    return {"framework_version": versions.get("Megatron-Core"), "config_hash": config_hash(wanted | {"versions": versions}),
            "software": software or None, "activation_checkpointing": recompute if args else None,
            "compute_dtype": _dtype(args)}  # fmt: skip


def _imported(shards: list[Any], energy: float | None, rates_from: str, clock_note: str,
              unknown: list[str]) -> dict[str, Any]:  # fmt: skip
    return {"tool": "Megatron-LM", "ranks_in_log": "last", "accelerated": True, "params_printed": dict(shards) or None,
            "energy_gpu_printed_j": energy * 1e6 if energy else None, "rates_from": rates_from, "clock": clock_note,
            "unknown": [*unknown, "accelerator (not printed by Megatron)", "per-iteration times inside an interval"]}  # fmt: skip


def _start(rank: RankEvents, at: int, start_time: float, args: dict[str, Any], first: dict[str, Any],
           campaign: str | None, clock_note: str, claims: dict[str, Any], out: Parsed) -> tuple[int, int | None, int | None]:  # fmt: skip
    """run_start from the arguments block; returns the model-parallel degree of a replica, the global batch and the
    sequence length."""
    world = count(args.get("world_size"), 1)
    unknown = []
    if world is None:
        unknown.append("world_size (no arguments block)")
        out.warnings.append("no `arguments` block: the world size and layout are unknown")
    gbs = count(args.get("global_batch_size"), 1) or count(first.get("global batch size"), 1)
    seq = count(args.get("seq_length"), 1)
    total, embedding = _params(args)
    layout = _layout(args)
    replica = layout.get("tp", 1) * layout.get("pp", 1) * layout.get("cp", 1)
    versions, energy, shards = (
        args.pop("_versions", {}),
        args.pop("_energy_mj", None),
        args.pop("_shard_params", []),
    )
    if shards and total is not None and replica == 1 and shards[0][1] != total:
        out.warnings.append(f"the parameters computed from the printed shape ({total:,}) differ from the count "
                            f"Megatron printed ({shards[0][1]:,}): the shape's count is used")  # fmt: skip
    rates_from = "the last rank's per-interval lines (global batch, mean iteration time)"
    if replica > 1:
        rates_from += (
            "; samples and tokens per step left out: tensor/pipeline/context parallel, one rank's line"
        )
    sw, batches = _software(args, versions), _batches(args, layout, gbs)
    rank.add(
        at, "run_start", start_time,
        campaign=campaign, name=f"gpt {args.get('num_layers', '?')}x{args.get('hidden_size', '?')}", purpose="final",
        framework="megatron-lm", framework_version=sw["framework_version"], config_hash=sw["config_hash"],
        software=sw["software"], world_size=world, model="gpt", dataset="mock" if args.get("mock_data") else None,
        data_source="synthetic" if args.get("mock_data") else None, global_batch_size=gbs,
        local_batch_size=batches["local_batch_size"],
        optimizer=args.get("optimizer") if isinstance(args.get("optimizer"), str) else None,
        learning_rate=number(args.get("lr")), seed=count(args.get("seed")),
        stop_criterion=batches["stop_criterion"], stop_value=batches["stop_value"],
        scope="end_to_end", parallel=layout or None, microbatches=batches["microbatches"],
        sequence_length=seq, global_batch_tokens=gbs * seq if gbs and seq else None,
        activation_checkpointing=sw["activation_checkpointing"], compute_dtype=sw["compute_dtype"],
        params_total=total, params_embedding=embedding,
        params_active=total, model_shape=_shape(args) or None, claims=claims or None,
        hyperparameters={k: v for k, v in args.items() if isinstance(v, int | float | str | bool)} or None,
        imported=_imported(shards, energy, rates_from, clock_note, unknown),
    )  # fmt: skip
    return replica, gbs, seq


def _samples(replica: int, previous: tuple[int, int | None] | None, consumed: int | None, gbs: int | None,
             span: int) -> int | None:  # fmt: skip
    """The samples a line's iterations trained: the consumed samples' growth, else the global batch per iteration;
    unknown for one rank's line of a model-parallel run (every rank's share cannot be told)."""
    if replica > 1:
        return None
    if previous and previous[1] is not None and consumed is not None:
        return consumed - previous[1]
    return gbs * span if gbs else None


def _steps(rank: RankEvents, iterations: list[Iteration], interval: int | None, start_time: float, replica: int,
           gbs: int | None, seq: int | None, out: Parsed) -> list[tuple[int, float]]:  # fmt: skip
    """One step event per iteration line (the mean of ``log_interval`` iterations); returns (iteration, time) of each."""
    clock = start_time
    previous: tuple[int, int | None] | None = None  # (iteration, consumed samples) of the line before
    spans = set()
    step_times: list[tuple[int, float]] = []  # (iteration, time of its line)
    for line, fields, _ts in iterations:
        it = int(fields["iteration"])  # always a whole number: _progress reads it so
        raw = json.dumps(
            fields, default=str
        )  # the line's fields (a negative or NaN time: quarantined by field)
        elapsed = checked(out, line, raw, "elapsed time per iteration (ms)", fields.get("elapsed time per iteration (ms)"),
                          least=0.0, what="iteration time")  # fmt: skip
        consumed = count(fields.get("consumed samples"))
        # the first line covers the iterations since the last line the log would have printed (a resumed run
        # starts past 0: iteration 55 of a log_interval of 5 covers 51-55, not 1-55)
        span = it - previous[0] if previous else (min(it, interval) if interval else (1 if it > 1 else it))
        if span <= 0 or elapsed is None:
            out.warnings.append(
                f"line {line}: iteration {it} does not follow {previous[0] if previous else 0}: not a step"
            )
            continue
        spans.add(span)
        samples = _samples(replica, previous, consumed, gbs, span)
        seconds = elapsed / 1000.0 * span
        clock += seconds
        rank.add(line, "step", clock, step=it - 1, samples=samples,
                 tokens=samples * seq if samples is not None and seq else None, t_total=seconds,
                 iterations=span, warmup=previous is None,
                 lm_loss=checked(out, line, raw, "lm loss", fields.get("lm loss"), what="loss"),
                 tflops_per_gpu=number(fields.get("throughput per GPU (TFLOP/s/GPU)")),
                 energy_per_gpu_j=number(fields.get("energy per GPU (J/iter/GPU)")),
                 power_per_gpu_w=number(fields.get("power per GPU (W/GPU)")),
                 learning_rate=number(fields.get("learning rate")))  # fmt: skip
        step_times.append((it, clock))
        previous = (it, consumed)
    if spans - {1}:
        out.notes.append(
            f"each iteration line is the mean of {sorted(spans)} iterations (log_interval): one step event per "
            "line, with `iterations` saying how many; the variation between iterations inside it is not in the log"
        )
    return step_times


def _evaluations(rank: RankEvents, validations: list[Validation], step_times: list[tuple[int, float]],
                 ended: tuple[int, float] | None, clock: float, out: Parsed) -> None:  # fmt: skip
    """Each validation's values, at the time of the step line that covers its iteration (after training: the end)."""
    its = [i for i, _ in step_times]
    ordered = all(a <= b for a, b in itertools.pairwise(its))  # a resumed log may count again: then scanned
    for line, split, it, fields in validations:
        after = ended[1] if ended else clock
        if it is None:
            when = after
        elif (
            ordered
        ):  # the first step line at or past the validation's iteration, by bisection (linear overall)
            k = bisect.bisect_left(its, it)
            when = step_times[k][1] if k < len(its) else after
        else:
            when = next((t for i, t in step_times if i >= it), after)
        if ended is not None and line > ended[0]:
            when = ended[1]
        for key, value in fields.items():
            if not key.endswith(" value"):
                continue
            v = checked(out, line, json.dumps(fields, default=str), key, value, what="validation value")
            if v is None:
                continue
            rank.add(line, "eval", when, split=split, metric=key.removesuffix(" value").replace(" ", "_"), value=v,
                     iteration=it)  # fmt: skip


def _stop(rank: RankEvents, text: str, iterations: list[Iteration], ended: tuple[int, float] | None, clock: float,
          out: Parsed) -> None:  # fmt: skip
    """The run's stop: a success at its last iteration, a failure where the log ends in a traceback; else none
    (still running, or killed: said, as an MLPerf log without run_stop)."""
    last = iterations[-1][1] if iterations else None
    if last is not None and last["iteration"] >= last["train_iters"]:
        stop_time = ended[1] if ended and ended[1] >= clock else clock
        rank.add(ended[0] if ended else iterations[-1][0], "run_stop", stop_time, status="success")
    elif (raised := crash(text, iterations[-1][0] if iterations else 0)) is not None:
        rank.add(ended[0] if ended else (iterations[-1][0] if iterations else 1), "run_stop", clock, status="failed",
                 reason=f"the log ends in a traceback: {raised}")  # fmt: skip
    else:
        out.notes.append(
            f"the log ends at iteration {last['iteration']} of {last['train_iters']}"
            if last is not None
            else "the log ends before its first iteration line"
        )
        out.notes[-1] += ": the run is left without a stop (incomplete: still running, or killed)"


def _events(
    path: Path,
    text: str,
    args: dict[str, Any],
    iterations: list[Iteration],
    validations: list[Validation],
    began: tuple[int, float] | None,
    ended: tuple[int, float] | None,
    campaign: str | None,
    out: Parsed,
) -> list[tuple[int, dict[str, Any]]]:
    """The run of one Megatron-LM log as events: its start, a step per iteration line, its evaluations, its stop."""
    first = iterations[0][1] if iterations else {}
    start_time, clock_note = _clock(iterations, began, out)
    identity = f"{start_time}|{sorted((k, str(v)) for k, v in args.items())}|{first}"
    rank = RankEvents(run_id("megatron", identity), 0)
    at = began[0] if began else iterations[0][0] if iterations else 1
    interval = count(args.get("log_interval"), 1)
    replica, gbs, seq = _start(
        rank, at, start_time, args, first, campaign, clock_note, _claims(iterations), out
    )
    step_times = _steps(rank, iterations, interval, start_time, replica, gbs, seq, out)
    clock = step_times[-1][1] if step_times else start_time
    _evaluations(rank, validations, step_times, ended, clock, out)
    _stop(rank, text, iterations, ended, clock, out)
    return rank.numbered()
