"""Readers of the logs people already have, each mapping one tool's output onto honestscale's events.

Each reader is chosen by a file's content, never by its name (a torchtitan metrics file is ``.jsonl`` like an
event file), and names itself per file ("read as torchtitan metrics"); its format is kept as the run's
``source``. What a format cannot tell is left out of the events (unknown, never a made-up value) and said in
``run_start.imported`` (``unknown``: the fields; ``ranks_in_log``: whose numbers the log holds), so the rules say
*cannot verify*. Numbers a tool printed about itself (MFU, TFLOP/s, tokens/s) are kept as ``claims``, which
HS107 checks against the counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from honestscale.collector._parsed import Parsed
from honestscale.collector.importers import (
    codecarbon,
    dllogger,
    hf,
    keras_csv,
    kineto,
    lightning,
    megatron,
    mlflow,
    sacct,
    tensorboard,
    torchtitan,
    wandb,
)


@dataclass(frozen=True)
class Reader:
    format: str  # kept as ingested_files.format and the runs' source, e.g. "torchtitan-metrics"
    label: str  # how ingest names it: "read as <label>"
    sniff: Callable[[Path, bytes], bool]  # the file's first MiB (decompressed) is this format
    parse: Callable[[Path, str, str | None], Parsed]  # path, whole text, campaign -> events
    # raised whenever a change makes the reader read a file differently: files a lower version landed are read
    # again (the store records "<format>@<version>" per file)
    version: int = 1
    # a database its tool writes in place (an MLflow store): a change anywhere is read again whole, not refused
    # as a log rewritten under the store
    in_place: bool = False
    # read from its path by its tool's library (an event file, a database, a run's folder): the ingest hands it no
    # text (a binary file decoded as text would cost several times its size, for nothing)
    binary: bool = False


READERS: tuple[Reader, ...] = (
    Reader(
        torchtitan.EXPERIMENT,
        torchtitan.EXPERIMENT_LABEL,
        torchtitan.sniff_experiment,
        torchtitan.parse_experiment,
    ),
    Reader(torchtitan.SYSTEM, torchtitan.SYSTEM_LABEL, torchtitan.sniff_system, torchtitan.parse_system),
    Reader(torchtitan.FORMAT, torchtitan.LABEL, torchtitan.sniff, torchtitan.parse, version=2),
    Reader(megatron.FORMAT, megatron.LABEL, megatron.sniff, megatron.parse),
    Reader(hf.FORMAT, hf.LABEL, hf.sniff, hf.parse, version=4),
    Reader(lightning.FORMAT, lightning.LABEL, lightning.sniff, lightning.parse, version=2),
    Reader(keras_csv.FORMAT, keras_csv.LABEL, keras_csv.sniff, keras_csv.parse),
    Reader(
        tensorboard.FORMAT, tensorboard.LABEL, tensorboard.sniff, tensorboard.parse, binary=True, version=4
    ),
    Reader(mlflow.FORMAT, mlflow.LABEL, mlflow.sniff, mlflow.parse, in_place=True, binary=True, version=4),
    Reader(
        mlflow.FILES,
        mlflow.FILES_LABEL,
        mlflow.sniff_files,
        mlflow.parse_files,
        in_place=True,
        binary=True,
        version=4,
    ),
    Reader(wandb.FORMAT, wandb.LABEL, wandb.sniff, wandb.parse, binary=True, version=6),
    Reader(dllogger.FORMAT, dllogger.LABEL, dllogger.sniff, dllogger.parse, version=3),
    Reader(kineto.FORMAT, kineto.LABEL, kineto.sniff, kineto.parse, version=2),
    Reader(codecarbon.FORMAT, codecarbon.LABEL, codecarbon.sniff, codecarbon.parse, version=2),
    Reader(sacct.FORMAT, sacct.LABEL, sacct.sniff, sacct.parse),
)
FORMATS = {r.format: r for r in READERS}
KNOWN = (
    "torchtitan's console, experiment metrics and structured logs; Megatron-LM's training log; Hugging Face's "
    "trainer_state.json; Lightning's metrics.csv; TensorBoard event files; MLflow's SQLite and file stores; W&B offline runs; NVIDIA DLLogger's DLLL lines; PyTorch profiler traces (evidence); CodeCarbon's "
    "emissions.csv and Slurm accounting (sacct -P) (energy records)"
)


def sniff_all(path: Path, head: bytes) -> list[Reader]:
    """Every reader whose format the text looks like, in the order of READERS."""
    return [r for r in READERS if r.sniff(path, head)]


def in_place(format: str) -> bool:
    """A format whose files their tool rewrites in place (a database): read again whole when changed."""
    reader = FORMATS.get(format)
    return bool(reader and reader.in_place)


def binary(formats: tuple[str, ...]) -> bool:
    """Formats whose readers all read the file from its path: no text is made of it for them."""
    return all(r is not None and r.binary for r in map(FORMATS.get, formats))


def label(format: str) -> str:
    """How a format is named to the user: a reader's label, else the format itself."""
    reader = FORMATS.get(format)
    return (
        reader.label
        if reader
        else {"mlperf": "MLPerf log", "native": "honestscale events"}.get(format, format)
    )
