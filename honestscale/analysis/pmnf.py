"""Empirical scaling models of one measure against the worker count, chosen by leave-one-out cross-validation.

The candidates are Extra-P's performance model normal form with one term (PMNF: ``f(p) = c0 + c1 · p^i · log2(p)^j``,
``i`` and ``j`` from Extra-P's default sets, with its negative-exponent set for strong scaling), the constant, the
two laws written as models of the measure itself (Amdahl's ``T(p) = c0 + c1 / p`` on a time, Gustafson's
``X(p) = c0 + c1 · p`` on a throughput, both coefficients at least 0, so each law's parallel fraction can be read
from them) and a power law ``c · p^a`` (a straight line in log-log axes, its exponent free).

Each is fitted by least squares on *relative* residuals (a series spanning 4 to 4,096 accelerators spans two
orders of magnitude in time: an absolute fit would ignore the fast points) to one value per worker count (the
centre of its repetitions, which the caller picks). A model is chosen by leave-one-out cross-validation over the
worker counts: each count left out in turn, the model fitted to the others and asked for it; the mean absolute
relative error of those predictions ranks the candidates, fewer coefficients breaking ties. A model that leaves
the measure's bounds (a time at or below 0, a share above 1) anywhere between the smallest worker count and the
one asked about is no candidate: it could not be the measure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

Array = Any  # a numpy array (as analysis.stats types them: numpy's own are too loose for mypy strict)

# Extra-P 4's default single-parameter exponents (extrap.modelers.single_parameter.basic): (i as a fraction, j)
_POSITIVE = (
    "0/1:1 0/1:2 1/4:0 1/3:0 1/4:1 1/3:1 1/4:2 1/3:2 1/2:0 1/2:1 1/2:2 2/3:0 3/4:0 2/3:1 3/4:1 4/5:0 2/3:2 "
    "3/4:2 1/1:0 1/1:1 1/1:2 5/4:0 5/4:1 4/3:0 4/3:1 3/2:0 3/2:1 3/2:2 5/3:0 7/4:0 2/1:0 2/1:1 2/1:2 9/4:0 "
    "7/3:0 5/2:0 5/2:1 5/2:2 8/3:0 11/4:0 3/1:0 3/1:1"
)
# and its negative set (allow_negative_exponents): p^-i · log2(p)^-j
_NEGATIVE = (
    "0/1:-1 0/1:-2 -1/4:-1 -1/3:-1 -1/4:-2 -1/3:-2 -1/2:-1 -1/2:-2 -2/3:-1 -3/4:-1 -2/3:-2 -3/4:-2 -1/1:-1 "
    "-1/1:-2 -5/4:-1 -4/3:-1 -3/2:-1 -3/2:-2 -2/1:-1 -2/1:-2 -5/2:-1 -5/2:-2 -3/1:-1"
)
MIN_SCALES = 3  # worker counts a model is chosen from: two coefficients fitted to the others of each fold
TIE = 1e-9  # cross-validation errors this close are a tie: the simpler model is kept


@dataclass(frozen=True)
class Hypothesis:
    """A model's form: ``kind`` pmnf (``c0 + c1 · p^i · log2(p)^j``), constant, amdahl, gustafson or power."""

    kind: str
    i: Fraction = Fraction(0)
    j: int = 0

    @property
    def coefficients(self) -> int:
        return 1 if self.kind == "constant" else 2

    def basis(self, p: Array) -> Array:
        """The term's values at worker counts ``p`` (the constant's: zeros)."""
        if self.kind == "constant":
            return np.zeros_like(p)
        if self.kind == "amdahl":
            return 1.0 / p
        if self.kind == "gustafson":
            return p.astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.power(p, float(self.i)) * np.power(np.log2(p), self.j)

    def term(self) -> str:
        """The term as text: ``p^(1/2) · log2(p)``, ``1/p`` (Amdahl's), ``p`` (Gustafson's)."""
        if self.kind == "amdahl":
            return "1/p"
        if self.kind == "gustafson":
            return "p"
        parts = []
        if self.i:
            parts.append("p" if self.i == 1 else f"p^({self.i})" if self.i.denominator > 1 else f"p^{self.i}")
        if self.j:
            parts.append("log2(p)" if self.j == 1 else f"log2(p)^{self.j}")
        return " · ".join(parts)


