"""What the runner's instrumentation costs: the same training loop with and without it, alternating, in one run.

The loop is the runner's (data from a DataLoader, forward, backward, optimizer step) on the
CPU, one rank. The instrumented blocks add what every runner step does: the step timer's
marks and the host's contention readings, one ``step`` event written per step (JSON line, one
``write``), beside the system sampler thread writing ``system`` events (every 0.1 s here, ten times more
often than the default) in both kinds. Blocks run in pairs, one of each kind, which goes first drawn at random, so that drift of
the machine hits both alike; short blocks (10 steps) and many pairs (400) make the interval narrow
on a shared machine, whose noise moves a block by several per cent. The figure is the median of the
pairs' ratios with its 95 % bootstrap interval over the pairs, whose upper bound is what the goal is
about (at most 1.02), and the instrumentation's cost a step in µs beside it (for longer steps that
cost is what shows the 1 %: below the machine's noise as a ratio). The machine's load is printed and,
with ``--record``, kept with the figures in benchmarks/results.jsonl.

    python benchmarks/runner_overhead.py [--model cnn] [--blocks 400] [--steps 10] [--record]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from benchmarks._alternate import alternate, overhead_figures, paired  # noqa: E402
from benchmarks._results import Figure, Session  # noqa: E402
from honestscale.events import EventWriter  # noqa: E402
from honestscale.runners import _torch_data as data  # noqa: E402
from honestscale.runners.instrument import StepTimer, SystemSampler  # noqa: E402

ALONE = 20_000  # steps of the instrumentation alone, a round


def instrumentation_alone(timer: StepTimer, writer: EventWriter) -> tuple[float, float]:
    """What a step's instrumentation costs with nothing between its calls: best and worst of 5 rounds, µs a step
    (the block pairs' difference carries the machine's noise; this is the cost itself)."""
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(ALONE):
            timer.begin()
            timer.mark("data")
            timer.mark("compute")
            timer.mark("optimizer")
            for done in timer.end(None, epoch=0, step=i, samples=64):
                writer.step(**done)
        for done in timer.flush():  # the steps no reading covered yet: their part of the cost, in the round
            writer.step(**done)
        rounds.append((time.perf_counter() - t0) / ALONE * 1e6)
    return min(rounds), max(rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="cnn", choices=data.MODELS)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=400, help="blocks of each kind (they alternate, in pairs)")
    ap.add_argument("--steps", type=int, default=10, help="steps per block")
    ap.add_argument("--record", action="store_true", help="append the figures to benchmarks/results.jsonl")
    args = ap.parse_args()
    session = Session("runner_overhead")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    splits = data.digits()
    model = data.build_model(args.model, splits.input_shape, splits.num_classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = DataLoader(splits.train, batch_size=args.batch_size, shuffle=True, drop_last=True)
    batches = iter(())

    def next_batch() -> tuple[torch.Tensor, torch.Tensor]:
        nonlocal batches
        try:
            return next(batches)  # type: ignore[call-overload,no-any-return]
        except StopIteration:
            batches = iter(loader)
            return next(batches)  # type: ignore[call-overload,no-any-return]

    with tempfile.TemporaryDirectory() as tmp:
        writer = EventWriter(tmp, "overhead", 0)
        sampler = SystemSampler(writer, interval=0.1).start()
        timer = StepTimer()
        step = 0

        def block(instrumented: bool) -> float:
            nonlocal step
            t0 = time.perf_counter()
            for _ in range(args.steps):
                if instrumented:
                    timer.begin()
                xb, yb = next_batch()
                if instrumented:
                    timer.mark("data")
                opt.zero_grad(set_to_none=True)
                loss_fn(model(xb), yb).backward()
                if instrumented:
                    timer.mark("compute")
                opt.step()
                if instrumented:
                    timer.mark("optimizer")
                    for done in timer.end(None, epoch=0, step=step, samples=len(yb)):
                        writer.step(**done)
                step += 1
            return (time.perf_counter() - t0) / int(args.steps)

        plain, instrumented = alternate(block, args.blocks)
        alone = instrumentation_alone(timer, writer)
        sampler.stop()
        writer.close()
        events = sum(1 for _ in (Path(tmp) / "overhead" / "events-rank0.jsonl").open())
    p, q = statistics.median(plain), statistics.median(instrumented)
    print(
        f"model {args.model}, batch {args.batch_size}, {args.blocks} x {args.steps} steps of each kind, alternating"
    )
    print(f"plain step        : {p * 1e3:.3f} ms (median of blocks)")
    print(f"instrumented step : {q * 1e3:.3f} ms ({events} events written, sampler every 0.1 s)")
    got = paired(plain, instrumented)
    print(got.line() + "  (goal: upper bound <= 1.02)")
    print(f"the instrumentation alone (timer, marks, one step event; no training between): {alone[0]:.1f} us a "
          f"step (best of 5 rounds of {ALONE:,}; worst {alone[1]:.1f} us), {alone[0] / (p * 1e6):.2%} of the plain "
          "step")  # fmt: skip
    what = f"{args.model} on digits"
    figures = overhead_figures("runner_overhead", what, got, 1.02, q * 1e3)
    figures.append(
        Figure(
            "runner_overhead",
            "the instrumentation alone: cost a step",
            alone[0],
            "us",
            (alone[1] - alone[0]) / 2,
            "lower",
            "",
            f"best of 5 rounds of {ALONE:,} steps; {alone[0] / (p * 1e6):.2%} of the plain "
            f"{p * 1e3:.2f} ms step",
        )
    )
    session.finish(figures, args.record)


if __name__ == "__main__":
    main()
