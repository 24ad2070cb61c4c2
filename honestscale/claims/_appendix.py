"""The artifact appendix, written from the store: the structure of the SC AD/AE appendix (contributions, the
artifacts that back each, the hardware, software, datasets and exact commands as the runs recorded them, the
expected results with their intervals, the time and accelerator-hours to reproduce, tuning runs counted), each
claim's verdict beside it, and the coverage (claims backed by runs / all claims, as the CAV artifact criteria
count it). Markdown and LaTeX from one model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from honestscale.claims._file import ClaimsFile
from honestscale.claims._judge import Verdict
from honestscale.display import shown
from honestscale.report import analyse, latex_escape
from honestscale.view import View

CODE = "\x00"  # around a command: code in Markdown, typewriter in LaTeX


@dataclass
class Backing:
    """What backs one claim: its runs' setups, software, datasets, commands and cost to reproduce."""

    verdict: Verdict
    campaigns: list[str]
    setups: list[dict[str, Any]] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    reproducibility: dict[str, Any] = field(default_factory=dict)
    totals: dict[str, Any] = field(default_factory=dict)


@dataclass
class Appendix:
    file: str
    backings: list[Backing]

    @property
    def coverage(self) -> tuple[int, int]:
        """(claims backed by runs in the store, all claims)."""
        return sum(bool(b.verdict.runs) for b in self.backings), len(self.backings)


def build(view: View, claims: ClaimsFile, verdicts: list[Verdict], path_root: Path | None) -> Appendix:
    backings = []
    for v in verdicts:
        ids = set(v.runs)
        campaigns = sorted({r.campaign for r in view.runs if r.id in ids and r.campaign})
        context = [r for r in view.runs if r.id in ids or (r.campaign and r.campaign in campaigns)]
        if not context:
            backings.append(Backing(v, []))
            continue
        model, _ = analyse(
            view.keeping(context), campaigns[0] if len(campaigns) == 1 else None, None, path_root
        )
        datasets = sorted({r.dataset for r in context if r.dataset})
        backings.append(
            Backing(
                v,
                campaigns,
                model.setup,
                datasets,
                model.reproducibility["commands"],
                model.reproducibility,
                model.totals,
            )
        )
    return Appendix(claims.path.name, backings)  # its name only: what is published names no machine's path


def _number(v: Verdict) -> str:
    return "none: " + v.reason if v.number is None else v.number.describe()


def _duration(hours: float) -> str:
    seconds = hours * 3600
    return (
        f"{seconds:.3g} s"
        if seconds < 120
        else f"{seconds / 60:.3g} min"
        if seconds < 7200
        else f"{hours:.3g} h"
    )


def _cost(t: dict[str, Any]) -> str:
    if not t:
        return "no runs"
    if t["accelerator_hours"]:
        spent = f"{t['accelerator_hours']:.3g} accelerator-hours"
    else:
        cores = f" ({t['core_hours']:.3g} core-hours)" if t["core_hours"] else " (cores not recorded)"
        spent = f"{t['node_hours']:.3g} node-hours{cores}, CPU only"
    tuning = (t["by_purpose"].get("tuning") or {}).get("runs", 0)
    return f"{t['runs']} runs ({tuning} tuning), {_duration(t['hours'])} of training in all, {spent}"