def _parse(spec: str) -> list[Hypothesis]:
    out = []
    for item in spec.split():
        i, j = item.split(":")
        out.append(Hypothesis("pmnf", Fraction(i), int(j)))
    return out


def hypotheses(laws: Sequence[str] = ("amdahl", "gustafson")) -> list[Hypothesis]:
    """Every candidate: the constant, the laws asked for, the power law, then Extra-P's PMNF terms."""
    return [
        Hypothesis("constant"),
        *(Hypothesis(law) for law in laws),
        Hypothesis("power"),
        *_parse(_POSITIVE),
        *_parse(_NEGATIVE),
    ]


@dataclass(frozen=True)
class Model:
    """A fitted hypothesis: ``c0 + c1 · term`` (power: ``c1 · p^a``, ``a`` kept as its exponent)."""

    hypothesis: Hypothesis
    c0: float
    c1: float
    a: float = 0.0  # the power law's exponent

    def __call__(self, p: float | Array) -> Array:
        x = np.asarray(p, dtype=float)
        got = values(
            self.hypothesis, np.asarray([self.c0]), np.asarray([self.c1]), np.asarray([self.a]), x.ravel()
        )
        return got[0].reshape(x.shape)

    def formula(self) -> str:
        """``1210 + 3.0e+04 · 1/p`` or ``5.1e+03 · p^-0.62``: the model with its coefficients."""
        h = self.hypothesis
        if h.kind == "power":
            return f"{self.c1:.4g} · p^{self.a:.3f}"
        if h.kind == "constant":
            return f"{self.c0:.4g}"
        sign = "-" if self.c1 < 0 else "+"
        return f"{self.c0:.4g} {sign} {abs(self.c1):.4g} · {h.term()}"

    def name(self) -> str:
        """What kind of model it is, as the report names it."""
        h = self.hypothesis
        return {
            "amdahl": "Amdahl's law",
            "gustafson": "Gustafson's law",
            "power": "power law",
            "constant": "constant",
        }.get(h.kind, "PMNF")


def _solve(h: Hypothesis, f: Array, w: Array) -> tuple[Array, Array]:
    """Least squares of ``1 = c0 · w + c1 · f · w`` in each row (w = 1 / y: relative residuals), closed form; the
    laws' coefficients kept at or above 0 (the better one-coefficient fit where the pair would leave it)."""
    fw = f * w
    s00, s01, s11 = np.sum(w * w, axis=1), np.sum(w * fw, axis=1), np.sum(fw * fw, axis=1)
    b0, b1 = np.sum(w, axis=1), np.sum(fw, axis=1)
    if h.kind == "constant":
        return b0 / s00, np.zeros_like(b0)
    det = s00 * s11 - s01 * s01
    with np.errstate(divide="ignore", invalid="ignore"):
        c0, c1 = (b0 * s11 - b1 * s01) / det, (b1 * s00 - b0 * s01) / det
        if h.kind in ("amdahl", "gustafson"):
            only0, only1 = b0 / s00, b1 / s11  # the serial part alone, the parallel part alone
            # the residual sum of squares of each: n - 2 c·b + c² s (n, the rows' length, is common to both)
            better0 = -2 * only0 * b0 + only0**2 * s00 <= -2 * only1 * b1 + only1**2 * s11
            bad = (c0 < 0) | (c1 < 0) | ~np.isfinite(c0)
            c0 = np.where(bad, np.where(better0, only0, 0.0), c0)
            c1 = np.where(bad, np.where(better0, 0.0, only1), c1)
    return c0, c1


