"""torchtitan's logs: the console (every version), the per-rank experiment metrics JSONL and the per-rank
structured system logs of its two layouts.

* **Console** (what Slurm's output file or ``torchrun --tee`` keeps; ``[rank0]:`` prefixes and colours removed):
  ``[titan] 2026-11-25 23:51:21,900 - root - INFO - <message>`` with the model's configuration (``Building llama3
  debugmodel with {json}``, versions up to 0.2), the accelerator (``CUDA capacity: NVIDIA H200 with 139.80GiB
  memory``), the parameter count, the peak it divides by (``Peak FLOPS used for computing MFU: 9.890e+14``), the
  batch and sequence length (``Trainer is initialized with local batch size 8, global batch size 8, ...``), the
  layout (``Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=1, cp=1, tp=1, ...``) and the
  step lines (``step: 1  loss: 8.0  ...  tps: 6,868  tflops: 0.49  mfu: 0.05%``; the observability branch's
  aggregator prints ``trainer_throughput/tps_mean: ...``). Its tps, TFLOP/s and MFU are claims (HS107 checks them
  against the counts, torchtitan's FLOPs being the PaLM convention: 6 N + 12 L d T). The console is rank 0's.
* **Experiment metrics** (``experiment_logs/<source>_rank_<r>_experiment.jsonl``, the observability stack
  pytorch/torchtitan#2601-#2607): ``{"key", "reduce", "sum"+"weight" | "value", "step", "rank", "source",
  "caller", "timestamp"}``; one step event per step and rank from ``trainer_time/*_s``.
* **System logs**: layout 1 (the same stack: ``system_logs/<source>_rank_<r>_system.jsonl``, each line
  ``{"int": {...}, "normal": {...}, "double": {...}, "normvector": {...}}``) and layout 2 (main since May 2026 and
  0.3: ``structured_logs/<source>.global_rank_<r>.<time>-<id>.jsonl``, flat). Both write ``<name>_start`` /
  ``<name>_end`` records, the end's ``value`` the span in ms: ``step``, ``fetching_batch``, ``fwd_bwd``, ``optim``;
  layout 2 also the rank's ``local_valid_tokens``. A layout-1 system log beside an experiment log holds the same
  spans: it is read with it, not as a second run.

What a file does not say (the world size in the JSONL files, the model's shape in a console of a version that
does not print it) is recorded as unknown; the JSONL files of one dump folder are one run (its ranks).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
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

FORMAT = "torchtitan-console"
LABEL = "torchtitan console log"
EXPERIMENT = "torchtitan-experiment"
EXPERIMENT_LABEL = "torchtitan experiment metrics (per rank)"
SYSTEM = "torchtitan-system"
SYSTEM_LABEL = "torchtitan structured system log (per rank)"

_ANSI = re.compile(r"\x1b\[[^m\n]*m")  # any colour escape, even one no terminal knows: never a value
_PREFIX = re.compile(r"^(?:\[(?:rank|default)(?P<rank>\d+)\]:)+")
_STARTS = re.compile(r"^Training starts at step (?P<step>\d+)")
_DATASET = re.compile(r"^Preparing (?P<name>\S+) dataset")
# the timestamp is read loosely here and parsed apart: a line whose time is unreadable still says what it says (a
# model's configuration, the batch sizes); only what needs its time (a step, the end) is quarantined by field
_LINE = re.compile(r"\[titan\] (?P<ts>\S+ \S+) - (?P<logger>\S+) - (?P<level>\w+) - (?P<msg>.*)$")
_BUILD = re.compile(r"^Building (?P<model>\S+) (?P<flavor>\S+?)\s*with \{\s*$")
_CAPACITY = re.compile(r"^(?P<kind>CUDA|ROCm|ROCM|XPU|NPU) capacity: (?P<name>.+?) with [\d.]+GiB memory")
_SIZE = re.compile(r"^Model (?P<model>\S+) (?P<flavor>\S+) size: (?P<n>[\d,]+) total parameters")
_PEAK = re.compile(r"^Peak FLOPS used for computing MFU: (?P<peak>[\d.e+]+)")
_TRAINER = "Trainer is initialized with "
# its facts read one by one (`local batch size 8, global batch size 8, ...`): one unreadable is quarantined by field,
# the others still read
_TRAINER_FACTS = {
    "local batch size": "local",
    "global batch size": "global",
    "gradient accumulation steps": "accum",
    "sequence length": "seq",
    "total steps": "steps",
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


def _head_lines(head: bytes, n: int = 3) -> list[dict[str, Any]]:
    out = []
    for raw in head.split(b"\n")[:n]:
        try:
            got = json.loads(raw)
        except ValueError:
            continue
        if isinstance(got, dict):
            out.append(got)
    return out


def sniff(path: Path, head: bytes) -> bool:
    """The console: [titan] lines of torchtitan's logger."""
    text = _ANSI.sub("", head[:200_000].decode("utf-8", "replace"))
    return (
        "[titan] " in text
        and (" - root - INFO - " in text or "torchtitan" in text)
        and bool(re.search(r"torchtitan version:|Model \S+ \S+ size:|step:\s*\d+\s", text))
    )


