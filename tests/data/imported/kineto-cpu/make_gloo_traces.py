"""2-rank DDP on CPU (gloo) under torch.profiler: each rank writes its Kineto trace (3 profiled steps).

OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 make_gloo_traces.py OUT_FOLDER
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
out = sys.argv[1]
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                            schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
                            on_trace_ready=lambda p: p.export_chrome_trace(f"{out}/rank{rank}_trace.json")) as prof:  # fmt: skip
    for _ in range(6):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        prof.step()
dist.barrier()
os._exit(0)
