"""Energy of a run (Deep500, MLPerf Power): to train, to accuracy, mean power, per sample; never 0 for "unknown".

Where the energy comes from, in order:

* **MLPerf power logs** (``runs.energy_to_train_j``, from the collector): every node's AC power and the
  interconnect's, over run_start..run_stop, as MLPerf measures it;
* the accelerators' **NVML total-energy counter** (``system`` events, every second): per rank and device, the
  counter linearly interpolated to the window's ends (outside the first and last readings it is extended with
  the power read at that end, else with the counter's own slope), summed over devices;
* the accelerators' **power** readings alone: integrated over the window by the trapezoid rule, the end
  readings held to the window's ends;
* **Slurm accounting** (``sacct``'s ``ConsumedEnergyRaw``, every node of the allocation), joined by the run's
  Slurm job id (its step's line where the run was one step): the job's energy from its start to its end;
* a **CodeCarbon** tracker (``emissions.csv``), joined by time window alone (the CSV names no host or job): one
  tracker whose window holds the run, on a run of one node (several trackers over one run: one machine counted
  twice cannot be told from two machines, so none is taken); partly an estimate whatever the machine;
* otherwise none: the report says "not recorded" (a CPU run, a GPU without NVML), never 0.

A job's or a tracker's energy is the run's energy to train only where the run fills 90 % of its window (else it
holds what ran before and after: named, not used); a counter of 0 is *not measured*, never 0 J.

A counter that goes backwards (a driver reset) is not trusted: that device falls back to its power readings.
A run some of whose ranks read no energy at all has none (a sum over the others would understate it).
The accelerators' energy is what NVML measures: the GPUs, not the hosts, fans or network.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from honestscale.analysis.scaling import reached_at
from honestscale.view import EnergyRecord, PowerSample, Run

COUNTER = "NVML energy counter"
POWER = "NVML power x time"
MLPERF = "MLPerf power logs"
SLURM = "Slurm accounting"
CODECARBON = "CodeCarbon (partly estimated)"
FILLS = 0.9  # the share of a job's or a tracker's window the run must fill for its energy to be the run's
NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class Energy:
    joules: float
    source: str  # COUNTER | POWER | MLPERF, or "COUNTER + POWER" when devices differ
    devices: int  # accelerators summed (0: measured for the whole system, MLPerf)
    per_rank: tuple[tuple[int, float], ...] = ()  # (rank, joules) where measured per rank
    joined: str = ""  # a record's: how it was joined to the run and what it covers


def _at(times: Sequence[float], values: Sequence[float], powers: Sequence[float | None], t: float) -> float:
    """The counter at ``t``: interpolated inside the readings, extended with the end's power (else slope) outside."""
    if times[0] <= t <= times[-1]:
        return float(np.interp(t, times, values))
    end = 0 if t < times[0] else -1
    slope = powers[end]
    if slope is None:
        if len(times) < 2 or times[-1] == times[0]:
            slope = 0.0
        else:
            slope = (values[-1] - values[0]) / (times[-1] - times[0])
    return values[end] + slope * (t - times[end])


def _from_counter(readings: list[PowerSample], a: float, b: float) -> float | None:
    got = [s for s in readings if s.energy_j is not None]
    if not got:
        return None
    values = [float(s.energy_j) for s in got if s.energy_j is not None]
    if any(y < x for x, y in itertools.pairwise(values)):
        return None  # the counter went backwards: a reset, not energy
    times = [s.time for s in got]
    powers = [s.power_w for s in got]
    return max(0.0, _at(times, values, powers, b) - _at(times, values, powers, a))


def _from_power(readings: list[PowerSample], a: float, b: float) -> float | None:
    from scipy import integrate  # imported when used: it costs every command half a second

    got = [(s.time, float(s.power_w)) for s in readings if s.power_w is not None]
    if not got:
        return None
    times = np.asarray([t for t, _ in got])
    watts = np.asarray([w for _, w in got])
    inside = (times > a) & (times < b)
    ts = np.concatenate(([a], times[inside], [b]))
    ws = np.concatenate(([np.interp(a, times, watts)], watts[inside], [np.interp(b, times, watts)]))
    return float(integrate.trapezoid(ws, ts))


def between(run: Run, a: float, b: float) -> Energy | None:
    """The accelerators' energy between times ``a`` and ``b`` (epoch seconds), from the run's NVML readings."""
    if b <= a or not run.power:
        return None
    devices: dict[tuple[int, int], list[PowerSample]] = defaultdict(list)
    for s in run.power:
        devices[(s.rank, s.device)].append(s)
    total, sources = 0.0, set()
    per_rank: dict[int, float] = defaultdict(float)
    for (rank, _), readings in sorted(devices.items()):
        joules = _from_counter(readings, a, b)
        source = COUNTER
        if joules is None:
            joules, source = _from_power(readings, a, b), POWER
        if joules is None:
            continue
        total += joules
        per_rank[rank] += joules
        sources.add(source)
    if not sources:
        return None
    seen = run.ranks_seen
    if seen and len(per_rank) < int(seen):
        return None  # some ranks read no energy: a sum over the others would understate the run's
    return Energy(total, " + ".join(sorted(sources)), len(devices), tuple(sorted(per_rank.items())))


