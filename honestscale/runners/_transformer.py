"""The transformer path of the PyTorch runner (``--model gpt``): a small GPT trained to a validation loss on the
CPython standard library's sources (bytes), under any layout of :mod:`honestscale.runners._layouts`, through the
loop every runner shares (:mod:`honestscale.runners._loop`).

Every rank writes its steps: samples (sequences) and tokens of its replica's batch, counted by each rank of a
tensor or pipeline group alike (the store divides by the layout, never multiplies rank 0's by the world). run_start
records the layout, the parameter counts of the whole model, its shape and the FLOPs per token under each named
convention, so that MFU is recomputed from counts, never taken from the runner.

Standard library only at import time.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from honestscale.record import Recorder
from honestscale.record import world as _world
from honestscale.runners import _gpt, _layouts, _text
from honestscale.runners._ddp_comm import DDPCommTiming
from honestscale.runners._loop import Budget, Done, Loop, check_target
from honestscale.runners._run_start import (
    NO_ACCELERATORS,
    Accelerators,
    Data,
    Framework,
    Model,
    Sizes,
    Stop,
    Threads,
)
from honestscale.runners.instrument import (
    POSITIVE,
    POSITIVE_INT,
    CudaClock,
    HostClock,
    StepTimer,
    base_software,
    environment,
    run_start_fields,
)

DTYPE_OF = {"amp-bf16": "bf16", "amp-fp16": "fp16"}


GPT_ONLY = ("parallel", "pipeline_schedule", "microbatches", "model_size", "seq_len", "corpus_bytes", "eval_sequences",
            "target_loss", "activation_checkpointing", "compile", "declared_peak_tflops", "declared_peak_source")  # fmt: skip


# --model gpt's own defaults where the command line gives none (the shared ones suit the digits models' SGD): on 2 CPU
# cores gpt-tiny over the default 2 MB of source reaches a validation loss of 1.70 nats/byte in its first epoch of
# about 50 s (1.40 in its second) at this learning rate, so a layout trains to its target in a minute or two
GPT_DEFAULTS: dict[str, float | int] = {"lr": 0.003, "epochs": 3, "target_loss": 2.0}
SLOW_S = 600.0  # an estimate above this says so before training starts


def given(option: str, argv: list[str]) -> bool:
    """Whether ``--option`` (``--target-loss`` for ``target_loss``) is on the command line."""
    flag = "--" + option.replace("_", "-")
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def gpt_defaults(args: argparse.Namespace, argv: list[str]) -> None:
    """``--model gpt``'s own defaults (``GPT_DEFAULTS``) for the options its command line ``argv`` does not give;
    the target only where no budget is given either (``--epochs``, ``--max-samples``, ``--max-time``: a run told
    what to spend trains that, and is judged by it)."""
    budget = any(given(b, argv) for b in ("target_loss", "epochs", "max_samples", "max_time"))
    for name, value in GPT_DEFAULTS.items():
        if not given(name, argv) and not (name == "target_loss" and budget):
            setattr(args, name, value)


def settle(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str | None:
    """Keep the transformer's options to ``--model gpt``: for any other model, one given is refused (named), and
    the rest leave the run's hyper-parameters (and config hash) as they were before the transformer existed. For
    ``--model gpt``, see ``gpt_defaults``."""
    if args.model == "gpt":
        return None
    for name in GPT_ONLY:
        if getattr(args, name) != parser.get_default(name):
            return f"--{name.replace('_', '-')} is an option of --model gpt (the transformer), not of --model {args.model}"
        delattr(args, name)
    if args.dataset is None:
        args.dataset = "digits"
    return None


def add_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("transformer (--model gpt)")
    g.add_argument("--parallel", default="ddp",
                   help="layout: ddp, fsdp, tp, pp, or degrees whose product is the world size: dp2,tp2, dp2,pp2, "
                        "fsdp2,tp2 (default: ddp)")  # fmt: skip
    g.add_argument("--pipeline-schedule", choices=list(_layouts.SCHEDULES), default="1f1b")
    g.add_argument(
        "--microbatches", type=POSITIVE_INT, help="microbatches per step under pp (default: 2 x pp)"
    )
    g.add_argument("--model-size", choices=list(_gpt.PRESETS), default="gpt-tiny")
    g.add_argument("--seq-len", type=POSITIVE_INT, default=64, help="tokens (bytes) per sequence")
    g.add_argument("--corpus-bytes", type=POSITIVE_INT, default=2_000_000,
                   help="bytes of the train split to read, in whole files: the split ends with the file that "
                        "reaches it, so nearby values can read the same files")  # fmt: skip
    g.add_argument("--eval-sequences", type=POSITIVE_INT, default=256,
                   help="sequences evaluated per split (at least the sequences per replica)")  # fmt: skip
    g.add_argument(
        "--target-loss",
        type=POSITIVE,
        help="stop when validation loss (nats/byte) reaches this (default 2.0; --model gpt's own defaults "
        "where not given: --lr 0.003, --epochs 3: gpt-tiny reaches it in a minute or two on 2 CPU "
        "cores)",
    )
    g.add_argument("--activation-checkpointing", choices=["none", "full"], default="none")
    g.add_argument("--compile", action="store_true", help="torch.compile each transformer block")
    g.add_argument("--declared-peak-tflops", type=POSITIVE,
                   help="dense peak of this device in the compute dtype, for MFU where the catalogue has none "
                        "(a CPU): give --declared-peak-source too")  # fmt: skip
    g.add_argument(
        "--declared-peak-source", help="where the declared peak comes from (datasheet, measurement)"
    )


def train(args: argparse.Namespace, world: _world.World, rec: Recorder, cuda: bool) -> None:
    import torch
    import torch.distributed as dist

    device = torch.device(f"cuda:{world.local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    layout = _layouts.parse(args.parallel, world.world_size, args.pipeline_schedule, args.microbatches)
    if args.batch_size % layout.replicas:
        raise _layouts.LayoutError(f"--batch-size {args.batch_size} (global, in sequences) is not divisible by the "
                                   f"{layout.replicas} data-parallel replicas of --parallel {args.parallel}")  # fmt: skip
    local_batch = args.batch_size // layout.replicas
    if layout.degrees["pp"] > 1 and local_batch % layout.microbatches:
        raise _layouts.LayoutError(f"{local_batch} sequences per replica do not split into {layout.microbatches} "
                                   "microbatches: change --batch-size or --microbatches")  # fmt: skip
    if args.eval_sequences < local_batch:
        raise _layouts.LayoutError(f"--eval-sequences {args.eval_sequences} is fewer than the {local_batch} sequences a "
                                   "replica evaluates at once: raise it, or lower --batch-size")  # fmt: skip
    if args.precision == "amp-fp16":
        raise _layouts.LayoutError("--precision amp-fp16 needs loss scaling, which the transformer does not do: use "
                                   "amp-bf16")  # fmt: skip
    if args.declared_peak_tflops is not None and not args.declared_peak_source:
        raise _layouts.LayoutError(
            "--declared-peak-tflops needs --declared-peak-source (a datasheet or measurement)"
        )
    torch.manual_seed(args.seed)
    corpus = _text.stdlib(args.corpus_bytes, args.data_path)
    shape = _gpt.shape(args.model_size, args.seq_len, 256)
    heads_ok = shape.heads % layout.degrees["tp"] == 0 and shape.ffn_hidden % layout.degrees["tp"] == 0
    if not heads_ok:
        raise _layouts.LayoutError(f"{shape.heads} heads do not split over tp = {layout.degrees['tp']}")
    model = _gpt.build(shape)
    counts = _gpt.params(shape)
    built = sum(p.numel() for p in model.parameters())
    if built != counts.total:  # the FLOPs below come from the counts: they must be the model's
        raise RuntimeError(f"the GPT has {built} parameters, its shape says {counts.total}")
    if world.world_size > 1:
        dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://{world.master_addr}:{world.master_port}",
                                rank=world.rank, world_size=world.world_size, timeout=timedelta(minutes=10))  # fmt: skip
    mesh = _layouts.mesh_for(layout, device.type)
    clock = CudaClock() if cuda else HostClock()
    par = _layouts.apply(model, layout, mesh, device, cuda=cuda, checkpointing=args.activation_checkpointing,
                         compile_blocks=args.compile, ddp_comm=DDPCommTiming(clock), loss_fn=_gpt.loss)  # fmt: skip
    import torch._dynamo  # torch.optim's first use imports it (1.4 s): a one-off, not training time

    compute_dtype = DTYPE_OF.get(args.precision) or (
        "tf32" if cuda and torch.backends.cuda.matmul.allow_tf32 else "fp32"
    )
    software = base_software() | {"torch": torch.__version__}
    args.optimizer = (
        "adamw"  # what the GPT trains with (torch.optim.AdamW below): its hyper-parameters say so too
    )
    if cuda:
        software |= {"cuda": str(torch.version.cuda), "nccl": ".".join(map(str, torch.cuda.nccl.version()))}  # type: ignore[no-untyped-call]
    sizes = {f"{k}_size": corpus.windows(k, args.seq_len) for k in ("train", "validation", "test")}
    budget = Budget.of(args, args.target_loss, "loss")
    stop = budget.criterion()
    start = run_start_fields(
        args, world, runner="honestscale.runners.torch_ddp",
        default_name=f"gpt-{layout_name(layout)}-{world.world_size}w",
        environment=environment(world, Path(__file__), data_path=corpus.path, device=world.local_rank if cuda else None),
        framework=Framework("torch", torch.__version__, "nccl" if cuda else "gloo", software),
        model=Model(f"gpt ({args.model_size})", counts.total, (args.seq_len,), optimizer=args.optimizer,
                    lr_schedule=args.lr_schedule, precision=args.precision),
        data=Data(corpus.name, Sizes(**sizes), "in_memory", corpus.path, local_batch_size=local_batch),
        stop=Stop(*stop), threads=Threads(torch.get_num_threads(), torch.get_num_interop_threads()),
        accelerators=Accelerators(world.local_world_size, torch.cuda.get_device_name(device)) if cuda else NO_ACCELERATORS,
    )  # fmt: skip
    start |= layout.fields() | {
        "target_metric": "loss",
        "sequence_length": args.seq_len,
        "global_batch_tokens": args.batch_size * args.seq_len,
        "activation_checkpointing": args.activation_checkpointing,
        "compute_dtype": compute_dtype,
        "params_total": counts.total,
        "params_embedding": counts.embedding,
        "params_active": counts.total,
        "model_shape": shape.record(),
        "flops_per_token": _gpt.flops_per_token(shape),
        "comm_dimensions": par.comm_dimensions,
        "corpus_sha256": corpus.sha256,
        "corpus_files": corpus.files,
    }
    if args.declared_peak_tflops is not None:
        start["declared_peak"] = {"tflops": args.declared_peak_tflops, "dtype": compute_dtype,
                                  "source": args.declared_peak_source}  # fmt: skip
    rec.run_start(**start)
    _run(args, world, rec, par, corpus, layout, local_batch, device, clock, budget)


def _expected_cost(args: argparse.Namespace, world: _world.World, steps_per_epoch: int, device: Any) -> str:
    """What the run will cost, said before it starts: the FLOPs of an epoch (``flops_per_token``, palm) at the
    rate this rank's device multiplies matrices (measured here for 0.2 s: on a CPU the fastest product, so that a
    host busy for a moment does not inflate it), spread over the ranks: a lower bound
    (a small model's steps are dominated by overheads: gpt-tiny's by about 2x), and a warning where the epochs cap
    takes longer than ``SLOW_S``."""
    import torch

    a = torch.randn(512, 512, device=device)
    done, t0, fastest = 0, time.perf_counter(), float("inf")
    while time.perf_counter() - t0 < 0.2:
        t = time.perf_counter()
        a @ a
        fastest = min(fastest, time.perf_counter() - t)
        done += 1
    if device.type == "cuda":  # launches are asynchronous: the whole burst's rate
        torch.cuda.synchronize(device)
        rate = done * 2 * 512**3 / (time.perf_counter() - t0)
    else:  # the fastest product: the device's rate, not a busy moment's (the time is a lower bound)
        rate = 2 * 512**3 / fastest
    tokens = steps_per_epoch * args.batch_size * args.seq_len
    epoch_s = _gpt.flops_per_token(_gpt.shape(args.model_size, args.seq_len, 256))["palm"] * tokens / rate
    epoch_s /= world.world_size
    cap = args.epochs * epoch_s
    said = (
        f"{args.model_size}: {steps_per_epoch} steps an epoch of {args.batch_size} x {args.seq_len} tokens; at "
        f"least {epoch_s:,.0f} s an epoch here ({rate / 1e9:,.0f} GFLOP/s measured on rank 0's device, "
        f"{world.world_size} rank(s)), {cap / 60:,.1f} min for the {args.epochs}-epoch cap"
    )
    if cap > SLOW_S:
        said += (
            f"; that is over {SLOW_S / 60:.0f} min: a smaller --model-size, --corpus-bytes or --epochs trains "
            "in minutes, and --target-loss may not be reached before the cap"
        )
    return said


class _Pace:
    """Rank 0's projection from its first steps, said once: the lower bound said before training (FLOPs alone) is
    far below what a small model's steps take, so what they take is measured and said too."""

    AFTER = 20  # steps (warm-up included: a projection that errs long)

    def __init__(self, steps_per_epoch: int, epochs: int) -> None:
        self.per_epoch, self.epochs, self.seen, self.t0 = steps_per_epoch, epochs, 0, time.perf_counter()

    def tick(self) -> None:
        self.seen += 1
        if self.seen == 1:
            self.t0 = time.perf_counter()
        elif self.seen == self.AFTER + 1:
            each = (time.perf_counter() - self.t0) / self.AFTER
            print(
                f"the first {self.AFTER} steps took {each * 1e3:,.0f} ms each: about {each * self.per_epoch:,.0f} s "
                f"an epoch, {each * self.per_epoch * self.epochs / 60:,.1f} min for the {self.epochs}-epoch cap "
                "(evaluations apart)",
                file=sys.stderr,
                flush=True,
            )


