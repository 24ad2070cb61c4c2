"""Parallel layouts of a transformer over a DeviceMesh: data (DDP), fully sharded (FSDP2 ``fully_shard``),
tensor (DTensor ``parallelize_module``), pipeline (``torch.distributed.pipelining``) and their 2-D hybrids.

``--parallel`` names the degrees: ``ddp``, ``fsdp``, ``tp``, ``pp`` (every rank in that dimension), or a
comma list such as ``dp2,tp2``, ``dp2,pp2``, ``fsdp2,tp2`` whose product is the world size. The mesh's dimensions
run from the outermost (pipeline) to the innermost (tensor: the ranks that talk most sit closest).

What each step's communication is, as far as the runner can tell without a profiler: the gradient all-reduce of
replicated data parallelism (DDP's hook, or the all-reduce this module runs over the dp group beside tensor or
pipeline parallelism) and, on the CPU, a pipeline stage's wait for its neighbours (send/recv and the bubble, timed
around the schedule's waits). FSDP's all-gathers and reduce-scatters and tensor parallelism's all-reduces run
inside forward and backward: they stay in compute, and ``comm_dimensions`` says which dimensions t_comm holds.

Standard library only at import time.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from honestscale.event_records import PARALLEL_DIMS
from honestscale.event_records import (
    Layout as Layout,  # the contract's one layout type, which the runners build
)

MESH_ORDER = ("pp", "dp", "fsdp", "tp")  # outermost first
SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")
OFFERED = {
    frozenset(("dp", "tp")),
    frozenset(("dp", "pp")),
    frozenset(("fsdp", "tp")),
}  # 2-D hybrids, each tested
_WORDS = {"ddp": "dp", "dp": "dp", "fsdp": "fsdp", "tp": "tp", "pp": "pp"}


class LayoutError(ValueError):
    pass


def used(layout: Layout) -> list[str]:
    """The dimensions above 1, outermost first (the device mesh's order)."""
    return [d for d in MESH_ORDER if layout.degrees[d] > 1]


def parse(text: str, world_size: int, schedule: str = "1f1b", microbatches: int | None = None) -> Layout:
    """The layout ``--parallel TEXT`` names on ``world_size`` ranks, or a :class:`LayoutError` saying what to
    write instead."""
    degrees = _degrees(text, world_size)
    _check_offered(text, degrees)
    if schedule not in SCHEDULES:
        raise LayoutError(f"--pipeline-schedule {schedule}: one of {', '.join(SCHEDULES)}")
    pp = degrees["pp"]
    virtual = 2 if schedule == "interleaved-1f1b" and pp > 1 else 1
    mb = microbatches or (2 * pp if pp > 1 else 1)
    if pp > 1 and schedule == "interleaved-1f1b" and mb % pp:
        raise LayoutError(f"--microbatches {mb}: the interleaved schedule needs a multiple of pp = {pp}")
    return Layout(
        degrees=degrees,
        schedule=schedule if pp > 1 else None,
        microbatches=mb if pp > 1 else 1,
        virtual=virtual,
    )


def _degrees(text: str, world_size: int) -> dict[str, int]:
    """Each dimension's degree: those written, and the one dimension written without one takes the ranks left."""
    degrees = dict.fromkeys(PARALLEL_DIMS, 1)
    parts = [p.strip() for p in text.lower().split(",") if p.strip()]
    if not parts:
        raise LayoutError("--parallel is empty: ddp, fsdp, tp, pp, or degrees such as dp2,tp2")
    open_dim = None
    for part in parts:
        dim, degree = _dimension(text, part)
        if degree is not None:
            degrees[dim] = degree
        elif open_dim is None:
            open_dim = dim
        else:
            raise LayoutError(f"--parallel {text}: give degrees to all but one dimension (e.g. dp2,tp2)")
    if open_dim is not None:
        fixed = 1
        for d in ("dp", "fsdp", "tp", "pp"):
            fixed *= degrees[d] if d != open_dim else 1
        if world_size % fixed:
            raise LayoutError(f"--parallel {text}: {world_size} ranks do not divide by {fixed}")
        degrees[open_dim] = world_size // fixed
    product = degrees["dp"] * degrees["fsdp"] * degrees["tp"] * degrees["pp"]
    if product != world_size:
        raise LayoutError(
            f"--parallel {text}: the degrees multiply to {product}, the run has {world_size} ranks; "
            f"make dp x fsdp x tp x pp = {world_size}"
        )
    return degrees


def _dimension(text: str, part: str) -> tuple[str, int | None]:
    """One part of ``--parallel``: its dimension, and its degree where written (``tp2``)."""
    m = re.fullmatch(r"([a-z]+)(\d*)", part)
    word = m.group(1) if m else part
    if word in ("cp", "ep"):
        raise LayoutError(
            f"--parallel {text}: {word} (context/expert parallel) is recorded from other tools' logs; this runner "
            "trains dp, fsdp, tp and pp"
        )
    if m is None or word not in _WORDS:
        raise LayoutError(
            f"--parallel {text}: {part!r} is not a dimension; use ddp, fsdp, tp, pp or degrees such as dp2,tp2"
        )
    dim = _WORDS[word]
    if not m.group(2):
        return dim, None
    if int(m.group(2)) < 1:
        raise LayoutError(f"--parallel {text}: {dim} needs a degree of at least 1")
    return dim, int(m.group(2))


def _check_offered(text: str, degrees: dict[str, int]) -> None:
    if degrees["dp"] > 1 and degrees["fsdp"] > 1:
        raise LayoutError(
            f"--parallel {text}: replicated and sharded data parallel together (HSDP) is not offered; use fsdp "
            "alone, or dp with tp or pp"
        )
    used = frozenset(d for d in ("dp", "fsdp", "tp", "pp") if degrees[d] > 1)
    if len(used) > 1 and used not in OFFERED:
        raise LayoutError(
            f"--parallel {text}: {' x '.join(sorted(used))} is not offered (not tested here); the 2-D layouts are "
            "dp,tp, dp,pp and fsdp,tp"
        )


@dataclass
class Parallel:
    """The model cut and wrapped for one rank, and what the training step needs to drive it."""

    layout: Layout
    modules: list[Any]  # this rank's parts (a pipeline rank's stages), the optimizer's parameters
    replica: int  # which data-parallel replica this rank belongs to
    first_stage: bool = True
    last_stage: bool = True
    loss_rank: int = 0  # the global rank that holds the loss of replica 0 (a pipeline's last stage)
    dp_group: Any = None  # replicated data parallelism the runner all-reduces itself (beside tp or pp)
    schedule: Any = None
    ddp_comm: Any = None  # DDP's hook timing (plain data parallel)
    comm_dimensions: list[str] = field(default_factory=list)
    pp_wait_s: float = 0.0  # this step's pipeline waits (CPU)
    measure_pp: bool = False

    def parameters(self) -> Iterator[Any]:
        for m in self.modules:
            yield from m.parameters()


def mesh_for(layout: Layout, device_type: str) -> Any:
    from torch.distributed.device_mesh import init_device_mesh

    names = used(layout)
    if not names:
        return None
    return init_device_mesh(device_type, tuple(layout.degrees[d] for d in names), mesh_dim_names=tuple(names))


def _coordinate(mesh: Any, dim: str) -> int:
    return int(mesh.get_local_rank(dim)) if mesh is not None and dim in (mesh.mesh_dim_names or ()) else 0


def apply(model: Any, layout: Layout, mesh: Any, device: Any, *, cuda: bool, checkpointing: str,
          compile_blocks: bool, ddp_comm: Any, loss_fn: Callable[[Any, Any], Any]) -> Parallel:  # fmt: skip
    """Cut and wrap ``model`` (the whole model, the same on every rank: one seed) for this rank."""
    d = layout.degrees
    replica = _coordinate(mesh, "dp") * d["fsdp"] + _coordinate(mesh, "fsdp")
    par = Parallel(layout=layout, modules=[], replica=replica)
    parts = _pipeline(model, layout, mesh, device, par, loss_fn) if d["pp"] > 1 else [model.to(device)]
    for part in parts:
        blocks = part.blocks
        for name, block in list(blocks.items()):
            if d["tp"] > 1:
                _tensor_parallel(block, mesh["tp"])
            if checkpointing == "full":
                from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

                block = checkpoint_wrapper(block)
            if compile_blocks:
                block.compile()
            blocks[name] = block
        if d["fsdp"] > 1:
            from torch.distributed.fsdp import fully_shard

            for block in blocks.values():
                fully_shard(block, mesh=mesh["fsdp"])
            fully_shard(part, mesh=mesh["fsdp"])
    if d["dp"] > 1 and (d["tp"] > 1 or d["pp"] > 1):
        par.dp_group = mesh.get_group("dp")
        par.comm_dimensions.append("dp")
    elif d["dp"] > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        parts = [DDP(parts[0], device_ids=[device.index] if cuda else None)]
        ddp_comm.register(parts[0], "none")
        par.ddp_comm = ddp_comm
        par.comm_dimensions.append("dp")
    if d["pp"] > 1 and not cuda:  # on a GPU the host-side wait is not the devices' (kernels run on)
        par.measure_pp = True
        par.comm_dimensions.append("pp")
    par.modules = parts
    if d["pp"] > 1:
        par.schedule = _schedule(par, layout, loss_fn)
    return par


def _tensor_parallel(block: Any, tp_mesh: Any) -> None:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {"attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(), "attn.wv": ColwiseParallel(),
            "attn.wo": RowwiseParallel(), "mlp.fc1": ColwiseParallel(), "mlp.fc2": RowwiseParallel()}  # fmt: skip
    parallelize_module(block, tp_mesh, plan)


def _pipeline(model: Any, layout: Layout, mesh: Any, device: Any, par: Parallel, loss_fn: Any) -> list[Any]:
    """This rank's stages: stage k of S = pp x virtual holds blocks [k L / S, (k+1) L / S), the first the
    embeddings, the last the norm and the output layer. Rank r of the pipeline holds stages r, r + pp, ..."""
    from torch.distributed.pipelining import PipelineStage

    pp, v = layout.degrees["pp"], layout.virtual
    n_stages = pp * v
    names = list(model.blocks.keys())
    if len(names) < n_stages:
        raise LayoutError(f"{len(names)} layers cannot fill {n_stages} pipeline stages: use a deeper model "
                          "(--model-size) or fewer stages")  # fmt: skip
    r = _coordinate(mesh, "pp")
    stage_ids = [r + i * pp for i in range(v)]
    parts, stages = [], []
    for k in stage_ids:
        part = copy.deepcopy(model)
        lo, hi = k * len(names) // n_stages, (k + 1) * len(names) // n_stages
        for j, name in enumerate(names):
            if not lo <= j < hi:
                del part.blocks[name]
        if k != 0:
            part.tok = part.pos = None
        if k != n_stages - 1:
            part.norm = part.head = None
        part.to(device)
        parts.append(part)
        stages.append(PipelineStage(part, k, n_stages, device, group=mesh.get_group("pp")))
    par.first_stage = 0 in stage_ids
    par.last_stage = n_stages - 1 in stage_ids
    # replica 0's last stage: pipeline coordinate pp-1 (it holds stage S-1), every other coordinate 0
    names_ = list(mesh.mesh_dim_names)
    index = tuple(pp - 1 if n == "pp" else 0 for n in names_)
    par.loss_rank = int(mesh.mesh[index].item())
    par.schedule = stages  # replaced by the schedule once the parts are final
    return parts


def _schedule(par: Parallel, layout: Layout, loss_fn: Any) -> Any:
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

    stages = par.schedule
    if layout.schedule == "interleaved-1f1b":
        return ScheduleInterleaved1F1B(stages, layout.microbatches, loss_fn=loss_fn)
    cls = ScheduleGPipe if layout.schedule == "gpipe" else Schedule1F1B
    return cls(stages[0], layout.microbatches, loss_fn=loss_fn)


def pipeline_pass(par: Parallel, x: Any, y: Any, *, train: bool) -> list[Any]:
    """One batch through the pipeline (forward and backward, or forward only): the first stage feeds the inputs,
    the last the targets; the losses of its microbatches, on the rank that holds the last stage (else none)."""
    run = par.schedule.step if train else par.schedule.eval
    losses: list[Any] = []
    if par.first_stage:
        run(x)
    elif par.last_stage:
        run(target=y, losses=losses)
    else:
        run()
    return losses


@contextmanager
def pipeline_waits(par: Parallel) -> Iterator[None]:
    """Time the pipeline schedule's waits for its send/recv (the stage idle: transfers and the bubble) into
    ``par.pp_wait_s``, by wrapping the schedules' one wait function while the step runs."""
    if not par.measure_pp:
        yield
        return
    from torch.distributed.pipelining import schedules

    original = schedules._wait_batch_p2p

    def timed(work: Any) -> Any:
        t = time.perf_counter()
        try:
            return original(work)
        finally:
            par.pp_wait_s += time.perf_counter() - t

    schedules._wait_batch_p2p = timed
    try:
        yield
    finally:
        schedules._wait_batch_p2p = original


def all_reduce_gradients(par: Parallel) -> None:
    """The gradient all-reduce over the data-parallel group, averaged (beside tensor or pipeline parallelism,
    where DDP does not wrap the model)."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    n = par.layout.degrees["dp"]
    for p in par.parameters():
        if p.grad is None:
            continue
        g = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
        dist.all_reduce(g, group=par.dp_group)
        g.div_(n)
