from __future__ import annotations

import statistics
from collections.abc import Iterator

from honestscale.analysis import steady
from honestscale.analysis.points import sig
from honestscale.lint._engine import Finding, Rule, Said
from honestscale.lint._fold import apart
from honestscale.view import Comparison, Run, View

SLOW = 3.0  # a first step this many times slower than the median step is warm-up
COUNTED = 0.05  # the mean step after the marked warm-up this much above the steady one: warm-up is counted
LOAD_FIX = "rerun on a quiet node (an exclusive allocation); do not mark the host's load as warm-up"
METHOD = "MSER-5"

Counted = tuple[Run, steady.SteadyState, float, tuple[float, float] | None]
Contended = tuple[Run, steady.SteadyState, float, tuple[float, float]]
Busy = tuple[Run, steady.SteadyState, float, str]


def _slow(r: Run, g: steady.SteadyState, excess: float) -> str:
    """The steps between the marked warm-up and the steady state, and how much slower they were."""
    return f"{r.id}: steps {g.marked_warmup} to {(g.warmup_steps or 1) - 1} {100 * excess:.0f} % slower than the steady state"


def summaries_include_warmup(summarised: list[tuple[Run, dict[str, float]]]) -> Said:
    said = "; ".join(
        f"{r.id}: {', '.join(f'{k} {sig(v)}' for k, v in got.items())} "
        + (f"(its steps after warm-up: {sig(r.steady_rate)} samples/s)" if r.steady_rate else "")
        for r, got in summarised
    )
    return (
        f"the tool's summary rates average every iteration, warm-up included: {said}",
        "report the rate of the steps after warm-up (honestscale's), not the tool's summary",
    )


def unmarked_slow_steps(worst: float) -> Said:
    return (
        f"unmarked first steps up to {apart(worst, SLOW, 1)}x slower than the median step are counted",
        "mark the first steps as warm-up (warmup: true in step events)",
    )


WARMUP_NOT_RECORDED: Said = (
    "the steps do not say which are warm-up",
    "record warmup true/false in step events",
)


def warmup_counted(counted: list[Counted]) -> Said:
    said = "; ".join(
        f"{r.id}: marked {g.marked_warmup}, found {g.warmup_steps} ({METHOD}): the mean step "
        f"after the marked warm-up is {100 * x:.0f} % above the mean after the one found, "
        f"beyond its 95 % interval"
        for r, g, x, _ in counted
    )
    return (
        f"the marked warm-up ends before the step times settle, so the rate counts warm-up: {said}",
        "mark as warm-up the steps before the steady state (`honestscale show RUN` finds it), "
        "or train longer before measuring",
    )


def someones_load(contended: list[Contended]) -> Said:
    said = "; ".join(
        f"{_slow(r, g, x)}, the host's CPUs oversubscribed {100 * w[0]:.0f} % of their time "
        f"against {100 * w[1]:.0f} % after"
        for r, g, x, w in contended
    )
    return (
        "the steps after the marked warm-up were slow while the host had more work than "
        f"CPUs (Linux's CPU pressure): someone's load, not a warm-up, as far as the data "
        f"tell: {said}",
        LOAD_FIX,
    )


def busy_at_start(busy: list[Busy]) -> Said:
    said = "; ".join(f"{_slow(r, g, x)}, {load}" for r, g, x, load in busy)
    return (
        "the steps after the marked warm-up were slow on a host that was busy as the run "
        f"started (HS208): its load, not a warm-up, may have slowed them, and the CPU "
        f"pressure the steps measured does not tell which: {said}",
        LOAD_FIX,
    )


def slow_in_some_repetitions(slow: list[Counted], settled: int) -> Said:
    """Slow steps after the marked warm-up in fewer repetitions than settle by it: the runs' own, not a warm-up."""
    said = "; ".join(_slow(r, g, x) for r, g, x, _ in slow)
    return (
        f"the steps after the marked warm-up were slow in {len(slow)} of {len(slow) + settled} repetitions, "
        f"while the other {settled} settle by it: a warm-up repeats in every run of the same code, so this "
        f"is the run's own, not a warm-up (a load the CPU pressure the steps measured did not catch, or a "
        f"cold cache the first run paid): {said}",
        "rerun on a quiet node (an exclusive allocation) and look at those steps with `honestscale show RUN`; "
        "do not mark them as warm-up",
    )


