"""The claims file: what a paper says about its runs, one ``[[claim]]`` table each (format version 1).

Read with :func:`load`; every mistake a user can make (malformed TOML, an unknown key, measure or relation, a
value a relation needs and the claim lacks, a point missing where the measure is one) is a :class:`ClaimsError`
naming the file, the line of the claim and the fix. ``docs/claims.md`` documents the format.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from honestscale.errors import HonestscaleError, read_toml
from honestscale.view import SPLIT_BY

VERSION = 1

# measure -> (what it is, whether it is a ratio over the series' base case)
MEASURES: dict[str, tuple[str, bool]] = {
    "time_to_train": ("time to train", False),
    "time_to_accuracy": ("time to accuracy", False),
    "throughput": ("throughput (samples/s, in total)", False),
    "throughput_per_worker": ("throughput per worker (samples/s)", False),
    "accuracy": ("accuracy reached (the runs' final value of their target metric)", False),
    "energy": ("energy to accuracy, or to train", False),
    "mfu": ("model FLOPs utilisation (a fraction: 0.52 for 52 %)", False),
    "mlperf_score": (
        "MLPerf score: the olympic mean of the times to train, times scaling.json's factor",
        False,
    ),
    "speedup": ("speedup of the time over the series' base case", True),
    "efficiency": ("parallel efficiency of the time over the series' base case", True),
    "throughput_speedup": ("speedup of the throughput over the series' base case", True),
    "throughput_efficiency": ("efficiency of the throughput over the series' base case", True),
}
# the measures an ordering of two run sets ("A is faster than B") compares, as ``compare`` does
ORDERED = ("time_to_train", "time_to_accuracy", "throughput", "energy")
VALUED = ("about", "at_least", "at_most")
ORDERINGS = ("faster", "slower")
RELATIONS = (*VALUED, *ORDERINGS)
STATISTICS = ("median", "mean", "hmean", "best", "single")
KEYS = (
    "id",
    "says",
    "measure",
    "runs",
    "than",
    "at",
    "base",
    "across",
    "relation",
    "value",
    "tolerance",
    "statistic",
    "unit",
)
# the labels a base case may be taken across (``across``): a series keyed by them holds no point of another label
ACROSS = (SPLIT_BY,)
# the units a time may be stated in (the store's are seconds); other measures take the store's own unit
TIME_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}
TIMED = ("time_to_train", "time_to_accuracy", "mlperf_score")


class ClaimsError(HonestscaleError):
    pass


@dataclass(frozen=True)
class Tolerance:
    """How far the store's number may lie from the claimed value: relative (``"5%"``) or absolute (``0.02``)."""

    amount: float
    relative: bool

    def of(self, value: float) -> float:
        return abs(value) * self.amount if self.relative else self.amount

    def text(self) -> str:
        return f"{100 * self.amount:g} %" if self.relative else f"{self.amount:g}"


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, as the file states it, with the line it starts on."""

    id: str
    says: str
    measure: str
    runs: str  # compare's selectors: a campaign, or field=value filters joined by commas
    relation: str
    line: int
    than: str | None = None  # orderings of two run sets: the other side (B)
    at: tuple[tuple[str, str], ...] = ()  # the point: ("workers", "2"), or a layout
    value: float | None = None
    tolerance: Tolerance | None = None
    statistic: str | None = None  # what the paper quotes (median, mean, best, single run); None: the store's
    base: tuple[tuple[str, str], ...] = ()  # a ratio's base case as the paper names it: ("workers", "512")
    across: tuple[str, ...] = ()  # the labels (ACROSS) the base case may differ in from the point

    @property
    def workers(self) -> int | None:
        got = dict(self.at).get("workers")
        return None if got is None else int(float(got))

    @property
    def ratio(self) -> bool:
        return MEASURES[self.measure][1]


@dataclass(frozen=True)
class ClaimsFile:
    path: Path
    version: int
    claims: tuple[Claim, ...]


def _lines(text: str) -> list[int]:
    """The line number of each ``[[claim]]`` header, in order."""
    return [i + 1 for i, line in enumerate(text.splitlines()) if re.match(r"\s*\[\[\s*claim\s*\]\]", line)]


def _tolerance(raw: Any, where: str) -> Tolerance:
    if isinstance(raw, bool):
        raise ClaimsError(f"{where}: tolerance = {raw!r} is no amount", 'write tolerance = "5%" or 0.02')
    if isinstance(raw, int | float):
        if raw < 0:
            raise ClaimsError(f"{where}: tolerance = {raw} is negative", "a tolerance is 0 or more")
        return Tolerance(float(raw), relative=False)
    if isinstance(raw, str) and (m := re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*%\s*", raw)):
        return Tolerance(float(m.group(1)) / 100, relative=True)
    raise ClaimsError(
        f"{where}: tolerance = {raw!r} is neither a percentage nor a number",
        'write tolerance = "5%" (of the claimed value) or an amount in its unit, 0.02',
    )


def _text(table: dict[str, Any], key: str, where: str, required: bool = True) -> str | None:
    raw = table.get(key)
    if raw is None and not required:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise ClaimsError(f"{where}: {key} is missing or empty", _FIXES[key])
    return raw.strip()


_FIXES = {
    "id": 'give each claim a short unique id: id = "two-workers-slower"',
    "says": 'quote the sentence as the paper words it: says = "2 workers reach 95 % later than 1"',
    "measure": f"measure = one of {', '.join(MEASURES)}",
    "runs": 'name the runs as compare does: runs = "campaign=digits-scaling" (or "campaign=x,workers=8")',
    "relation": f"relation = one of {', '.join(RELATIONS)}",
}


def _across(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(v, str) and v in ACROSS for v in raw):
        raise ClaimsError(
            f"{where}: across = {raw!r}", f"a list of the labels a base case may differ in: {list(ACROSS)}"
        )
    return tuple(raw)


def _point(raw: Any, where: str, name: str = "at") -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        raise ClaimsError(f"{where}: {name} = {raw!r} is no point", f"write {name} = {{ workers = 2 }}")
    out = []
    for k, v in raw.items():
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise ClaimsError(f"{where}: {name}.{k} = {v!r} is no value", f"write {name} = {{ workers = 2 }}")
        out.append((str(k), str(v)))
    if "workers" in dict(out):
        try:
            if int(float(dict(out)["workers"])) < 1:
                raise ValueError
        except ValueError:
            raise ClaimsError(
                f"{where}: {name}.workers = {dict(out)['workers']!r} is no worker count",
                "a worker count is a whole number, 1 or more",
            ) from None
    return tuple(out)


def _claim(table: Any, where: str, line: int) -> Claim:
    if not isinstance(table, dict):
        raise ClaimsError(f"{where}: a claim is a table", "write each claim under its own [[claim]] header")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ClaimsError(f"{where}: unknown key {unknown[0]!r}", f"a claim's keys: {', '.join(KEYS)}")
    ident, says, measure, runs, relation = (
        _text(table, k, where) for k in ("id", "says", "measure", "runs", "relation")
    )
    assert ident and says and measure and runs and relation
    where = f"{where} (claim {ident!r})"
    if measure not in MEASURES:
        raise ClaimsError(f"{where}: unknown measure {measure!r}", _FIXES["measure"])
    if relation not in RELATIONS:
        raise ClaimsError(f"{where}: unknown relation {relation!r}", _FIXES["relation"])
    than = _text(table, "than", where, required=False)
    at = _point(table.get("at"), where)
    value = table.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ClaimsError(
            f"{where}: value = {value!r} is no number", "write the number the paper states: value = 0.92"
        )
    statistic = table.get("statistic")
    if statistic is not None and statistic not in STATISTICS:
        raise ClaimsError(
            f"{where}: unknown statistic {statistic!r}", f"statistic = one of {', '.join(STATISTICS)}"
        )
    tolerance = None if table.get("tolerance") is None else _tolerance(table["tolerance"], where)
    unit = table.get("unit", "s")
    if unit != "s":
        if measure not in TIMED or unit not in TIME_UNITS:
            raise ClaimsError(
                f"{where}: unit = {unit!r}",
                f"a time ({', '.join(TIMED)}) may be stated in s, min or h; other measures in the "
                "store's unit (samples/s, J, a fraction, x): leave unit out",
            )
        scale = TIME_UNITS[unit]
        value = None if value is None else value * scale
        if tolerance is not None and not tolerance.relative:
            tolerance = Tolerance(tolerance.amount * scale, relative=False)
    _check_values(value, tolerance, measure, unit, table, where)
    base, across = _point(table.get("base"), where, "base"), _across(table.get("across"), where)
    claim = Claim(
        ident,
        says,
        measure,
        runs,
        relation,
        line,
        than,
        at,
        None if value is None else float(value),
        tolerance,
        statistic,
        base,
        across,
    )
    _check_shape(claim, where)
    return claim


def _check_values(
    value: float | None,
    tolerance: Tolerance | None,
    measure: str,
    unit: str,
    table: dict[str, Any],
    where: str,
) -> None:
    """A value and a tolerance that are numbers a claim can hold: finite in the measure's unit (``inf``, ``nan`` and
    ``1e308`` minutes, which is infinite in seconds, are not), and no measure of these below 0."""
    said = f"value = {table.get('value')!r}" + (f" {unit}" if unit != "s" else "")
    if value is not None and not math.isfinite(value):
        shown = "" if math.isfinite(float(table["value"])) else " is not a finite number"
        raise ClaimsError(
            f"{where}: {said}{shown or f' is {value:g} s, not a finite number'}",
            "write the number the paper states, finite, in the measure's unit (seconds, or unit = min / h)",
        )
    if value is not None and value < 0:
        raise ClaimsError(
            f"{where}: {said} is negative: a {MEASURES[measure][0]} is 0 or more",
            "write the number the paper states",
        )
    if tolerance is not None and not math.isfinite(tolerance.amount):
        raise ClaimsError(
            f"{where}: tolerance = {table.get('tolerance')!r} is not a finite amount",
            'write tolerance = "5%" or an amount in the measure\'s unit, 0.02',
        )


def _check_shape(c: Claim, where: str) -> None:
    """What each relation and measure needs: a value and tolerance for ``about``, a point for a ratio, ..."""
    if c.relation in VALUED and c.value is None:
        raise ClaimsError(
            f"{where}: relation {c.relation!r} needs the value the paper states",
            "add value = 0.92 (in the measure's unit: seconds, samples/s, a fraction)",
        )
    if c.relation == "about" and c.tolerance is None:
        raise ClaimsError(f"{where}: 'about' needs a tolerance", 'add tolerance = "5%" (or an amount: 0.02)')
    if c.than is not None:
        if c.relation not in ORDERINGS:
            raise ClaimsError(
                f"{where}: a claim with 'than' orders two run sets",
                "relation = faster or slower (value = 1.8 for '1.8x faster')",
            )
        if c.measure not in ORDERED:
            raise ClaimsError(
                f"{where}: an ordering compares {', '.join(ORDERED)}, not {c.measure!r}",
                "measure = time_to_train (or time_to_accuracy, throughput, energy)",
            )
        if c.value is not None and c.tolerance is None:
            raise ClaimsError(f"{where}: a factor ({c.value:g}x) needs a tolerance", 'add tolerance = "10%"')
        return
    if c.relation in ORDERINGS and c.measure not in ("time_to_train", "time_to_accuracy", "throughput"):
        raise ClaimsError(
            f"{where}: 'faster'/'slower' orders a point against the series' base case by its time or "
            f"throughput, not {c.measure!r}",
            'measure = time_to_accuracy (or time_to_train, throughput), or add than = "..."',
        )
    if c.base and not (c.ratio or c.relation in ORDERINGS):
        raise ClaimsError(
            f"{where}: base names the base case of a ratio", "leave base out of a claim about one point"
        )
    if (c.ratio or c.relation in ORDERINGS) and c.workers is None:
        raise ClaimsError(
            f"{where}: a claim about the {MEASURES[c.measure][0]} needs its point",
            "add at = { workers = 64 } (against the series' base case)",
        )


def load(path: Path) -> ClaimsFile:
    """The claims of ``path``, each checked (a :class:`ClaimsError` naming the file, line and fix)."""
    data = read_toml(path, ClaimsError, "claims file")
    text = path.read_text(encoding="utf-8")
    version = data.get("version", VERSION)
    if version != VERSION:
        raise ClaimsError(
            f"{path}: claims file version {version!r}; this honestscale reads version {VERSION}",
            f"write version = {VERSION} at the top (docs/claims.md)",
        )
    unknown = sorted(set(data) - {"version", "claim"})
    if unknown:
        raise ClaimsError(
            f"{path}: unknown top-level key {unknown[0]!r}",
            "a claims file holds version = 1 and [[claim]] tables (docs/claims.md)",
        )
    tables = data.get("claim")
    if not isinstance(tables, list) or not tables:
        raise ClaimsError(f"{path}: no [[claim]] table", "add one per claim of the paper (docs/claims.md)")
    lines = _lines(text)
    claims = [
        _claim(t, f"{path} line {lines[i] if i < len(lines) else '?'}", lines[i] if i < len(lines) else 0)
        for i, t in enumerate(tables)
    ]
    seen: dict[str, int] = {}
    for c in claims:
        if c.id in seen:
            raise ClaimsError(
                f"{path} line {c.line}: claim id {c.id!r} is also the id of the claim at line {seen[c.id]}",
                "give every claim its own id",
            )
        seen[c.id] = c.line
    return ClaimsFile(path, VERSION, tuple(claims))
