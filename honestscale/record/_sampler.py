"""The system sampler: accelerator utilisation, memory, power and energy (NVML), host CPU and RSS.

Standard library only at import time (see :mod:`honestscale.record`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

from honestscale.event_records import SystemFields
from honestscale.events import EventWriter


def _read_rss() -> int | None:
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class _Nvml:
    """NVML through nvidia-ml-py, when a GPU and the library are there."""

    def __init__(self, index: int) -> None:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)

    def sample(self) -> SystemFields:
        n, h = self.nvml, self.handle
        out: SystemFields = {}
        with contextlib.suppress(n.NVMLError):
            out["accel_util"] = float(n.nvmlDeviceGetUtilizationRates(h).gpu)
        with contextlib.suppress(n.NVMLError):
            out["accel_mem_bytes"] = int(n.nvmlDeviceGetMemoryInfo(h).used)
        with contextlib.suppress(n.NVMLError):
            out["power_w"] = n.nvmlDeviceGetPowerUsage(h) / 1000.0
        with contextlib.suppress(n.NVMLError):
            out["energy_j"] = n.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0
        return out


class SystemSampler:
    """A daemon thread writing ``system`` events every ``interval`` seconds.

    Host: CPU use of this process (percent of one core) and its resident memory, and the
    load average; with ``device`` set and NVML available, also the GPU's utilisation,
    memory, power and total-energy counter. Its own cost is measured: when a sample takes
    more than 1 % of the interval, the interval doubles, so the sampler never steals more
    than that from training.
    """

    def __init__(self, writer: EventWriter, interval: float = 1.0, device: int | None = None) -> None:
        self.writer = writer
        self.interval = max(0.05, interval)
        self.device = device
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="honestscale-sampler", daemon=True)
        self._nvml: _Nvml | None = None
        if device is not None:
            try:
                self._nvml = _Nvml(device)
            except Exception:  # no library, no driver: host counters only
                self._nvml = None

    def start(self) -> SystemSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        last_cpu, last_wall = time.process_time(), time.perf_counter()
        while not self._stop.wait(self.interval):
            began = time.perf_counter()
            cpu = time.process_time()
            fields: SystemFields = {
                "cpu_percent": 100.0 * (cpu - last_cpu) / max(began - last_wall, 1e-9),
                "rss_bytes": _read_rss(),
                "host_load": os.getloadavg()[0],
            }
            last_cpu, last_wall = cpu, began
            if self._nvml is not None:
                fields["device"] = self.device
                fields = {**fields, **self._nvml.sample()}
            try:
                self.writer.system(**fields)
            except (OSError, ValueError):
                return  # the writer is closed or the disk is gone: stop sampling, never break training
            if time.perf_counter() - began > 0.01 * self.interval:
                self.interval *= 2