def layout_name(layout: _layouts.Layout) -> str:
    used = [f"{d}{layout.degrees[d]}" for d in ("dp", "fsdp", "tp", "pp") if layout.degrees[d] > 1]
    return "-".join(used) or "single"


def _run(args: argparse.Namespace, world: _world.World, rec: Recorder, par: _layouts.Parallel, corpus: Any,
         layout: _layouts.Layout, local_batch: int, device: Any, clock: Any, budget: Budget) -> None:  # fmt: skip
    import torch
    import torch.distributed as dist

    x_train, y_train = _text.sequences(corpus.train, args.seq_len)
    evals = {s: _text.sequences(getattr(corpus, s), args.seq_len, args.eval_sequences)
             for s in ("train", "validation", "test")}  # fmt: skip
    steps_per_epoch = len(x_train) // args.batch_size
    if steps_per_epoch == 0:
        raise _layouts.LayoutError(f"{len(x_train)} train sequences give no full batch of {args.batch_size}: "
                                   "raise --corpus-bytes or lower --batch-size")  # fmt: skip
    if world.rank == 0:
        print(_expected_cost(args, world, steps_per_epoch, device), file=sys.stderr, flush=True)
    opt = torch.optim.AdamW(list(par.parameters()), lr=args.lr, weight_decay=args.weight_decay)
    sched = (torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * steps_per_epoch)
             if args.lr_schedule == "cosine" else None)  # fmt: skip
    amp = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(args.precision)
    timer = StepTimer(clock)
    pp = layout.degrees["pp"] > 1
    net = par.modules[0]

    def batches(epoch: int) -> Any:
        """The epoch's batches of this replica; the order is drawn here, before the first step is timed."""
        g = torch.Generator().manual_seed(args.seed * 100_003 + epoch)  # every rank: the same order
        order = torch.randperm(len(x_train), generator=g)

        def take(i: int) -> tuple[Any, Any]:
            idx = order[i * args.batch_size : (i + 1) * args.batch_size]
            mine = idx[par.replica * local_batch : (par.replica + 1) * local_batch]
            return x_train[mine].to(device, non_blocking=True), y_train[mine].to(device, non_blocking=True)

        return (take(i) for i in range(steps_per_epoch))

    def forward_backward(x: Any, y: Any) -> Any:
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            if not pp:
                loss = _gpt.loss(net(x), y)
                loss.backward()
                return loss.detach()
            with _layouts.pipeline_waits(par):
                losses = _layouts.pipeline_pass(par, x, y, train=True)
            return torch.stack(losses).mean().detach() if losses else None

    pace = _Pace(steps_per_epoch, args.epochs) if world.rank == 0 else None

    def step(batch: Any) -> Done:
        x, y = batch
        if pace is not None:
            pace.tick()
        opt.zero_grad(set_to_none=True)
        par.pp_wait_s = 0.0
        if par.ddp_comm is not None:
            par.ddp_comm.begin_step()
        loss = forward_backward(x, y)
        comm_from = par.ddp_comm.last_ready if par.ddp_comm is not None else None
        if par.dp_group is not None:
            comm_from = clock.now()
            _layouts.all_reduce_gradients(par)
        timer.mark("compute")
        opt.step()
        if sched is not None:
            sched.step()
        timer.mark("optimizer")
        return Done(loss=loss, samples=len(x), tokens=int(x.numel()), comm_from=comm_from,
                    comm_s=par.pp_wait_s if par.measure_pp else None)  # fmt: skip

    def split_loss(split: str) -> float:
        """The mean loss over the split's first sequences, computed by every rank (the model is cut), known on
        every rank (sent from the rank that holds the last stage)."""
        x_all, y_all = evals[split]
        total = torch.zeros(2, dtype=torch.float64, device=device)
        for m in par.modules:
            m.eval()
        with torch.no_grad(), torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            for i in range(0, len(x_all) - local_batch + 1, local_batch):
                x, y = x_all[i : i + local_batch].to(device), y_all[i : i + local_batch].to(device)
                if not pp:
                    total += torch.tensor([float(_gpt.loss(net(x), y)) * len(x), len(x)], dtype=torch.float64,
                                          device=device)  # fmt: skip
                    continue
                losses = _layouts.pipeline_pass(par, x, y, train=False)
                if losses:
                    total += torch.tensor([float(torch.stack(losses).mean()) * len(x), len(x)],
                                          dtype=torch.float64, device=device)  # fmt: skip
        for m in par.modules:
            m.train()
        if world.world_size > 1 and pp:
            dist.broadcast(total, par.loss_rank)
        return float(total[0] / total[1]) if total[1] else float("nan")

    def evaluate(epoch: int, last: bool) -> float | None:
        got = {s: split_loss(s) for s in ("train", "validation")}
        if world.is_main:
            for split, value in got.items():
                rec.writer.eval(split=split, metric="loss", value=value,
                                samples=len(evals[split][0]) // local_batch * local_batch, epoch=epoch)  # fmt: skip
        return got["validation"]

    def test(epoch: int) -> None:
        value = split_loss("test")
        if world.is_main:
            rec.writer.eval(split="test", metric="loss", value=value,
                            samples=len(evals["test"][0]) // local_batch * local_batch, epoch=epoch)  # fmt: skip

    def decide(flag: bool) -> bool:
        if world.world_size == 1:
            return flag
        t = torch.tensor([1 if flag else 0], device=device)
        dist.broadcast(t, 0)
        return bool(t.item())

    def mean_loss(losses: list[Any]) -> float | None:
        got = [t for t in losses if t is not None]
        return float(torch.stack(got).float().mean()) if got else None

    loop = Loop(rec.writer, timer, budget, decide=decide, replicas=layout.replicas, is_main=world.is_main,
                mean_loss=mean_loss)  # fmt: skip
    for m in par.modules:
        m.train()
    outcome = loop.run(
        batches, step, evaluate, lambda v: v <= float(args.target_loss), test, everyone_evaluates=True
    )
    if world.world_size > 1:
        dist.barrier()
    check_target(outcome, budget)
    print(f"rank {world.rank}: {outcome.steps} steps, {outcome.epochs} epochs", file=sys.stderr)
