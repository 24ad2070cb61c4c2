"""Where an MLPerf result log sits in a submission tree, the system it ran on, and the run id it gets.

``<round>/<org>/results/<system>/[strong|weak/]<benchmark>/[pruned_results/]<result>.txt`` beside
``<round>/<org>/systems/<system>.json``: the round folder, organisation, system and benchmark make a run
id that no other log can claim; the system description gives the hardware.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from honestscale import catalogue
from honestscale.collector._content import digest


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return None if catalogue.placeholder(value) else value.strip()
    return value


def _int(value: Any) -> int | None:
    value = _clean(value)
    if value is None:
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


@dataclass(frozen=True)
class Place:
    """Where a result log sits in an MLPerf submission tree:
    ``<round>/<org>/results/<system>/[strong|weak/]<benchmark>/<result>.txt``."""

    round_folder: str | None  # the folder above the organisation (v2.0, training_results_v2.1, ...)
    org: str | None
    system: str | None
    within: tuple[str, ...]  # system, [scaling,] benchmark
    stem: str
    tree_root: Path | None  # the folder that holds <round>

    @property
    def round(self) -> str | None:
        return catalogue.round_of(self.round_folder) if self.round_folder else None

    @property
    def suite(self) -> str:
        return "hpc" if len(self.within) == 3 and self.within[1] in ("strong", "weak") else "training"


def place(log: Path) -> Place:
    parts = log.parts
    stem = log.name.split(".")[0]
    folders = parts[:-1]
    if (
        folders and folders[-1] == "pruned_results"
    ):  # MLPerf HPC: an instance pruned from a weak-scaling result
        folders, stem = folders[:-1], f"pruned_results/{stem}"
    results = [i for i, p in enumerate(folders) if p == "results" and len(folders) - i in (3, 4)]
    if not results or results[-1] < 2:
        return Place(None, None, None, (), stem, None)
    i = results[-1]
    return Place(
        folders[i - 2], folders[i - 1], folders[i + 1], tuple(folders[i + 1 :]), stem, Path(*folders[: i - 2])
    )


def find_system(log: Path) -> Path | None:
    """``<org>/systems/<system>.json`` for ``<org>/results/<system>/.../result_N.txt``."""
    system = place(log).system or log.parent.parent.name
    for ancestor in log.parents:
        candidate = ancestor / "systems" / f"{system}.json"
        if candidate.is_file():
            return candidate
    return None


def read_system(path: Path) -> tuple[dict[str, object], str | None]:
    """Hardware and software fields of a system description, and a note if it could not be read (whole or in
    part)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return {}, f"system description {path} unreadable ({exc}): hardware unknown"
    try:
        desc = json.loads(text)
    except json.JSONDecodeError as exc:
        if _V06_ENTRY.search(text):
            return _v06_system(path, text)
        return {}, f"system description {path} is not JSON ({exc}): hardware unknown"
    if not isinstance(desc, dict):
        return {}, f"system description {path} is not a JSON object: hardware unknown"
    if "nodes" in desc and "number_of_nodes" not in desc and "accelerators_per_node" not in desc:
        unread: list[str] = []  # v0.6's JSON entry form (Fujitsu): the hardware is in its nodes
        fields = _entry_fields(desc, None, path, unread)
        missing = [k for k in ("nodes", "accelerators_per_node") if fields[k] is None]
        if unread or missing:
            return fields, f"system description {path}: could not read {', '.join(unread + missing)}"
        return fields, None
    nodes = _int(desc.get("number_of_nodes", desc.get("number of nodes")))
    per_node = _int(desc.get("accelerators_per_node"))
    software: dict[str, str] = {}
    stacks = desc.get("other_software_stack")
    if isinstance(stacks, dict):
        stacks = [stacks]
    if isinstance(stacks, list):
        for stack in stacks:
            if isinstance(stack, dict):
                for key, value in stack.items():
                    if _clean(value) is not None:
                        software[key.removesuffix("_version")] = str(value)
    if "cuda_driver" in software:
        software["driver"] = software.pop("cuda_driver")
    if _clean(desc.get("operating_system")) is not None:
        software["os"] = str(desc["operating_system"])
    fields = {
        "system": _clean(desc.get("system_name")) or path.stem,
        "framework": _clean(desc.get("framework")),
        "nodes": nodes,
        "accelerators_per_node": per_node,
        "accelerator": _clean(desc.get("accelerator_model_name")),
        "cpu": _clean(desc.get("host_processor_model_name")),
        "interconnect": _clean(desc.get("host_networking")),
        "software": software or None,
        "cores_per_node": _cores(desc),
    }
    return fields, None


def _cores(desc: dict[str, object]) -> int | None:
    """The CPU cores of one node (processors per node x cores per processor), where the description says both."""
    sockets, cores = _int(desc.get("host_processors_per_node")), _int(desc.get("host_processor_core_count"))
    return sockets * cores if sockets and cores else None


_V06_ENTRY = re.compile(r"^(?:[a-z_]+): \{", re.MULTILINE)


