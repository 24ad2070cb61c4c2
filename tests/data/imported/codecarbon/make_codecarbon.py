"""CodeCarbon's emissions.csv around a recorded training: make_codecarbon.py OUT_DIR (run with a Python that has
codecarbon; the training runs as a child process with honestscale's environment, as a job script would).

Three trackers write rows to OUT_DIR/emissions.csv: one around a 2-rank plain-PyTorch training recorded by
honestscale that lasts a second (OUT_DIR/recorded/: its tracker's window is mostly start-up), one around
honestscale's torch runner training a ResNet-18 (45 s of training, then its evaluations: 3 minutes; OUT_DIR/runner/), one around a short NumPy
matrix-multiplication loop (no run of its own).
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from codecarbon import OfflineEmissionsTracker  # type: ignore[import-not-found]

out = Path(sys.argv[1])
repo = Path(__file__).resolve().parents[4]
venv = repo / ".venv" / "bin"
out.mkdir(parents=True, exist_ok=True)
subprocess.run([venv / "python", repo / "examples/record/digits_npz.py", out / "digits.npz"], check=True)

tracker = OfflineEmissionsTracker(
    project_name="plain-torch-ddp",
    country_iso_code="DEU",
    output_dir=str(out),
    measure_power_secs=1,
    log_level="warning",
)
tracker.start()
env = dict(os.environ, HONESTSCALE_OUT=str(out / "recorded"))
subprocess.run(
    [
        venv / "torchrun",
        "--standalone",
        "--nproc-per-node",
        "2",
        repo / "examples/record/plain_torch.py",
        out / "digits.npz",
    ],
    check=True,
    env=env,
)
tracker.stop()

tracker = OfflineEmissionsTracker(
    project_name="resnet18-runner",
    country_iso_code="DEU",
    output_dir=str(out),
    measure_power_secs=1,
    log_level="warning",
)
tracker.start()
subprocess.run(
    [
        venv / "honestscale",
        "run",
        "--workers",
        "2",
        "--model",
        "resnet18",
        "--dataset",
        "synthetic",
        "--synthetic-shape",
        "3,32,32",
        "--batch-size",
        "16",
        "--epochs",
        "1000",
        "--max-time",
        "45",
        "--cpu",
        "--out",
        out / "runner",
    ],
    check=True,
)
tracker.stop()

tracker = OfflineEmissionsTracker(
    project_name="numpy-matmul",
    country_iso_code="DEU",
    output_dir=str(out),
    measure_power_secs=1,
    log_level="warning",
)
tracker.start()
a = np.random.default_rng(0).random((1500, 1500))
for _ in range(30):
    a = a @ a
    a /= np.abs(a).max()
tracker.stop()
(out / "digits.npz").unlink()
