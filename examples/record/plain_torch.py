"""A plain PyTorch DDP loop measured with honestscale.record: torchrun --nproc-per-node 2 plain_torch.py DATA.npz"""

import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import honestscale.record

dist.init_process_group("gloo")
path = Path(sys.argv[1])  # digits as NumPy arrays: examples/record/digits_npz.py writes them
arrays = np.load(path)
split = {k: TensorDataset(torch.tensor(arrays[f"x_{k}"]), torch.tensor(arrays[f"y_{k}"])) for k in ("train", "validation", "test")}  # fmt: skip
sampler = DistributedSampler(split["train"], seed=0)
loader = DataLoader(split["train"], batch_size=32, sampler=sampler)  # 32 per rank
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)))  # fmt: skip
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def accuracy(name: str) -> float:
    x, y = split[name].tensors
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


rec = honestscale.record.start(campaign="plain-torch", model="mlp", dataset="digits", global_batch=32 * dist.get_world_size(),
                               data_source="filesystem", data_path=str(path), train_size=len(split["train"]))  # fmt: skip
for epoch in range(3):
    sampler.set_epoch(epoch)
    batches, losses = iter(loader), []
    for _ in range(len(loader)):
        with rec.step() as s:
            with s.phase("data"):
                x, y = next(batches)
                s.samples = len(x)  # this rank's samples
            with s.phase("compute"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()  # DDP's all-reduce hides in here: comm is not timed, so recorded as unknown
                losses.append(loss.detach())
            with s.phase("optimizer"):
                opt.step()
                opt.zero_grad()
    rec.epoch(train_loss=torch.stack(losses).mean().item())  # the epoch's mean loss on this rank
    if dist.get_rank() == 0:
        rec.eval("validation", "accuracy", accuracy("validation"), samples=len(split["validation"]))
if dist.get_rank() == 0:
    rec.eval("test", "accuracy", accuracy("test"), samples=len(split["test"]))  # once, at the end
rec.stop()
dist.barrier()  # every rank has recorded its run
# gloo's worker threads can abort the interpreter's teardown (SIGABRT, "terminate called without an active
# exception"; pytorch/pytorch#179291) even after destroy_process_group: leave them to the OS, as honestscale's runners do
os._exit(0)
