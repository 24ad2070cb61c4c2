"""``numbers.tex``: every number of the report's results as a LaTeX macro, so that a paper's numbers come from the
store instead of a keyboard.

A paper ``\\input``s the file and writes ``\\hs{digits-scaling/2/speedup}`` (the number with its interval, as the
report prints it: ``0.38x [0.20, 0.68]``), ``\\hs{.../value}``, ``.../ci``, ``.../n`` or ``.../rules``. A number an
error-severity rule fails on expands to the number *and* a visible "do not quote" box. Each definition carries a
fingerprint of the runs behind it and its value, so that ``honestscale claims check paper.tex`` can tell a number
that changed since it was written from one that did not. Keys: ``<campaign>/<workers>/<measure>``, the campaign's
second series ``<campaign>.2/...``; characters a key cannot hold become ``-``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from honestscale.analysis.points import Point, ratio_rules
from honestscale.report._model import ComparisonModel, Model
from honestscale.report._tables import latex_escape
from honestscale.report._text import ratio_text

# measure -> (the point's value, its interval, how it reads); times in seconds as the report's JSON has them
_MEASURES: dict[str, tuple[str, str | None, str]] = {
    "time_to_train": ("time_s", "time_ci", "s"),
    "time_to_accuracy": ("tta_s", "tta_ci", "s"),
    "throughput": ("throughput", None, "samples/s"),
    "throughput_per_worker": ("per_worker", None, "samples/s"),
    "accuracy": ("accuracy", None, ""),
    "energy": ("energy_j", "energy_ci", "J"),
    "speedup": ("speedup", "speedup_ci", "x"),
    "efficiency": ("efficiency", "efficiency_ci", "%"),
    "throughput_speedup": ("throughput_speedup", "throughput_speedup_ci", "x"),
    "throughput_efficiency": ("throughput_efficiency", "throughput_efficiency_ci", "%"),
    "mlperf_score": ("mlperf_score_s", None, "s"),
}
RATIOS = ("speedup", "efficiency", "throughput_speedup", "throughput_efficiency")
_DEF = re.compile(r"^\\hsdef\{(?P<key>[^}]*)\}\{(?P<text>.*)\}\{(?P<meta>[^}]*)\}\s*$")


@dataclass(frozen=True)
class TexNumber:
    """One number of the report as a macro: its key, as it reads, and what it is made of."""

    key: str
    text: str  # as the report prints it: value, unit, interval
    value: float
    low: float | None
    high: float | None
    n: int
    rules: dict[str, list[str]]  # fail / cannot_verify / error / suppressed: rule codes on the runs behind it
    runs: tuple[str, ...]

    @property
    def fingerprint(self) -> str:
        """The runs behind the number and its value: a 12-digit hash that moves when either does."""
        body = ",".join(self.runs) + f"|{self.value!r}|{self.low!r}|{self.high!r}"
        return hashlib.sha256(body.encode()).hexdigest()[:12]

    @property
    def do_not_quote(self) -> bool:
        return bool(self.rules.get("error"))


def _key_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", "-", text) or "-"


def _reads(value: float, ci: tuple[float | None, float | None], unit: str) -> str:
    if unit in ("x", "%"):
        return ratio_text(value, ci, unit == "%", "x" if unit == "x" else "")
    digits = f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
    lo, hi = ci
    span = f" [{lo:.3g}, {hi:.3g}]" if lo is not None and hi is not None else ""
    return f"{digits}{' ' + unit if unit else ''}{span}"


def _of_point(prefix: str, c: ComparisonModel, p: Point) -> list[TexNumber]:
    base = c.points[0] if c.kind == "scaling" and c.points else None
    out = []
    for measure, (attr, ci_attr, unit) in _MEASURES.items():
        value = getattr(p, attr)
        if value is None or (measure in RATIOS and (c.kind != "scaling" or p is base)):
            continue
        ci = getattr(p, ci_attr) if ci_attr else (None, None)
        ratio = measure in RATIOS
        runs = tuple(sorted({*p.run_ids, *(base.run_ids if ratio and base else [])}))
        rules = ratio_rules(p, measure) if ratio else p.lint
        n = min(p.succeeded, base.succeeded) if ratio and base else p.succeeded
        out.append(
            TexNumber(
                f"{prefix}/{p.workers}/{measure}",
                _reads(float(value), tuple(ci), unit),
                float(value),
                ci[0],
                ci[1],
                n,
                rules,
                runs,
            )
        )
    return out


# what tells one setup of a campaign from another in a key (a campaign of one setup family keeps its name alone)
FAMILY = ("model", "dataset", "framework", "accelerator", "layout_key")


def numbers(model: Model) -> list[TexNumber]:
    """Every result the report prints per point (scaling series, and setups no series holds), keyed by what selects
    its runs: ``<campaign>/<workers>/<measure>``, and ``<campaign>.<model-dataset-framework-...>/...`` in a campaign
    of several setup families (a family's global batch added where two share a worker count). Keys never depend
    on the order runs landed in."""
    out: list[TexNumber] = []
    covered: set[frozenset[str]] = set()
    chosen = [c for c in model.comparisons if c.kind in ("scaling", "config")]
    families: dict[str, set[tuple[Any, ...]]] = {}
    batches: dict[tuple[Any, ...], set[Any]] = {}
    for c in chosen:  # the setups decide the families (a series' points are setups too)
        campaign = _key_part(_campaign_of(model, c))
        families.setdefault(campaign, set())
        if c.kind == "config":
            families[campaign].add(_family(c))
            batches.setdefault((campaign, _family(c), c.key.get("workers")), set()).add(
                c.key.get("global_batch_size")
            )
    for c in chosen:
        points = [p for p in c.points if frozenset(p.run_ids) not in covered]
        if not points:
            continue
        campaign = _key_part(_campaign_of(model, c))
        prefix = campaign
        if len(families[campaign]) > 1:
            prefix += "." + "-".join(_key_part(str(v)) for v in _family(c) if v is not None)
        if c.kind == "config" and len(batches[(campaign, _family(c), c.key.get("workers"))]) > 1:
            prefix += f".b{c.key.get('global_batch_size')}"
        for p in points:
            covered.add(frozenset(p.run_ids))
            out += _of_point(prefix, c, p)
    return out


def _family(c: ComparisonModel) -> tuple[Any, ...]:
    """The setup family of a comparison: its model, dataset, framework, accelerator and layout (a series' layout
    family where a setup's layout is not in its key)."""
    key = c.key
    return tuple(key.get(f, key.get("layout_family")) if f == "layout_key" else key.get(f) for f in FAMILY)


def _campaign_of(model: Model, c: ComparisonModel) -> str:
    by_id = {r.run_id: r.campaign for r in model.runs}
    names = sorted({by_id.get(r) or "runs" for r in c.runs})
    return names[0] if len(names) == 1 else "+".join(names)


def _rules_text(rules: dict[str, list[str]]) -> str:
    parts = [
        f"{', '.join(rules[k])} {word}"
        for k, word in (("fail", "fail"), ("cannot_verify", "cannot verify"), ("suppressed", "suppressed"))
        if rules.get(k)
    ]
    return "; ".join(parts) or "none"


HEADER = r"""% numbers.tex: the report's numbers as macros, written by {by}. \input{{numbers}} in the paper, then write
% \hs{{KEY}} (the number with its 95 % interval, as the report prints it), \hs{{KEY/value}}, \hs{{KEY/ci}},
% \hs{{KEY/n}} or \hs{{KEY/rules}}. A number an error-severity rule fails on carries a "do not quote" box.
% `honestscale claims check paper.tex` checks every \hs the paper uses against the store as it is now.
% Each \hsdef's third argument: fp (the runs behind it and its value, hashed), n (runs), rules failing.
\makeatletter
\providecommand\hs[1]{{\@ifundefined{{hs@#1}}{{\PackageError{{honestscale}}{{no number #1 in numbers.tex}}{{Write
  the report again, or use a key this file defines}}}}{{\@nameuse{{hs@#1}}}}}}
\providecommand\hsdef[3]{{\@namedef{{hs@#1}}{{#2}}}}
\providecommand\hsdonotquote[1]{{\fbox{{\textbf{{do not quote:}} #1}}}}
\makeatother
"""


def numbers_tex(model: Model) -> str:
    """The file's text: the header's macros, then one ``\\hsdef`` per number and form."""
    lines = [HEADER.format(by=model.generated_by)]
    for t in numbers(model):
        mark = f" \\hsdonotquote{{error-severity {', '.join(t.rules['error'])}}}" if t.do_not_quote else ""
        meta = f"fp={t.fingerprint};n={t.n};rules={','.join(t.rules.get('fail', []))}"
        ci = f"[{t.low:.3g}, {t.high:.3g}]" if t.low is not None and t.high is not None else "no interval"
        value = t.text.split(" [")[0]
        for suffix, text in (
            ("", latex_escape(t.text) + mark),
            ("/value", latex_escape(value) + mark),
            ("/ci", latex_escape(ci)),
            ("/n", str(t.n)),
            ("/rules", latex_escape(_rules_text(t.rules))),
        ):
            lines.append(f"\\hsdef{{{t.key}{suffix}}}{{{text}}}{{{meta}}}")
    return "\n".join(lines) + "\n"


def read_numbers_tex(text: str) -> dict[str, dict[str, object]]:
    """The definitions of a ``numbers.tex`` (its main forms only): key -> {"text", "fp", "n"}."""
    out: dict[str, dict[str, object]] = {}
    for line in text.splitlines():
        m = _DEF.match(line)
        if m is None or m["key"].endswith(("/value", "/ci", "/n", "/rules")):
            continue
        meta = dict(part.split("=", 1) for part in m["meta"].split(";") if "=" in part)
        out[m["key"]] = {"text": m["text"], "fp": meta.get("fp"), "n": meta.get("n")}
    return out
