"""Write a DLLogger log the way NVIDIA's DeepLearningExamples do (PARAMETER rows, per-iteration train rows,
per-epoch validation rows, a final ``[]`` summary over every iteration), with the real dllogger package.

    pip install --target /tmp/dllsite git+https://github.com/NVIDIA/dllogger@v1.1.0   # not on PyPI
    PYTHONPATH=/tmp/dllsite python make_dllogger_log.py digits.npz dllogger.json

A small MLP on scikit-learn's digits (examples/record/digits_npz.py writes digits.npz), on the CPU, one process.
"""

from __future__ import annotations

import sys
import time

import dllogger  # type: ignore[import-not-found]
import numpy as np
import torch

data = np.load(sys.argv[1])
x, y = torch.tensor(data["x_train"], dtype=torch.float32), torch.tensor(data["y_train"])
xv, yv = torch.tensor(data["x_validation"], dtype=torch.float32), torch.tensor(data["y_validation"])
batch, epochs, lr = 32, 3, 0.05
log = dllogger.Logger([dllogger.JSONStreamBackend(dllogger.Verbosity.VERBOSE, sys.argv[2])])
log.log(
    step="PARAMETER",
    data={
        "arch": "mlp",
        "dataset": "digits",
        "batch_size": batch,
        "epochs": epochs,
        "lr": lr,
        "world_size": 1,
        "optimizer": "sgd",
    },
)
log.metadata("train.loss", {"unit": "nat", "GOAL": "MINIMIZE", "STAGE": "TRAIN"})
log.metadata("train.total_ips", {"unit": "samples/s", "GOAL": "MAXIMIZE", "STAGE": "TRAIN"})
log.metadata("val.top1", {"unit": "%", "GOAL": "MAXIMIZE", "STAGE": "VAL"})
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=lr)
ips: list[float] = []
for epoch in range(epochs):
    order = torch.randperm(len(x))
    for it in range(len(x) // batch):
        t0 = time.perf_counter()
        idx = order[it * batch : (it + 1) * batch]
        xb, yb = x[idx], y[idx]
        t1 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        t2 = time.perf_counter()
        ips.append(batch / (t2 - t0))
        log.log(
            step=(epoch, it),
            data={
                "train.loss": loss.item(),
                "train.total_ips": ips[-1],
                "train.data_time": t1 - t0,
                "train.compute_time": t2 - t1,
            },
        )
    with torch.no_grad():
        out = model(xv)
        top1 = (out.argmax(1) == yv).float().mean().item() * 100
        vloss = torch.nn.functional.cross_entropy(out, yv).item()
    log.log(step=(epoch,), data={"val.top1": top1, "val.loss": vloss})
log.log(step=[], data={"train.total_ips": sum(ips) / len(ips), "val.top1": top1})
log.flush()
