"""Repetitions until the interval is narrow (``campaign run --until-ci``, the spec's ``until_ci``).

After a campaign's final runs, every grid point whose 95 % interval of the median time is still wider than the
asked fraction of the median, and that has fewer runs than the cap, gets one more repetition; again and again
until every point meets the bound or reaches the cap. Locally the next round runs at once; on Slurm,
``campaign submit`` submits it once the point's runs so far have been collected (``--follow`` does it all).
The extra repetitions have the ids and seeds the spec's own would have had (``...-r6``, seed + 6).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection

from honestscale.analysis.repetitions import Precision, precision
from honestscale.campaign.spec import RunPlan, Spec
from honestscale.judged import read
from honestscale.store import Connection
from honestscale.view import Run


def _runs_of_points(con: Connection, spec: Spec, finals: list[RunPlan]) -> dict[str, list[Run]]:
    """The stored runs of every final point (by the point's run-id pattern, any number of repetitions)."""
    patterns = {p.point: re.compile(rf"{re.escape(p.series)}-r(\d+)") for p in finals}
    out: dict[str, list[Run]] = defaultdict(list)
    for r in read(con, spec.name).view.runs:
        for point, pattern in patterns.items():
            if pattern.fullmatch(r.id):
                out[point].append(r)
    return out


def precisions(con: Connection, spec: Spec, finals: list[RunPlan]) -> dict[str, Precision]:
    """Per final point: how precise its median time is now (the spec must have ``until_ci``)."""
    assert spec.until_ci is not None
    runs = _runs_of_points(con, spec, finals)
    return {
        p: precision(runs.get(p, []), spec.until_ci, spec.max_repetitions)
        for p in dict.fromkeys(f.point for f in finals)
    }


def next_round(
    con: Connection, spec: Spec, finals: list[RunPlan], pending: Collection[str] = ()
) -> list[RunPlan]:
    """One more repetition of every point that has neither met the bound nor reached the cap; none for a point
    whose next run is ``pending`` (submitted, not yet collected). Empty when every point is done."""
    if spec.until_ci is None:
        return []
    runs = _runs_of_points(con, spec, finals)
    template = {p.point: p for p in finals}
    out = []
    for point, plan in template.items():
        got = precision(runs.get(point, []), spec.until_ci, spec.max_repetitions)
        if got.met or got.capped:
            continue
        reps = [int(m.group(1)) for r in runs.get(point, []) if (m := re.search(r"-r(\d+)$", r.id))]
        rep = max([*reps, spec.repetitions - 1]) + 1
        more = plan.repetition(rep, spec.seed)
        if more.run_id in pending:
            continue
        out.append(more)
    return out
