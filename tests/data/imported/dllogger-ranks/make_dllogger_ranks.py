"""Write DLLogger logs the way a DeepLearningExamples script does when every rank logs (a JSON stream per rank, its
PARAMETER row holding ``local_rank`` and ``world_size``), with the real dllogger package (v1.1.0), under torchrun:
a data-parallel MLP on scikit-learn's digits (examples/record/digits_npz.py writes digits.npz), 2 ranks on the CPU
(gloo), 32 samples per rank and step, 3 epochs, a validation per epoch, the `[]` summary at the end. Each rank also
writes its own record of what it did (``logged-rank<N>.json``: steps, samples, the validations' values), the
expected values of the test.

    pip install --target /tmp/dllsite git+https://github.com/NVIDIA/dllogger@v1.1.0   # not on PyPI
    PYTHONPATH=/tmp/dllsite torchrun --nproc-per-node 2 make_dllogger_ranks.py digits.npz OUT
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import dllogger  # type: ignore[import-not-found]
import numpy as np
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
local_rank = int(os.environ["LOCAL_RANK"])
out = Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
data = np.load(sys.argv[1])
x, y = torch.tensor(data["x_train"], dtype=torch.float32), torch.tensor(data["y_train"])
xv, yv = torch.tensor(data["x_validation"], dtype=torch.float32), torch.tensor(data["y_validation"])
batch, epochs, lr = 32, 3, 0.05
log = dllogger.Logger(
    [dllogger.JSONStreamBackend(dllogger.Verbosity.VERBOSE, str(out / f"dllogger-{rank}.json"))]
)
log.log(
    step="PARAMETER",
    data={"arch": "mlp", "dataset": "digits", "batch_size": batch, "epochs": epochs, "lr": lr, "world_size": world,
          "local_rank": local_rank, "optimizer": "sgd", "seed": 0},
)  # fmt: skip
log.metadata("train.loss", {"unit": "nat", "GOAL": "MINIMIZE", "STAGE": "TRAIN"})
log.metadata("train.total_ips", {"unit": "samples/s", "GOAL": "MAXIMIZE", "STAGE": "TRAIN"})
log.metadata("val.top1", {"unit": "%", "GOAL": "MAXIMIZE", "STAGE": "VAL"})
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
)
opt = torch.optim.SGD(model.parameters(), lr=lr)
ips: list[float] = []
steps, samples, validations = 0, 0, []
for epoch in range(epochs):
    g = torch.Generator().manual_seed(epoch)
    order = torch.randperm(len(x), generator=g)[rank::world]  # this rank's shard (DistributedSampler's)
    for it in range(len(order) // batch):
        t0 = time.perf_counter()
        idx = order[it * batch : (it + 1) * batch]
        xb, yb = x[idx], y[idx]
        t1 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        t2 = time.perf_counter()
        steps, samples = steps + 1, samples + len(idx)
        ips.append(len(idx) * world / (t2 - t0))  # the global rate, as DeepLearningExamples print it
        log.log(step=(epoch, it), data={"train.loss": loss.item(), "train.total_ips": ips[-1],
                                        "train.data_time": t1 - t0, "train.compute_time": t2 - t1})  # fmt: skip
    with torch.no_grad():
        scores = model(xv)
        top1 = (scores.argmax(1) == yv).float().mean().item() * 100
        vloss = torch.nn.functional.cross_entropy(scores, yv).item()
    log.log(step=(epoch,), data={"val.top1": top1, "val.loss": vloss})
    validations.append({"epoch": epoch, "val.top1": top1, "val.loss": vloss})
log.log(step=[], data={"train.total_ips": sum(ips) / len(ips), "val.top1": top1})
log.flush()
record = {"rank": rank, "world_size": world, "steps": steps, "samples": samples, "validations": validations}
(out / f"logged-rank{rank}.json").write_text(json.dumps(record, indent=1) + "\n")
dist.destroy_process_group()