def _sections(a: Appendix) -> list[tuple[str, list[str]]]:
    """The appendix as (heading, paragraphs or items), shared by both formats."""
    backed, total = a.coverage
    out: list[tuple[str, list[str]]] = [
        (
            "Artifact description and evaluation",
            [
                f"Written by honestscale from the store and the claims file {a.file}. Coverage: {backed} of {total} "
                "claims are backed by runs in the store.",
                "Verdicts: supported, contradicted, not quotable (an error-severity rule of the honest-metrics linter "
                "fails on the runs behind the number), cannot verify (what is missing is said).",
            ],
        ),
        (
            "Contributions",
            [
                f"C{i}: {shown(b.verdict.claim.says)} [{b.verdict.verdict}]"
                for i, b in enumerate(a.backings, 1)
            ],
        ),
    ]
    for i, b in enumerate(a.backings, 1):
        v = b.verdict
        items = [
            f"Claim {v.claim.id!r}: {v.verdict}: {v.reason}",
            f"Expected result: {_number(v)}",
            f"Runs ({len(v.runs)}): {', '.join(v.runs[:6])}{' …' if len(v.runs) > 6 else ''}",
            f"Campaigns: {', '.join(b.campaigns) or 'none'}",
        ]
        for s in b.setups:
            items.append(
                f"Hardware: {s.get('system') or 'unnamed system'}, {s.get('nodes') or 1} node(s), "
                f"{s.get('accelerators_per_node') or 0} accelerator(s) a node ({s.get('accelerator') or 'none'}), "
                f"CPU {s.get('cpu') or 'not recorded'}, interconnect {s.get('interconnect') or 'not recorded'}; "
                f"software: {s.get('framework')} {s.get('framework_version') or ''}".rstrip()
                + "".join(f", {k} {val}" for k, val in sorted((s.get("software") or {}).items()))
                + f" ({s['runs']} runs)"
            )
        items.append(f"Datasets: {', '.join(b.datasets) or 'not recorded'}")
        items += [f"Command ({c['runs']} runs): {CODE}{c['command']}{CODE}" for c in b.commands] or [
            "Commands: not recorded"
        ]
        if b.reproducibility:
            r = b.reproducibility
            items.append(
                f"Versions: honestscale {r['honestscale']}, {', '.join(r['python']) or 'Python not recorded'}; "
                f"config hashes {', '.join(r['config_hashes'][:4]) or 'none'}; "
                f"commits {', '.join(r['git_commits'][:4]) or 'none recorded'}"
            )
        items.append(f"To reproduce: {_cost(b.totals)}")
        out.append((f"C{i}: {v.claim.id}", items))
    return out


def markdown(a: Appendix) -> str:
    lines = []
    for k, (heading, items) in enumerate(_sections(a)):
        lines.append(f"{'#' if k == 0 else '##'} {heading}\n")
        bullets = k > 0
        lines += [(f"- {item}" if bullets else f"{item}\n").replace(CODE, "`") for item in items]
        lines.append("")
    return "\n".join(lines)


def _tex(s: str) -> str:
    """Text as LaTeX (the report's escaping), each command in typewriter with its hyphens kept apart (-- stays two)."""
    parts = s.split(CODE)  # every second part a command
    return "".join(
        f"\\texttt{{{latex_escape(p).replace('-', '-{}')}}}" if i % 2 else latex_escape(p)
        for i, p in enumerate(parts)
    )


def latex(a: Appendix) -> str:
    lines = []
    for k, (heading, items) in enumerate(_sections(a)):
        lines.append(f"\\{'section' if k == 0 else 'subsection'}*{{{_tex(heading)}}}")
        if k == 0:
            lines += [_tex(item) + "\n" for item in items]
            continue
        lines.append("\\begin{itemize}")
        lines += [f"  \\item {_tex(item)}" for item in items]
        lines.append("\\end{itemize}")
    return "\n".join(lines) + "\n"


def write(
    view: View, claims: ClaimsFile, verdicts: list[Verdict], target: Path, path_root: Path | None
) -> list[Path]:
    """The appendix as ``target`` with ``.md`` and ``.tex`` suffixes, each whole or not at all."""
    got = build(view, claims, verdicts, path_root)
    written = []
    for suffix, text in ((".md", markdown(got)), (".tex", latex(got))):
        path = target.with_suffix(suffix)
        staged = path.with_name(f".{path.name}.partial")
        staged.write_text(text, encoding="utf-8")
        staged.replace(path)
        written.append(path)
    return written