def sniff_experiment(path: Path, head: bytes) -> bool:
    lines = _head_lines(head)
    return bool(lines) and all({"key", "reduce", "rank", "step"} <= set(d) for d in lines)


def _system_record(d: dict[str, Any]) -> dict[str, Any] | None:
    """One system-log line of either layout as {rank, step, name, event, value, t, host}."""
    if {"int", "normal", "double"} <= set(d) and all(
        isinstance(d[k], dict) for k in ("int", "normal", "double")
    ):
        i, n, x = d["int"], d["normal"], d["double"]
        flat = {"rank": i.get("rank"), "step": i.get("step"), "time_us": i.get("time_us"),
                "log_type_name": n.get("log_type_name"), "event_name": n.get("event_name"), "value": x.get("value"),
                "host_name": n.get("host_name"), "logger_name": n.get("logger_name"), "source": n.get("source")}  # fmt: skip
    elif "log_type_name" in d and "time_us" in d:
        flat = d
    else:
        return None
    if not str(flat.get("logger_name") or "").startswith("torchtitan"):
        return None
    t = number(flat.get("time_us"))
    return {"rank": count(flat.get("rank")), "step": count(flat.get("step")), "name": flat.get("log_type_name"),
            "event": flat.get("event_name"), "value": flat.get("value"),
            "t": t / 1e6 if t is not None else None, "host": flat.get("host_name"), "source": flat.get("source"),
            # what a step or a time that is no number was written as: quarantined by field, never dropped
            "raw_step": flat.get("step"), "raw_time": flat.get("time_us")}  # fmt: skip


def sniff_system(path: Path, head: bytes) -> bool:
    lines = _head_lines(head)
    return bool(lines) and all(_system_record(d) is not None for d in lines)


def _dump_folder(path: Path) -> Path:
    """The dump folder a per-rank JSONL file belongs to (its logs' folder's parent)."""
    return (
        path.parent.parent
        if path.parent.name in ("experiment_logs", "system_logs", "structured_logs")
        else path.parent
    )


def _jsonl(text: str, out: Parsed) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            got = json.loads(line)
        except ValueError as exc:
            out.bad.append(BadLine(n, line, f"not JSON ({exc}): a torchtitan log line cut short?"))
            continue
        if not isinstance(got, dict):
            out.bad.append(BadLine(n, line, "not a JSON object"))
            continue
        rows.append((n, got))
    return rows


def _jsonl_start(rank: RankEvents, line: int, t: float, path: Path, ranks_file: int | None, campaign: str | None,
                 kind: str, host: Any, unknown: list[str], claims: dict[str, Any] | None = None) -> None:  # fmt: skip
    folder = _dump_folder(path)
    rank.add(line, "run_start", t, campaign=campaign, name=folder.name, purpose="final", framework="torchtitan",
             host=str(host) if host else None, scope="end_to_end",
             claims=claims or None,
             imported={"tool": "torchtitan", "file": path.name, "layout": kind, "accelerated": True, "ranks_in_log": "every rank "
                       "(one file each): ingest them all", "dump_folder": folder.name,
                       "unknown": [f"world_size (at least {(ranks_file or 0) + 1}: this file's rank + 1)", *unknown]})  # fmt: skip


