"""Which runs a side of a comparison holds: a campaign name, or ``field=value`` filters joined by commas.

``compare-base`` is ``campaign=compare-base``; ``campaign=x,system=iris,framework=torch,workers=8,software.nccl=2.21``
keeps the runs that match every filter. A field is a column of the ``runs`` table (``honestscale runs --format
json`` lists them), ``workers``, ``hardware`` (the accelerator's normalised model: ``v100``), a dotted path into the
run's recorded ``run_start`` (``software.nccl``, ``hyperparameters.loader_workers``, ``mlperf.round``) or a bare
hyper-parameter name (``loader_workers``). Numbers match numerically (``workers=8`` matches 8, ``lr=0.10`` 0.1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from honestscale.errors import HonestscaleError
from honestscale.view import PARTS, Run, accelerator_model

COLUMNS = tuple(f.name for f in fields(Run) if f.name not in PARTS)
DERIVED = (
    "workers",
    "hardware",
    "layout",
)  # layout: Run.layout_name (``tp2``, ``dp2,pp2 (1f1b, 4 microbatches)``)
# columns that say which run it is, not how it was set up: never a factor, never a confound
IDENTITY = ("run_id", "campaign", "name", "source_file", "slurm_job_id", "slurm_step_id", "started_at", "stopped_at",
            "status", "reason", "ranks_seen", "ranks_stopped", "time_to_train_s", "final_split", "final_metric",
            "final_value", "final_quality", "energy_to_train_j", "seed", "config_hash", "host", "tuning_trial",
            "purpose", "tuning_study", "source")  # fmt: skip


class SelectorError(HonestscaleError):
    pass


def value_of(run: Run, name: str) -> Any:
    """The value of field ``name`` for ``run``: a column, ``workers``, ``hardware``, or a path into its run_start."""
    if name == "hardware":
        return run.hardware
    if name == "layout":
        return run.layout_name
    if name == "layout_key":  # the layout where it is more than data parallel: what pairs and setups compare
        return run.layout_key or "data parallel"
    if name in COLUMNS or name == "workers":
        return run.value(name)
    node: Any = run.attrs
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def resolve(name: str, runs: Iterable[Run]) -> str:
    """The field ``name`` means: a column, a derived field, a dotted path, or a bare hyper-parameter name (then
    ``hyperparameters.<name>``); a :class:`SelectorError` naming the known fields for anything else."""
    name = name.strip()
    if name in ("parallel", "layout"):  # the layout by its name (tp2, dp2,pp2), not the degrees' JSON
        return "layout"
    if name in COLUMNS or name in DERIVED or "." in name:
        return name
    if name == "accelerator_model":
        return "hardware"
    if any(name in r.hyperparameters for r in runs):
        return f"hyperparameters.{name}"
    if any(name in r.attrs for r in runs):
        return name
    raise SelectorError(
        f"no field {name!r} in the store's runs",
        f"use a column ({', '.join(c for c in COLUMNS if c not in IDENTITY or c == 'campaign')}), workers, "
        "hardware, a path such as software.nccl or hyperparameters.loader_workers, or a hyper-parameter name",
    )


def same(value: Any, text: str, name: str) -> bool:
    """Whether a recorded value matches the text of a filter: numbers numerically, accelerators by model."""
    if value is None:
        return text.lower() in ("", "none", "null")
    if name in ("hardware", "accelerator"):
        return accelerator_model(str(value)) == accelerator_model(text)
    if isinstance(value, bool):
        return text.lower() in (("true", "1", "yes") if value else ("false", "0", "no"))
    if isinstance(value, int | float):
        try:
            return math.isclose(float(value), float(text), rel_tol=1e-9)
        except ValueError:
            return False
    return str(value) == text


@dataclass(frozen=True)
class Selector:
    """One side of a comparison as the user wrote it, and its filters (field, value)."""

    text: str
    filters: tuple[tuple[str, str], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.filters)

    def get(self, name: str) -> str | None:
        return next((v for k, v in self.filters if k == name), None)

    def select(self, runs: Sequence[Run]) -> list[Run]:
        return [r for r in runs if all(same(value_of(r, k), v, k) for k, v in self.filters)]


def parse(text: str, runs: Sequence[Run]) -> Selector:
    """A selector from its text; the field names resolved against the store's runs."""
    text = text.strip()
    if not text:
        raise SelectorError(
            "an empty selector", "give a campaign name or filters such as campaign=x,workers=8"
        )
    if "=" not in text:
        return Selector(text, (("campaign", text),))
    filters = []
    for part in _parts(text):
        if "=" not in part:
            raise SelectorError(f"{text!r}: {part!r} is not field=value",
                                "join filters with commas: campaign=x,framework=torch")  # fmt: skip
        key, value = part.split("=", 1)
        filters.append((resolve(key, runs), _unquoted(value.strip(), text)))
    return Selector(text, tuple(filters))


def _parts(text: str) -> list[str]:
    """The filters of a selector: split at the commas outside double quotes (``system="A, B",workers=8``)."""
    parts, current, quoted = [], "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current]


def _unquoted(value: str, text: str) -> str:
    """A value as written, or between double quotes where it holds a comma (``"A, B"``: A, B)."""
    if value.count('"') == 0:
        return value
    if len(value) >= 2 and value[0] == value[-1] == '"' and value.count('"') == 2:
        return value[1:-1]
    raise SelectorError(
        f"{text!r}: {value!r} is quoted wrongly", 'quote a whole value that holds a comma: system="A, B"'
    )


def check_found(selector: Selector, found: Sequence[Run], runs: Sequence[Run], side: str) -> None:
    """Refuse a side that selects no run, naming the close campaign names or the values the field has."""
    if found:
        return
    campaign = selector.get("campaign")
    known = sorted({r.campaign for r in runs if r.campaign})
    if campaign is not None and campaign not in known:
        import difflib

        close = difflib.get_close_matches(campaign, known, n=3)
        hint = (
            f"did you mean {', '.join(close)}?"
            if close
            else f"campaigns in the store: {', '.join(known[:12]) or 'none'}"
        )
        raise SelectorError(f"{side} {selector.text!r}: no campaign {campaign!r} in the store", hint)
    values = {k: sorted({str(value_of(r, k)) for r in runs})[:8] for k, _ in selector.filters}
    seen = "; ".join(f"{k}: {', '.join(v)}" for k, v in values.items())
    raise SelectorError(f"{side} {selector.text!r} selects no run", f"values in the store: {seen}")