def to_train(run: Run) -> Energy | None:
    """Energy from run_start to run_stop: the MLPerf power logs' where the run has them, else NVML's, else the
    Slurm accounting's or a CodeCarbon tracker's (``accounted``)."""
    if run.energy_to_train_j is not None:
        return Energy(float(run.energy_to_train_j), MLPERF, 0)
    if run.started_at is None or run.stopped_at is None:
        return None
    return between(run, float(run.started_at), float(run.stopped_at)) or accounted(run)[0]


def _window(r: EnergyRecord) -> float | None:
    return r.stopped_at - r.started_at if r.started_at is not None and r.stopped_at is not None else None


def _used(run: Run, r: EnergyRecord, source: str, how: str) -> tuple[Energy | None, str]:
    """A record's energy as the run's, where the run fills its window; else none, and why."""
    label = f"{source}, {r.source}"
    if r.energy_j is None:
        return None, f"{label}: {r.method}"
    window, ttt = _window(r), run.time_to_train_s
    if not window or ttt is None or float(ttt) < FILLS * window:
        held = f"{r.energy_j:,.0f} J over {window:,.1f} s" if window else f"{r.energy_j:,.0f} J"
        return None, (f"{label}: {held}, {how}; the run ({'?' if ttt is None else f'{float(ttt):,.1f}'} s) fills "
                      f"less than {FILLS:.0%} of it, so that energy is not the run's")  # fmt: skip
    return Energy(r.energy_j, source, 0, joined=f"{how}: {r.method}; {window:,.1f} s, the run {float(ttt) / window:.0%} "
                  f"of it ({r.source})"), ""  # fmt: skip


def accounted(run: Run) -> tuple[Energy | None, str]:
    """The run's energy from Slurm accounting (by job id) or a CodeCarbon tracker (by time window), or why none
    ('' when no record concerns the run)."""
    job, step = run.slurm_job_id, run.slurm_step_id
    lines = [r for r in run.energy_records if r.format == "slurm-sacct" and job and r.job_id == job]
    chosen = [r for r in lines if step and r.step_id == step] or [r for r in lines if r.step_id is None]
    if chosen:
        which = f"job {job}.{step}" if chosen[0].step_id else f"job {job}"
        return _used(
            run, chosen[0], SLURM, f"joined by Slurm job id ({which}'s line: from its start to its end)"
        )
    if run.started_at is None or run.stopped_at is None:
        return None, ""
    a, b = float(run.started_at), float(run.stopped_at)
    trackers = {(r.started_at, r.stopped_at, r.energy_j): r for r in run.energy_records if r.format == "codecarbon"
                and r.started_at is not None and r.stopped_at is not None and r.started_at <= a and r.stopped_at >= b}  # fmt: skip
    if not trackers:
        return None, ""
    if len(trackers) > 1:
        return None, (f"{len(trackers)} CodeCarbon trackers cover the run and emissions.csv names no host: one "
                      "machine counted twice cannot be told from two machines, so none is taken")  # fmt: skip
    (r,) = trackers.values()
    if run.n_nodes and run.n_nodes > 1:
        return (
            None,
            f"one CodeCarbon tracker ({r.source}) covers a run on {run.n_nodes} nodes: one node's at most",
        )
    return _used(run, r, CODECARBON, "joined by time window alone (emissions.csv names no host or job)")


def to_accuracy(run: Run) -> Energy | None:
    """Energy from run_start to the first evaluation that reached every target (an MLPerf run stops there, so
    its energy to train is its energy to accuracy)."""
    t = reached_at(run)
    if t is None or run.started_at is None:
        return None
    if run.energy_to_train_j is not None:
        return to_train(run)
    return between(run, float(run.started_at), t)


def mean_power_w(run: Run) -> float | None:
    """Energy to train over time to train: the run's mean power, watts."""
    e, t = to_train(run), run.time_to_train_s
    return e.joules / float(t) if e is not None and t else None


def per_sample_j(run: Run) -> float | None:
    """Energy to train over the samples trained (every rank's, warm-up included)."""
    e, s = to_train(run), run.steps
    return e.joules / s.samples_trained if e is not None and s is not None and s.samples_trained else None


def source(runs: Sequence[Run]) -> str:
    """Where the energy of these runs comes from, or NOT_RECORDED."""
    got = {e.source for e in (to_train(r) for r in runs) if e is not None}
    return " / ".join(sorted(got)) if got else NOT_RECORDED


def of_run(
    row: Mapping[str, object], power: Sequence[PowerSample], records: Sequence[EnergyRecord] = ()
) -> dict[str, object]:
    """For ``show``: one run's energy to train, its source, mean power and every rank's share, or why there is none
    (an accounting record that concerns the run but is not its energy is named)."""
    run = Run.from_row(row, power=tuple(power), energy_records=tuple(records))
    got = to_train(run)
    if got is None:
        why = accounted(run)[1]
        return {"source": NOT_RECORDED, "why": why} if why else {"source": NOT_RECORDED}
    t = row.get("time_to_train_s")
    return {"joules": got.joules, "source": got.source, "joined": got.joined or None,
            "accelerators": got.devices or None,
            "mean_power_w": got.joules / float(t) if isinstance(t, int | float) and t else None,
            "per_rank_joules": {str(rank): j for rank, j in got.per_rank} or None}  # fmt: skip