def parse_experiment(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    rows = _jsonl(text, out)
    by_step: dict[int, dict[str, float]] = defaultdict(dict)
    last_line: dict[int, int] = {}
    times: dict[int, float] = {}
    ranks = {count(d.get("rank")) for _, d in rows} - {None}
    for n, d in rows:
        step, key = count(d.get("step")), d.get("key")
        if step is None and isinstance(key, str) and d.get("step") is not None:  # a metric of no step: said
            out.bad.append(BadLine(n, json.dumps(d, default=str), f"field 'step': {d.get('step')!r} is no step "
                                   "number: the record is left out"))  # fmt: skip
            continue
        if step is None or not isinstance(key, str):
            out.other_lines += 1
            continue
        raw = json.dumps(d, default=str)
        timing = key.startswith("trainer_time/")  # seconds: never negative (the contract refuses it)
        if "sum" in d:
            s = checked(out, n, raw, "sum", d.get("sum"), least=0.0 if timing else None, what=key)
            w = checked(out, n, raw, "weight", d.get("weight"), above=0.0, what="weight of a mean")
            value = s / w if s is not None and w else None
        else:
            value = checked(out, n, raw, "value", d.get("value"), least=0.0 if timing else None, what=key)
        if value is not None:
            by_step[step][key] = value
        last_line[step] = n
        t = number(d.get("timestamp"))
        if t is not None:
            times[step] = max(times.get(step, t), t)
    if len(ranks) != 1 or not by_step:
        out.warnings.append(f"{len(ranks)} ranks in one experiment log (torchtitan writes one per rank): no run"
                            if by_step else "no metric with a step: no run")  # fmt: skip
        return out
    r = ranks.pop()
    assert r is not None
    rank = RankEvents(run_id("torchtitan", str(_dump_folder(path).resolve())), r)
    first = min(by_step)
    t0 = times.get(first, 0.0) - by_step[first].get("trainer_time/step_s", 0.0)
    claims = _claims([m.get("trainer_throughput/tps_mean") for m in by_step.values()],
                     [m.get("trainer_throughput/tflops_mean") for m in by_step.values()],
                     [m.get("trainer_throughput/mfu_pct_mean") for m in by_step.values()], None)  # fmt: skip
    _jsonl_start(rank, min(last_line.values()), t0, path, r, campaign, "experiment metrics", None,
                 ["samples and tokens per step (n_tokens_sum is the whole run's)", "model shape and parameters",
                  "accelerator"], claims)  # fmt: skip
    for step in sorted(by_step):
        m = by_step[step]
        total = m.get("trainer_time/step_s")
        if total is None:
            continue
        rank.add(last_line[step], "step", times.get(step, t0), step=step - 1, t_total=total,
                 t_data=m.get("trainer_time/data_loading_s"), t_compute=m.get("trainer_time/forward_backward_s"),
                 t_optimizer=m.get("trainer_time/optimizer_s"), comm_measured=False, warmup=step == first,
                 train_loss=m.get("training/loss_mean"))  # fmt: skip
    _stop_if_torn_down(rank, "trainer_time/teardown_s" in by_step[max(by_step)], max(last_line.values()),
                       max(times.values(), default=t0))  # fmt: skip
    out.events = rank.numbered()
    return out


def _stop_if_torn_down(rank: RankEvents, ended: bool, line: int, t: float) -> None:
    """torchtitan records the process group's teardown only after the last step: its run ended; without it the
    log stops mid-run (killed, or still running) and the run is left without a stop (incomplete)."""
    if ended:
        rank.add(line, "run_stop", t, status="success")


def parse_system(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    records = [(n, rec) for n, d in _jsonl(text, out) if (rec := _system_record(d)) is not None]
    if not records:
        out.warnings.append("no torchtitan system record: no run")
        return out
    folder = _dump_folder(path)
    layout1 = path.parent.name == "system_logs"
    ranks = {rec["rank"] for _, rec in records} - {None}
    if layout1 and len(ranks) == 1:
        twin = folder / "experiment_logs" / path.name.replace("_system.jsonl", "_experiment.jsonl")
        if twin.is_file():
            out.read_with = twin
            out.notes.append(
                f"its spans are the experiment log's ({twin.name}): read with it, not a second run"
            )
            return out
    if len(ranks) != 1:
        out.warnings.append(f"{len(ranks)} ranks in one system log (torchtitan writes one per rank): no run")
        return out
    r = ranks.pop()
    assert r is not None
    spans: dict[int, dict[str, float]] = defaultdict(dict)
    ends: dict[int, tuple[int, float]] = {}
    torn_down = False
    for n, rec in records:
        name, step = str(rec["name"] or ""), rec["step"]
        if name.startswith("torch_distributed_teardown_end"):
            torn_down = True
        if step is None:
            if rec["raw_step"] is not None:
                out.bad.append(BadLine(n, json.dumps(rec, default=str), f"field 'step': {rec['raw_step']!r} is no "
                                       "step number: the record is left out"))  # fmt: skip
            continue
        if name == "step_end" and rec["t"] is None:
            out.bad.append(BadLine(n, json.dumps(rec, default=str), f"field 'time_us': {rec['raw_time']!r} is no "
                                   "time: the step it ends is left out"))  # fmt: skip
            continue
        timed = name.endswith("_end")
        tokens = name == "metric_value" and rec["event"] == "local_valid_tokens"
        if not (timed or tokens):
            continue
        # a span in ms or a count: never negative, NaN or a word (quarantined by field, never dropped in silence)
        value = checked(out, n, json.dumps(rec, default=str), "value", rec["value"], least=0.0, what=name)
        if value is not None and timed:
            spans[step][name.removesuffix("_end")] = value / 1000.0
            if name == "step_end" and rec["t"] is not None:
                ends[step] = (n, rec["t"])
        elif value is not None:
            spans[step]["tokens"] = value
    rank = RankEvents(run_id("torchtitan", str(folder.resolve())), r)
    times = [rec["t"] for _, rec in records if rec["t"] is not None]
    if not times:
        out.warnings.append("no record with a time (time_us): no run")
        return out
    t0 = min(times)
    _jsonl_start(rank, records[0][0], t0, path, r, campaign, "system log, layout 1" if layout1 else
                 "structured log, layout 2", records[0][1]["host"],
                 ["samples per step (tokens only)" if not layout1 else "samples and tokens per step",
                  "model shape and parameters", "accelerator"])  # fmt: skip
    first = min(ends, default=None)  # once: inside the loop it made the reading quadratic in the steps
    for step in sorted(ends):
        s = spans[step]
        rank.add(ends[step][0], "step", ends[step][1], step=step - 1, t_total=s["step"],
                 tokens=count(s.get("tokens")), t_data=s.get("fetching_batch"), t_compute=s.get("fwd_bwd"),
                 t_optimizer=s.get("optim"), comm_measured=False, warmup=step == first)  # fmt: skip
    _stop_if_torn_down(rank, torn_down, records[-1][0], records[-1][1]["t"] or t0)
    out.events = rank.numbered()
    return out


def _claims(tps: list[float | None], tflops: list[float | None], mfu_pct: list[float | None],
            peak: float | None) -> dict[str, Any]:  # fmt: skip
    """torchtitan's per-device tokens/s, TFLOP/s and MFU over its steps after the first (which holds compilation
    and allocation): the harmonic mean of the per-step values it printed, a rate over the same tokens and time as
    the run's own (equal tokens per step)."""

    def mid(values: list[float | None]) -> float | None:
        got = [v for v in values if v is not None]
        got = got[1:] or got
        return harmonic_mean(got) if got and min(got) > 0 else None

    out: dict[str, Any] = {"tokens_per_s_per_accelerator": mid(tps), "tflops_per_accelerator": mid(tflops)}
    m = mid(mfu_pct)
    out["mfu"] = m / 100.0 if m is not None else None
    out["peak_tflops"] = peak / 1e12 if peak else None
    out = {k: v for k, v in out.items() if v is not None}
    if out:
        out["flops_convention"] = "palm (torchtitan: 6 (N - embedding) + 12 L H Q T)"
        out["from"] = "harmonic mean of the per-step values it printed, the first step left out"
    return out


def _ts(text: str) -> float | None:
    return stamp(text, "%Y-%m-%d %H:%M:%S,%f")


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


_NOT_FINITE = re.compile(r'"(?P<key>[^"]+)":\s*(?P<value>-?Infinity|NaN)\b')


def _config(lines: list[str], built: int, out: Parsed) -> dict[str, Any]:
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


def _trainer(msg: str, n: int, line: str, out: Parsed) -> dict[str, int]:
    """``Trainer is initialized with local batch size 8, global batch size 8, ...``: each fact printed, read; one
    that is no whole number is quarantined by field (the others still read)."""
    facts: dict[str, int] = {}
    for name, pattern in _TRAINER_FACT.items():
        if (g := pattern.search(msg)) is None:
            continue
        if g["value"].isdigit():
            facts[_TRAINER_FACTS[name]] = int(g["value"])
        else:
            out.bad.append(BadLine(n, line, f"field {name!r}: {g['value']!r} is no whole number: left out"))
    if not facts:
        out.bad.append(BadLine(n, line, _NO_TRAINER_FACT))
    return facts


def _step_values(rest: str, n: int, line: str, out: Parsed) -> dict[str, float]:
    """A step line's ``key: value`` pairs; a value that is no finite number (``loss: nan``) quarantined by field."""
    values: dict[str, float] = {}
    for p in _PAIR.finditer(rest):
        key = p["key"].split("/")[-1]
        value = checked(out, n, line, p["key"], p["value"].replace(",", ""), what=f"step's {key}")
        if value is not None:
            values[key] = value
    return values


def _fact(msg: str, n: int, line: str, info: dict[str, Any], out: Parsed) -> None:
    """A line that tells one fact of the run (the accelerator, the model's size, the batch sizes, the mesh ...)."""
    if g := _CAPACITY.match(msg):
        info["accelerator"] = g.group("name")
    elif g := _SIZE.match(msg):
        info["model"], info["flavor"], info["params"] = (
            g.group("model"),
            g.group("flavor"),
            int(g.group("n").replace(",", "")),
        )
    elif g := _PEAK.match(msg):
        info["peak"] = _number(g.group("peak"))
    elif msg.startswith(_TRAINER):
        info.update(_trainer(msg, n, line, out))
        info["trainer_line"] = n
    elif g := _MESH.match(msg):
        info["mesh"] = {k.strip(): int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", g.group("dims"))}
    elif g := _CHECKPOINTING.match(msg):
        info["checkpointing"] = g.group("kind")
    elif g := _VERSION.match(msg):
        info["version"] = None if g.group("v").startswith("0.0.0") else g.group("v")
    elif g := _STARTS.match(msg):
        info["first_step"] = int(g.group("step"))
    elif g := _DATASET.match(msg):
        info["dataset"] = g.group("name")


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    """The console log."""
    out = Parsed()
    info: dict[str, Any] = {}
    config_lines: list[str] | None = None
    steps: list[tuple[int, float, int, dict[str, float]]] = []  # (line, time, step, values)
    start: tuple[int, float] | None = None
    completed: tuple[int, float] | None = None
    lines = [_ANSI.sub("", raw) for raw in text.splitlines()]
    # a console of several ranks (torchrun without --local-ranks-filter) interleaves them: read the lowest
    ranks = {int(m.group("rank")) for line in lines if (m := _PREFIX.match(line))}
    keep = min(ranks) if ranks else None
    info["rank"] = keep if keep is not None else 0
    info["prefixed"] = bool(ranks)
    if len(ranks) > 1:
        out.notes.append(f"ranks {sorted(ranks)} print into this console: rank {keep}'s lines are read")
    for n, prefixed in enumerate(lines, 1):
        m0 = _PREFIX.match(prefixed)
        if len(ranks) > 1 and (m0 is None or int(m0.group("rank")) != keep):
            out.other_lines += 1
            continue
        line = _PREFIX.sub("", prefixed)
        if config_lines is not None:
            config_lines.append(line)
            if line.startswith("}"):
                info["config"] = _config(config_lines, n - len(config_lines), out)
                config_lines = None
            continue
        m = _LINE.search(line)
        if m is None:
            out.other_lines += 1
            continue
        msg, t = m.group("msg").rstrip(), _ts(m.group("ts"))
        if t is None and (_STEP.match(msg) or msg.startswith("Training completed")):
            out.bad.append(
                BadLine(n, line, f"field 'timestamp': {m['ts']!r} is no time: the line is left out")
            )
            continue
        if start is None and t is not None:
            start = (n, t)
        if g := _BUILD.match(msg):
            info["model"], info["flavor"] = g.group("model"), g.group("flavor")
            config_lines = []
        elif (g := _STEP.match(msg)) and not g["step"].isdigit():
            out.bad.append(
                BadLine(n, line, f"field 'step': {g['step']!r} is no whole number: the step is left out")
            )
        elif g and t is not None:
            steps.append((n, t, int(g.group("step")), _step_values(g.group("rest"), n, line, out)))
            info.setdefault("aggregated", "torchtitan.observability" in m.group("logger"))
        elif msg.startswith("Training completed") and t is not None:
            completed = (n, t)
        else:
            _fact(msg, n, line, info, out)
    if start is None or (not steps and "first_step" not in info):
        out.warnings.append("no step line (`step: N  loss: ...`): no run")
        return out
    info["crash"], info["lines"] = crash("\n".join(lines), steps[-1][0] if steps else 0), lines
    out.events = _console_events(path, info, steps, start, completed, campaign, out)
    return out


def _layout(mesh: dict[str, int]) -> dict[str, int]:
    d = {"pp": mesh.get("pp", 1), "tp": mesh.get("tp", 1), "cp": mesh.get("cp", 1),
         "dp": mesh.get("dp_replicate", 1), "fsdp": mesh.get("dp_shard", 1), "ep": mesh.get("ep", 1)}  # fmt: skip
    return {k: v for k, v in d.items() if v > 1} or {"dp": 1}


def _shape(config: dict[str, Any]) -> dict[str, int]:
    def part(d: dict[str, Any], key: str) -> dict[str, Any]:
        got = d.get(key)
        return got if isinstance(got, dict) else {}

    layer = part(config, "layer")
    attention, ffn = part(layer, "attention"), part(layer, "feed_forward")
    shape = {"layers": count(config.get("n_layers"), 1), "hidden": count(config.get("dim"), 1),
             "heads": count(attention.get("n_heads") or config.get("n_heads"), 1),
             "kv_heads": count(attention.get("n_kv_heads") or config.get("n_kv_heads"), 1),
             "ffn_hidden": count(ffn.get("hidden_dim"), 1), "vocab": count(config.get("vocab_size"), 1)}  # fmt: skip
    return {k: v for k, v in shape.items() if v is not None}


def _console_events(
    path: Path,
    info: dict[str, Any],
    steps: list[tuple[int, float, int, dict[str, float]]],
    start: tuple[int, float],
    completed: tuple[int, float] | None,
    campaign: str | None,
    out: Parsed,
) -> list[tuple[int, dict[str, Any]]]:
    mesh = info.get("mesh") or {}
    world: int | None = 1
    for k in ("pp", "dp_replicate", "dp_shard", "cp", "tp"):
        world = (world or 1) * max(mesh.get(k, 1), 1)
    if not mesh:
        world = None
    layout = _layout(mesh)
    shape = _shape(info.get("config") or {})
    seq, gbs, local = info.get("seq"), info.get("global"), info.get("local")
    params = info.get("params")
    embedding = shape["vocab"] * shape["hidden"] if {"vocab", "hidden"} <= set(shape) else None
    unknown = []
    if not mesh:
        unknown.append("world_size (no `Building device mesh` line)")
    if not shape:
        unknown.append("model shape (this version does not print the model's configuration)")
    aggregated = bool(info.get("aggregated"))
    identity = f"{start[1]}|{info.get('params')}|{[s[1:3] for s in steps[:1]]}|{info['rank']}"
    rank = RankEvents(run_id("torchtitan", identity), int(info["rank"]))
    tps = [s[3].get("tps_mean", s[3].get("tps")) for s in steps]
    claims = _claims(tps, [s[3].get("tflops_mean", s[3].get("tflops")) for s in steps],
                     [s[3].get("mfu_pct_mean", s[3].get("mfu")) for s in steps], info.get("peak"))  # fmt: skip
    replica = layout.get("tp", 1) * layout.get("pp", 1) * layout.get("cp", 1)
    rates_from = ("none: the aggregator process prints these lines, so their timestamps are no step times, and "
                  "the rates it prints are the claims themselves (no step events: the claims cannot be checked)"
                  if aggregated else f"the console's timestamps between step lines (ms resolution), "
                  f"rank {info['rank']}'s")  # fmt: skip
    if replica > 1:
        rates_from += (
            "; samples and tokens per step left out (model parallel: one rank's line cannot split them)"
        )
    rank.add(
        info.get("trainer_line", start[0]), "run_start", start[1],
        campaign=campaign, name=f"{info.get('model', 'model')} {info.get('flavor', '')}".strip(), purpose="final",
        config_hash=config_hash({k: v for k, v in info.items()
                                 if k not in ("trainer_line", "rank", "prefixed", "crash", "lines", "first_step")}),
        framework="torchtitan", framework_version=info.get("version"),
        launcher="torchrun" if info["prefixed"] else None, world_size=world, dataset=info.get("dataset"),
        accelerator=info.get("accelerator"), accelerators_per_node=None, model=info.get("model"),
        global_batch_size=gbs, local_batch_size=local, sequence_length=seq,
        global_batch_tokens=gbs * seq if gbs and seq else None, scope="end_to_end",
        parallel=layout if mesh else None,
        activation_checkpointing=info.get("checkpointing", "none"), compute_dtype="bf16",
        params_total=params, params_embedding=embedding if params else None, params_active=params,
        model_shape=shape or None, claims=claims or None,
        stop_criterion="samples", stop_value=float(gbs * info["steps"]) if gbs and info.get("steps") else None,
        imported={"tool": "torchtitan", "layout": "console" + (" (aggregator)" if aggregated else ""),
                  "accelerated": bool(info.get("accelerator")) or None,
                  "ranks_in_log": f"rank {info['rank']}", "rates_from": rates_from,
                  "compute_dtype_from": "torchtitan's default mixed precision (bfloat16)",
                  "unknown": [*unknown, "the other ranks' step times"]},
    )  # fmt: skip
    previous_step, previous_t = int(info.get("first_step", 1)) - 1, start[1]
    first = previous_step
    for line, t, step, values in [] if aggregated else steps:
        span = step - previous_step
        if span <= 0:
            out.warnings.append(f"line {line}: step {step} does not follow step {previous_step}: not a step")
            continue
        samples = gbs * span if gbs and replica == 1 else None
        tokens = samples * seq if samples is not None and seq else None
        total = t - previous_t
        if total < 0:
            out.warnings.append(f"line {line}: no time for step {step}: not a step")
            previous_step = step
            continue
        rank.add(line, "step", t, step=step - 1, samples=samples, tokens=tokens, t_total=total, iterations=span,
                 train_loss=values.get("loss", values.get("loss_mean")), comm_measured=False,
                 warmup=previous_step == first)  # fmt: skip
        previous_step, previous_t = step, t
    if completed is not None:
        rank.add(completed[0], "run_stop", completed[1], status="success")
    elif info.get("crash") is not None:
        rank.add(len(info["lines"]), "run_stop", previous_t, status="failed",
                 reason=f"the console ends in a traceback: {info['crash']}")  # fmt: skip
    else:
        out.notes.append("no `Training completed` line: the run is left without a stop (incomplete)")
    return rank.numbered()