class WarmupIncluded(Rule):
    """Warm-up steps (compilation, cache filling, allocator growth) must be marked and kept out of throughput.

    What it checks: runs with step events mark their warm-up steps (``warmup``), and none of the first
    three steps left unmarked is more than 3x slower than the run's median step. Where a run has 50 steps or
    more, the warm-up is also found in its step times (MSER-5, ``analysis/steady.py``, on its lowest rank): the
    marked warm-up fails when the steps it leaves in are, on average, more than 5 % slower than the steady state
    the data show and beyond that state's 95 % interval, and the median of the steps it leaves in is more than 5 %
    above the steady median (a warm-up slows every step of it; one stall among them is no warm-up). A warm-up is the
    code's and repeats in every run of it: where fewer repetitions of the configuration are slow after the marked
    warm-up than settle by it, the slow ones cannot be verified (their own cause: a load the steps' CPU pressure
    did not catch, a cold cache the first run paid), never "mark it as warm-up". A run whose step times reach
    no steady state is not judged here (``show`` says so). Not on a run whose stalls are more than 5 % of
    its time to train (outliers, or steps beyond the median pace): stalls can fake or hide a warm-up that size
    (HS210 names them). Nor where the host's CPU wait during the slow steps (``cpu_pressure``, Linux's pressure
    stall information, contract 5) explains at least half of their extra time: that is someone's load, and the run
    cannot be judged (cannot verify, with the shares named), never "mark it as warm-up"; nor where the host was busy
    as the run started (HS208's load test) and its pressure explains less: on an oversubscribed host millisecond
    steps slow and speed up with the other work, which the pressure sampled per step does not always catch, so the
    data cannot tell a warm-up from the load (cannot verify, the load named). And a summary a tool printed
    over every iteration, warm-up included (DLLogger's ``[]`` rows in NVIDIA's DeepLearningExamples, kept by the
    importer in ``imported.summaries``), is named as such beside the steady rate of the same run's steps.
    Why it misleads: the first steps pay for graph compilation, cuDNN autotuning and memory allocation;
    counting them lowers throughput for short runs and raises it for long ones, so comparisons across run
    lengths or worker counts shift (Hoefler & Belli, SC15, rule 9 on warm-up and measurement setup).
    Example: 20-step benchmark runs whose first step takes 4 s of a 10 s total.
    Fix: mark the first steps as warm-up (honestscale runners do: --warmup-steps) and exclude them from
    throughput; report time to train separately, which includes them.
    Reference: Hoefler & Belli, SC15, rule 9.
    """

    code = "HS205"
    name = "warmup-included"
    severity = "warning"
    summary = "warm-up steps are marked and kept out of throughput"

    def targets(self, view: View) -> list[Comparison]:
        return [
            c
            for c in view.of_kind("config")
            if any((r.steps is not None and r.steps.steps) or _summaries(r) for r in c.runs)
        ]

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        summarised = [(r, got) for r in target.runs if (got := _summaries(r))]
        if summarised:
            yield self.fail(
                target,
                [r for r, _ in summarised],
                *summaries_include_warmup(summarised),
                summaries={r.id: got for r, got in summarised},
            )
        yield from self._against_the_data(target)
        with_steps = [r for r in target.runs if r.steps is not None and r.steps.steps]
        slow = []
        for r in with_steps:
            s = r.steps
            assert s is not None
            if s.first_unmarked_max_s and s.median_step_s and s.first_unmarked_max_s > SLOW * s.median_step_s:
                slow.append((r, s.first_unmarked_max_s / s.median_step_s))
        if slow:
            worst = max(ratio for _, ratio in slow)
            yield self.fail(
                target,
                [r for r, _ in slow],
                *unmarked_slow_steps(worst),
                worst_ratio=round(worst, 2),
            )
            return
        unmarked = [r for r in with_steps if r.steps is not None and r.steps.warmup_marked == 0]
        if unmarked:
            yield self.cannot_verify(target, unmarked, *WARMUP_NOT_RECORDED)

    def _against_the_data(self, target: Comparison) -> Iterator[Finding]:
        """The marked warm-up against the one MSER-5 finds in the step times (runs of 50 steps or more)."""
        counted: list[Counted] = []
        contended: list[Contended] = []
        busy: list[Busy] = []
        settled = 0  # repetitions whose steps settle by their marked warm-up
        for r in target.runs:
            if r.series is None or len(r.series.times) < steady.MIN_STEPS or (r.lost_share or 0.0) > COUNTED:
                continue  # stalls of more than 5 % of the run could make or hide that much (HS210 names them)
            got = steady.of_steps(r.series.times, r.series.marked, r.series.iterations)
            if got.warmup_steps is None or got.high_s is None:
                continue  # no steady state (show says so)
            if got.warmup_steps <= r.series.marked:
                settled += 1  # the marked warm-up covers the one found
                continue
            after, rest = r.series.times[r.series.marked :], r.series.times[got.warmup_steps :]
            mean_after = sum(after) / len(after)
            excess = mean_after / (sum(rest) / len(rest)) - 1
            left_in = r.series.times[r.series.marked : got.warmup_steps]
            typical = statistics.median(left_in) / statistics.median(rest) - 1  # a spike is no warm-up
            if excess > COUNTED and typical > COUNTED and mean_after > got.high_s:
                waited = _contention(r.series.pressure, r.series.times, r.series.marked, got.warmup_steps)
                if waited:
                    contended.append((r, got, excess, waited))
                elif (load := r.busy_host) is not None:
                    busy.append((r, got, excess, load))
                else:
                    counted.append((r, got, excess, None))
            else:
                settled += 1
        if counted and len(counted) < settled:
            yield self._not_repeated(target, counted, settled)
            counted = []
        if counted:
            yield self.fail(
                target,
                [r for r, *_ in counted],
                *warmup_counted(counted),
                found={r.id: g.as_json() for r, g, *_ in counted},
            )
        if contended:
            yield self.cannot_verify(
                target,
                [r for r, *_ in contended],
                *someones_load(contended),
                found={r.id: g.as_json() for r, g, *_ in contended},
                cpu_pressure={r.id: [round(w[0], 3), round(w[1], 3)] for r, _, _, w in contended},
            )
        if busy:
            yield self.cannot_verify(
                target,
                [r for r, *_ in busy],
                *busy_at_start(busy),
                found={r.id: g.as_json() for r, g, *_ in busy},
            )

    def _not_repeated(
        self,
        target: Comparison,
        slow: list[Counted],
        settled: int,
    ) -> Finding:
        """Slow steps after the marked warm-up in fewer repetitions than settle by it: no warm-up, which the code
        pays in every run, but something of those runs' own that the data do not name."""
        return self.cannot_verify(
            target,
            [r for r, *_ in slow],
            *slow_in_some_repetitions(slow, settled),
            found={r.id: g.as_json() for r, g, *_ in slow},
            settled_repetitions=settled,
        )


