"""PyTorch profiler (Kineto) traces (``torch.profiler``'s ``export_chrome_trace``; torchtitan's
``profile_trace(s)/iteration_N/rank<R>_trace.json``): evidence beside a run's step split, never a run of its own.

For every ``ProfilerStep#N`` the trace holds: the step's window (its CPU annotation together with the device's
``gpu_user_annotation`` of that step on every stream, first to last), the device's busy time (the union of its kernels, copies and sets in the
window), the time collectives were in flight (the union of the NCCL kernels on a GPU, of the ``gloo:*`` / ``nccl:*``
annotations on a CPU run) and by kind (all_reduce, all_gather, reduce_scatter, ...: the kernels' durations summed),
on a GPU the part of it no other device operation (kernel, copy or set) overlapped (exposed: busy = the other
operations' union + exposed), and the idle time (window - busy). ``distributedInfo`` gives the backend, rank and
world size.

Checked against Holistic Trace Analysis (HTA, PyPI ``traceinsight``; tests/integration/test_kineto_oracle.py) on GPU
traces (HTA reads no CPU-only one): busy, collective and exposed time agree within 0.02 µs (float64 rounding of the
nanosecond timestamps) where the definitions match. They differ in:
HTA's window is the whole trace's device work, first kernel's start to last kernel's end (no step window, no
host-side time), so idle here = HTA's idle + (step window - that span) on a one-step trace; HTA by default rounds
every event's start up and end down to the microsecond (pytorch/pytorch#122425; 7 % less busy time on torchtitan's
traces), this reader keeps the nanoseconds (HTA's ``HTA_DISABLE_NS_ROUNDING=1`` gives the same); HTA lets only
compute kernels hide a collective (copies and sets do here) and names a kernel a collective by ``^nccl`` /
``ncclKernel`` (here ``nccl`` anywhere in the name); its per-kernel sums equal the by-kind sums here, which exceed
the collective time when collectives of a kind overlap (two streams).

A trace in a torchtitan dump folder belongs to the run of that folder's per-rank logs (the same run id as the
experiment and structured logs'); any other is stored unlinked, said at ingest.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from honestscale.collector._parsed import Parsed
from honestscale.collector._spans import Sorted, clip, intersection, length, union
from honestscale.collector.importers._build import count, number, run_id

FORMAT = "kineto-trace"
LABEL = "PyTorch profiler (Kineto) trace, evidence beside a run"
_DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")
_KINDS = (
    ("allreduce", "all_reduce"),
    ("all_reduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("all_gather", "all_gather"),
    ("reducescatter", "reduce_scatter"),
    ("reduce_scatter", "reduce_scatter"),
    ("broadcast", "broadcast"),
    ("sendrecv", "send_recv"),
    ("send", "send_recv"),
    ("recv", "send_recv"),
    ("alltoall", "all_to_all"),
    ("all_to_all", "all_to_all"),
    ("barrier", "barrier"),
)
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_TORCHTITAN_LOGS = ("experiment_logs", "system_logs", "structured_logs")
MAX_CHARS = 256 << 20


def sniff(path: Path, head: bytes) -> bool:
    return (
        head.lstrip().startswith(b"{")
        and b'"traceEvents"' in head
        and (b'"schemaVersion"' in head or b'"distributedInfo"' in head or b'"deviceProperties"' in head)
    )


def _kind(name: str) -> str | None:
    low = name.lower().replace("ncclkernel_", "").replace("nccldevkernel_", "")
    return next((kind for key, kind in _KINDS if key in low), None)


def _dump_run(path: Path) -> str | None:
    """The run id of the torchtitan dump folder the trace sits in (``<dump>/<traces>/iteration_N/rankR_trace``)."""
    for dump in path.parents[1:4]:
        if any((dump / d).is_dir() for d in _TORCHTITAN_LOGS):
            return run_id("torchtitan", str(dump.resolve()))
    return None


_Spans = dict[str, list[tuple[float, float, str]]]


def _spans(events: list[dict[str, object]], out: Parsed) -> _Spans:
    """The trace's step annotations (CPU, device), device operations, NCCL kernels and CPU collectives. An event
    whose ``ts`` or ``dur`` is no finite number, or whose ``dur`` is negative (the profiler writes -1 for a span it
    never closed), is left out and said: by name for a step, counted for the rest."""
    spans: _Spans = {"cpu_step": [], "gpu_step": [], "device": [], "comm": [], "cpu_comm": []}
    unusable: list[tuple[bool, str]] = []  # (a step?, what)
    for e in events:
        ts, dur, name, cat = number(e.get("ts")), number(e.get("dur")), str(e.get("name", "")), e.get("cat")
        if ts is None or dur is None or dur < 0:
            unusable.append((bool(_STEP.match(name)), f"{name} (ts {e.get('ts')!r}, dur {e.get('dur')!r})"))
            continue
        if _STEP.match(name):
            spans["gpu_step" if cat == "gpu_user_annotation" else "cpu_step"].append((ts, ts + dur, name))
        elif cat in _DEVICE:
            spans["device"].append((ts, ts + dur, name))
            if "nccl" in name.lower():
                spans["comm"].append((ts, ts + dur, name))
        elif (
            cat == "user_annotation" and name.split(":")[0] in ("gloo", "nccl", "mpi", "ucc") and _kind(name)
        ):
            spans["cpu_comm"].append((ts, ts + dur, name))
    if steps := [u for step, u in unusable if step]:
        out.warnings.append(
            f"step annotation(s) with no usable span, left out: {', '.join(steps[:5])}"
            + (f" and {len(steps) - 5} more" if len(steps) > 5 else "")
        )
    if others := len(unusable) - len(steps):
        out.warnings.append(
            f"{others} other event(s) with no usable span (ts or dur no finite number, or dur "
            f"negative), left out: e.g. {next(u for step, u in unusable if not step)}"
        )
    return spans


def _step(name: str, lo: float, hi: float, spans: dict[str, Sorted], on_device: bool) -> dict[str, object]:
    """One step's row: its window ``[lo, hi]`` (µs) and what the device and the collectives did in it (s)."""
    device, comm_spans = spans["device"].overlapping(lo, hi), spans["comm"].overlapping(lo, hi)
    busy = union(clip([(x, y) for x, y, _ in device], lo, hi))
    comm = union(clip([(x, y) for x, y, _ in comm_spans], lo, hi))
    other = union(clip([(x, y) for x, y, n in device if "nccl" not in n.lower()], lo, hi))
    by_kind: dict[str, float] = {}
    for x, y, n in comm_spans:
        if (k := _kind(n)) is not None:
            by_kind[k] = by_kind.get(k, 0.0) + length(clip([(x, y)], lo, hi)) / 1e6
    return {
        "step": int(_STEP.match(name).group(1)),  # type: ignore[union-attr]
        "t_step": (hi - lo) / 1e6,
        "t_busy": length(busy) / 1e6 if on_device else None,
        "t_idle": (hi - lo - length(busy)) / 1e6 if on_device else None,
        "t_comm": length(comm) / 1e6,
        "t_comm_exposed": (length(comm) - intersection(comm, other)) / 1e6 if on_device else None,
        "comm_by_kind": {k: round(v, 9) for k, v in by_kind.items()},
    }


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    if (
        len(text) > MAX_CHARS
    ):  # json.loads holds about 7 times the text: a trace of a whole run is profiled too long
        out.warnings.append(
            f"a trace of {len(text) / 2**20:,.0f} MiB, over {MAX_CHARS / 2**20:,.0f} MiB: not read "
            "(profile a few steps: torch.profiler.schedule(active=...))"
        )
        return out
    try:
        trace = json.loads(text)
    except (
        ValueError
    ) as exc:  # the profiler writes the trace at the end of its window: a cut one is still being
        out.warnings.append(
            f"not whole JSON ({exc}): a trace cut short (the profiler still writing it, or killed "
            "while it did): no step read; ingest it again once it is whole"
        )
        return out
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        out.warnings.append("no traceEvents list: not a profiler trace")
        return out
    got = trace.get("distributedInfo")
    info: dict[str, object] = got if isinstance(got, dict) else {}
    events = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    spans = _spans(events, out)
    on_device = bool(spans["device"])
    if not on_device:  # a CPU run: its collectives are the backend's annotations (on a GPU, the NCCL kernels)
        spans["comm"] = spans["cpu_comm"]
    # a step's window: its CPU annotation and every device annotation of it (one per device and stream), together
    gpu_windows: dict[str, tuple[float, float]] = {}
    for a, b, name in spans["gpu_step"]:
        lo, hi = gpu_windows.get(name, (a, b))
        gpu_windows[name] = (min(lo, a), max(hi, b))
    rows = []
    indexed = {k: Sorted(spans[k]) for k in ("device", "comm")}
    for a, b, name in sorted(spans["cpu_step"]):
        g = gpu_windows.get(name, (a, b))
        lo, hi = (min(a, g[0]), max(b, g[1])) if on_device else (a, b)
        rows.append(_step(name, lo, hi, indexed, on_device))
    if not rows:
        out.warnings.append(
            "no ProfilerStep#N annotation (profile with a schedule and call prof.step()): no step"
        )
    out.profile = {
        "run_id": _dump_run(path),
        "rank": count(info.get("rank")),
        "world_size": count(info.get("world_size"), 1),
        "backend": info.get("backend") if isinstance(info.get("backend"), str) else None,
        "device": "gpu" if on_device else "cpu",
        "steps": rows,
    }
    if out.profile["run_id"] is None:
        out.notes.append(
            "not in a torchtitan dump folder: stored as evidence, linked to no run "
            "(`honestscale profiles` lists it)"
        )
    out.notes.append(f"{len(rows)} profiled step(s) as evidence ({'device' if on_device else 'CPU'} trace)")
    return out
