"""What the instrumentation costs on the transformer: the GPT's steps through the shared training loop (step timer,
one ``step`` event a step, the epoch event, the system sampler thread) against the same steps bare, alternating
blocks of each in one run, one rank on the CPU.

Both kinds run the same step (the runner's: a batch of the CPython corpus, forward, backward, AdamW); the
instrumented blocks go through :class:`honestscale.runners._loop.Loop` exactly as the runner drives it (evaluations
left out: they are not step time). Blocks alternate so that drift of a shared machine hits both kinds alike; the
figure is the ratio of the median step times. Goal: at most 1.01.

    python benchmarks/transformer_overhead.py [--model-size gpt-mini] [--blocks 10] [--steps 40]
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

from benchmarks._alternate import alternate, overhead_figures, paired  # noqa: E402
from benchmarks._results import Session  # noqa: E402
from honestscale.events import EventWriter  # noqa: E402
from honestscale.runners import _gpt, _text  # noqa: E402
from honestscale.runners._loop import Budget, Done, Loop  # noqa: E402
from honestscale.runners.instrument import StepTimer, SystemSampler  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-size", default="gpt-mini", choices=list(_gpt.PRESETS))
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=10, help="blocks of each kind (they alternate)")
    ap.add_argument("--steps", type=int, default=40, help="steps per block")
    ap.add_argument("--record", action="store_true", help="append the figures to benchmarks/results.jsonl")
    args = ap.parse_args()
    session = Session("transformer_overhead")
    torch.manual_seed(0)
    corpus = _text.stdlib(500_000)
    x_all, y_all = _text.sequences(corpus.train, args.seq_len)
    model = _gpt.build(_gpt.shape(args.model_size, args.seq_len, 256))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    order = torch.randperm(len(x_all))
    at = 0

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        nonlocal at
        idx = order[(at * args.batch_size) % (len(order) - args.batch_size) :][: args.batch_size]
        at += 1
        return x_all[idx], y_all[idx]

    def bare_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = _gpt.loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()  # type: ignore[no-any-return]

    with tempfile.TemporaryDirectory() as tmp:
        writer = EventWriter(tmp, "overhead", 0)
        sampler = SystemSampler(writer, interval=0.1).start()
        timer = StepTimer()

        def step(b: tuple[torch.Tensor, torch.Tensor]) -> Done:
            x, y = b
            opt.zero_grad(set_to_none=True)
            loss = _gpt.loss(model(x), y)
            loss.backward()
            timer.mark("compute")
            opt.step()
            timer.mark("optimizer")
            return Done(loss=loss.detach(), samples=len(x), tokens=int(x.numel()))

        loop = Loop(writer, timer, Budget(epochs=1, warmup_steps=0), decide=lambda f: f, replicas=1, is_main=True,
                    mean_loss=lambda ls: float(torch.stack(ls).mean()) if ls else None)  # fmt: skip

        def block(instrumented: bool) -> float:
            t0 = time.perf_counter()
            if instrumented:
                loop.run(lambda epoch: (batch() for _ in range(args.steps)), step, lambda e, last: None,
                         lambda v: False, lambda e: None)  # fmt: skip
            else:
                for _ in range(args.steps):
                    x, y = batch()
                    bare_step(x, y)
            return (time.perf_counter() - t0) / int(args.steps)

        plain, instrumented = alternate(block, args.blocks)
        sampler.stop()
        writer.close()
        events = sum(1 for _ in (Path(tmp) / "overhead" / "events-rank0.jsonl").open())
    p, q = statistics.median(plain), statistics.median(instrumented)
    print(f"{args.model_size}, batch {args.batch_size} x {args.seq_len} tokens, {args.blocks} x {args.steps} steps "
          "of each kind, alternating")  # fmt: skip
    spread = [
        b / a for a, b in zip(plain, instrumented, strict=True)
    ]  # each instrumented block over the bare before it
    print(
        f"bare step         : {p * 1e3:.3f} ms (median of blocks; blocks {min(plain) * 1e3:.1f}-{max(plain) * 1e3:.1f})"
    )
    print(f"instrumented step : {q * 1e3:.3f} ms ({events} events written, sampler every 0.1 s; blocks "
          f"{min(instrumented) * 1e3:.1f}-{max(instrumented) * 1e3:.1f})")  # fmt: skip
    print(f"ratio instrumented/bare: {q / p:.4f}  (goal <= 1.01; block pairs {min(spread):.3f}-{max(spread):.3f}: "
          "a ratio below 1 is the machine's noise, not a speedup)")  # fmt: skip
    got = paired(plain, instrumented)
    print(got.line())
    session.finish(overhead_figures("transformer_overhead", args.model_size, got, 1.01, q * 1e3), args.record)


if __name__ == "__main__":
    main()