# the host's extra CPU wait per step explains at least half of the slow steps' extra time: its load, not a warm-up
LOAD = 0.5


def _contention(
    pressure: tuple[float | None, ...], times: tuple[float, ...], marked: int, found: int
) -> tuple[float, float] | None:
    """Where the host's CPU wait (contract 5's ``cpu_pressure``) explains why the steps between the marked warm-up
    and the steady state were slow: the share of their time the host was oversubscribed, and of the steady steps'.
    None where it does not, or where a step did not measure it."""
    if len(pressure) != len(times) or any(p is None for p in pressure[marked:]):
        return None
    waits = [float(p or 0.0) for p in pressure]
    left_t, rest_t = times[marked:found], times[found:]
    left_w, rest_w = waits[marked:found], waits[found:]
    slower = sum(left_t) / len(left_t) - sum(rest_t) / len(rest_t)
    waited_more = sum(left_w) / len(left_w) - sum(rest_w) / len(rest_w)
    if slower <= 0 or waited_more < LOAD * slower:
        return None
    return min(1.0, sum(left_w) / sum(left_t)), min(1.0, sum(rest_w) / sum(rest_t))


def _summaries(run: Run) -> dict[str, float]:
    """The rates of a tool's own summary over every iteration, warm-up included (``imported.summaries``)."""
    got = (run.imported or {}).get("summaries")
    if not isinstance(got, dict) or not got.get("includes_warmup"):
        return {}
    rates = got.get("rates")
    return (
        {str(k): float(v) for k, v in rates.items() if isinstance(v, int | float)}
        if isinstance(rates, dict)
        else {}
    )