def _literal(text: Any) -> dict[str, object] | None:
    """A Python dict literal written as a string (NVIDIA's v0.6 ``entry`` and its ``nodes``), else None."""
    if not isinstance(text, str):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _entry_fields(
    entry: dict[str, object], platform: Any, path: Path, unread: list[str]
) -> dict[str, object]:
    """Hardware of a v0.6 submission ``entry`` (NVIDIA's as Python literals in strings, Fujitsu's as JSON):
    ``hardware``, ``framework``, ``interconnect``, ``os``, ``libraries`` and ``nodes`` (one node type)."""
    nodes: Any = entry.get("nodes")
    if isinstance(nodes, str):
        nodes = _literal(nodes)
    if isinstance(nodes, list) and len(nodes) == 1:
        nodes = nodes[0]
    if not isinstance(nodes, dict):
        unread.append("entry.nodes" if nodes is None else "entry.nodes (not one node type)")
        nodes = {}
    libraries: Any = entry.get("libraries")
    libraries = _literal(libraries) if isinstance(libraries, str) else libraries
    software = (
        {str(k).removesuffix("_version"): str(v) for k, v in libraries.items() if _clean(v) is not None}
        if isinstance(libraries, dict)
        else {}
    )
    if "cuda_driver" in software:
        software["driver"] = software.pop("cuda_driver")
    if _clean(entry.get("os")) is not None:
        software["os"] = str(entry["os"])
    return {
        "system": _clean(platform) or _clean(entry.get("hardware")) or path.stem,
        "framework": _clean(entry.get("framework")),
        "nodes": _int(nodes.get("num_nodes")),
        "accelerators_per_node": _int(nodes.get("num_accelerators")),
        "accelerator": _clean(nodes.get("accelerator")),
        "cpu": _clean(nodes.get("cpu")),
        "interconnect": _clean(entry.get("interconnect")),
        "software": software or None,
    }


def _v06_system(path: Path, text: str) -> tuple[dict[str, object], str | None]:
    """NVIDIA's v0.6 system files: the log's ``submission_*`` lines without their prefix (``platform: {json}``),
    the hardware inside ``entry``'s value, a Python dict literal whose ``nodes`` is another one."""
    lines: dict[str, object] = {}
    unread: list[str] = []
    for line in text.splitlines():
        key, sep, body = line.partition(": ")
        if not sep or not body.strip():
            continue
        try:
            value = json.loads(body)
        except json.JSONDecodeError:
            unread.append(key.strip())
            continue
        if isinstance(value, dict):
            lines[key.strip()] = value.get("value")
    entry = _literal(lines.get("entry"))
    if entry is None:
        unread.append("entry")
        entry = {}
    fields = _entry_fields(entry, lines.get("platform"), path, unread)
    missing = [k for k in ("nodes", "accelerators_per_node", "accelerator") if fields[k] is None]
    note = None
    if unread or missing:
        note = (
            f"system description {path} is not JSON (the v0.6 'key: {{json}}' form): read what it holds"
            + (f"; could not read {', '.join(unread)}" if unread else "")
            + (f"; no {', '.join(missing)} in it" if missing else "")
        )
    return fields, note


def run_id_for(log: Path, index: int, count: int) -> tuple[str, str]:
    """A run id that no other result log can claim, and a short name.

    In a submission tree: ``mlperf:<round folder>/<org>/<system>/<benchmark>/<result>`` (the same
    org, system and benchmark submitted in two rounds are two runs); elsewhere the folder, the file and
    a hash of the file's absolute path. A log holding several runs numbers them ``#1``, ``#2`` ...
    """
    where = place(log)
    if where.round_folder is not None:
        name = f"{'/'.join(where.within)}/{where.stem}"
        rid = f"mlperf:{where.round_folder}/{where.org}/{name}"
        name = f"v{where.round}/{name}" if where.round else f"{where.round_folder}/{name}"
    else:
        name = where.stem
        rid = f"mlperf:{log.parent.name}/{where.stem}@{digest(str(log.resolve()).encode())[:10]}"
    if count > 1:
        rid, name = f"{rid}#{index + 1}", f"{name}#{index + 1}"
    return rid, name


def shown(path: Path | None, where: Place) -> str | None:
    """The system description's path inside the submission tree: the same for every copy of the tree, so a
    copy of a log maps to the same events (a true duplicate) wherever the tree lies."""
    if path is None:
        return None
    if where.tree_root is not None and path.is_relative_to(where.tree_root):
        return str(path.relative_to(where.tree_root))
    return path.name


def scaling_factor(log: Path) -> tuple[float | None, str | None]:
    """The review's ``scaling.json`` factor beside a submission's result logs, and a note if it is unreadable."""
    path = log.parent / "scaling.json"
    if not path.is_file():
        return None, None
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("scaling_factor")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
        return None, f"{path} unreadable ({exc}): the official score's scaling factor is unknown"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value), None
    return None, f"{path} has no numeric scaling_factor: the official score's scaling factor is unknown"