def fit_rows(h: Hypothesis, p: Array, y: Array) -> tuple[Array, Array, Array]:
    """``h`` fitted to each row of ``y`` (rows x len(p)) by least squares on relative residuals: its c0, c1 and
    (the power law's) exponent per row, nan where it cannot be (a term undefined at a point: ``log2(p)^-1`` at
    p = 1; a value at or below 0)."""
    y = np.atleast_2d(y)
    nan = np.full(y.shape[0], np.nan)
    if p.size < h.coefficients or not np.all(np.isfinite(h.basis(p))):
        return nan, nan, nan
    ok = np.all(y > 0, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if h.kind == "power":  # relative residuals: a straight line in log-log axes
            x, ly = np.log(p), np.log(np.where(ok[:, None], y, 1.0))
            slope = np.sum((x - x.mean()) * (ly - ly.mean(axis=1, keepdims=True)), axis=1) / np.sum(
                (x - x.mean()) ** 2
            )
            c1 = np.exp(ly.mean(axis=1) - slope * x.mean())
            return np.where(ok, 0.0, np.nan), np.where(ok, c1, np.nan), slope
        w = 1.0 / y
        c0, c1 = _solve(h, np.broadcast_to(h.basis(p), y.shape), w)
    return np.where(ok, c0, np.nan), np.where(ok, c1, np.nan), np.zeros(y.shape[0])


def values(h: Hypothesis, c0: Array, c1: Array, a: Array, at: Array) -> Array:
    """The fitted models (one per row) at the worker counts ``at`` (rows x len(at))."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if h.kind == "power":
            return c1[:, None] * np.power(at[None, :], a[:, None])
        return c0[:, None] + c1[:, None] * h.basis(at)[None, :]


def _inside(v: Array, bounds: tuple[float, float]) -> Array:
    return np.all(np.isfinite(v) & (v > bounds[0]) & (v <= bounds[1]), axis=1)


def fit(h: Hypothesis, p: Array, y: Array) -> Model | None:
    """``h`` fitted to the points (p, y); None where it cannot be."""
    c0, c1, a = fit_rows(h, p, y[None, :])
    if not (math.isfinite(c0[0]) and math.isfinite(c1[0])):
        return None
    return Model(h, float(c0[0]), float(c1[0]), float(a[0]))


@dataclass(frozen=True)
class Scored:
    model: Model
    cv_error: float  # mean absolute relative error of the leave-one-out predictions
    fold_errors: tuple[float, ...]  # each worker count's, signed: (predicted - measured) / measured


@dataclass(frozen=True)
class Rows:
    """One hypothesis scored on every row of a bootstrap at once: nan where it does not fit a row."""

    cv_error: Array  # rows
    fold_errors: Array  # rows x worker counts
    at: Array  # rows: the full fit's value at the worker count asked about
    c0: Array
    c1: Array
    a: Array


def score_rows(h: Hypothesis, p: Array, y: Array, up_to: float, bounds: tuple[float, float]) -> Rows:
    """``h`` fitted to each row and to each of its leave-one-out folds; a row whose fit or any fold's leaves the
    bounds (between the smallest worker count and ``up_to`` for the fit, the series' own for a fold) is nan."""
    y = np.atleast_2d(y)
    lo, hi = float(p.min()), float(p.max())
    grid = np.geomspace(lo, max(up_to, hi), 64)
    c0, c1, a = fit_rows(h, p, y)
    ok = _inside(values(h, c0, c1, a, grid), bounds)
    own = np.geomspace(lo, hi, 64)
    errors = np.full(y.shape, np.nan)
    for k in range(p.size):
        keep = np.arange(p.size) != k
        f0, f1, fa = fit_rows(h, p[keep], y[:, keep])
        ok &= _inside(values(h, f0, f1, fa, own), bounds)
        errors[:, k] = values(h, f0, f1, fa, p[k : k + 1])[:, 0] / y[:, k] - 1.0
    cv = np.where(ok, np.mean(np.abs(errors), axis=1), np.nan)
    at = np.where(ok, values(h, c0, c1, a, np.asarray([up_to], dtype=float))[:, 0], np.nan)
    return Rows(cv, errors, at, c0, c1, a)


def select(
    p: Sequence[float] | Array,
    y: Sequence[float] | Array,
    up_to: float,
    bounds: tuple[float, float] = (0.0, math.inf),
    candidates: Sequence[Hypothesis] | None = None,
) -> list[Scored]:
    """Every candidate that fits, best first (its cross-validation error, then fewer coefficients, then the order
    of the candidates); empty with fewer than :data:`MIN_SCALES` worker counts."""
    px, yx = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    if px.size < MIN_SCALES:
        return []
    got = []
    for order, h in enumerate(candidates if candidates is not None else hypotheses()):
        r = score_rows(h, px, yx[None, :], up_to, bounds)
        if math.isfinite(r.cv_error[0]):
            model = Model(h, float(r.c0[0]), float(r.c1[0]), float(r.a[0]))
            s = Scored(model, float(r.cv_error[0]), tuple(float(e) for e in r.fold_errors[0]))
            got.append((round(s.cv_error / TIE) * TIE, h.coefficients, order, s))
    got.sort(key=lambda t: t[:3])
    return [t[3] for t in got]
