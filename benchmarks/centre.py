"""A centre's store, as the runners write it: ``campaigns`` campaigns of 48 runs each (2 models x 2 frameworks x 1, 2,
4 workers x 4 repetitions, weak scaling, H100s; each campaign's steps up to 9 % slower than another's), with the
real ``EventWriter``. The store ``benchmarks/serve.py`` and
``benchmarks/scale.py`` time, and the one ``tests/system/test_centre.py`` advises from."""

from __future__ import annotations

from pathlib import Path


def write_store(folder: Path, campaigns: int, steps: int = 30) -> int:
    """Event files of ``campaigns`` x 48 runs, as the runners write them (``steps`` step events per rank); returns
    the number of runs."""
    from honestscale.events import EventWriter

    runs = 0
    t0 = 1.7e9
    for c in range(campaigns):
        for model, model_step_s in (("resnet50", 0.30), ("bert", 0.45)):
            step_s = model_step_s * (1.0 + 0.03 * (c % 4))  # campaigns differ (software, load) by up to 9 %
            for framework in ("torch", "tensorflow"):
                for workers in (1, 2, 4):
                    for rep in range(4):
                        run_id = f"c{c:03d}-{model}-{framework}-{workers}w-r{rep}"
                        t = t0 + runs * 100.0
                        for rank in range(workers):
                            clock = [t]
                            w = EventWriter(folder / f"c{c:03d}", run_id, rank, clock=lambda k=clock: k[0])
                            w.run_start(campaign=f"centre-{c:03d}", framework=framework, framework_version="2.4",
                                        world_size=workers, nodes=1, accelerators_per_node=workers,
                                        accelerator="NVIDIA H100", system="cluster", model=model, dataset="imagenet",
                                        global_batch_size=64 * workers, local_batch_size=64, scaling="weak",
                                        data_source="filesystem", seed=rep, purpose="final",
                                        stop_criterion="epochs", stop_value=1)  # fmt: skip
                            for i in range(steps):
                                clock[0] = t + (i + 1) * step_s
                                s = step_s * (1.0 + 0.02 * ((i * 7 + rep + rank) % 5))
                                w.step(epoch=0, step=i, samples=64, t_total=s, t_data=0.05 * s, t_compute=0.8 * s,
                                       t_comm=0.1 * s, t_optimizer=0.05 * s, warmup=i < 2)  # fmt: skip
                            if rank == 0:
                                w.eval(
                                    split="validation",
                                    metric="top1_accuracy",
                                    value=0.70 + 0.01 * rep,
                                    epoch=0,
                                )
                            clock[0] = t + (steps + 1) * step_s
                            w.run_stop("success")
                            w.close()
                        runs += 1
    return runs
