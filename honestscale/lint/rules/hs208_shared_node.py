from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, Run, View

SHARED_FILESYSTEMS = (
    "nfs",
    "nfs4",
    "lustre",
    "gpfs",
    "beegfs",
    "cifs",
    "smb3",
    "fuse.sshfs",
    "ceph",
    "panfs",
)


def _problems(run: Run) -> list[str] | None:
    """What made the run's node not quiet; None when the run recorded nothing about it."""
    iso = run.isolation
    if not iso:
        return None
    found = []
    if iso.get("exclusive") is False:
        found.append("the Slurm allocation shared its nodes (not --exclusive)")
    others = iso.get("other_accelerator_processes")
    if isinstance(others, int) and others > 0:
        found.append(f"{others} other process(es) on the accelerator")
    if (busy := run.busy_host) is not None:
        found.append(busy)
    if (waited := run.contended) is not None:
        found.append(f"{run.id}: {waited}")
    return found


def shared_or_busy(reasons: list[str]) -> Said:
    return (
        f"measured on a shared or busy node: {'; '.join(reasons)}",
        "rerun these on an exclusive, quiet node (#SBATCH --exclusive, accelerator free)",
    )


ISOLATION_NOT_RECORDED: Said = (
    "the runs do not record whether the node was theirs alone",
    "record isolation in run_start (honestscale's runners do)",
)


class SharedNode(Rule):
    """Measurements must come from a node that nobody else was using.

    What it checks: the runners record, at run start, whether the Slurm allocation was exclusive, how many other
    processes used the accelerator (NVML), the host's 1-minute load against its CPUs, and the filesystem the
    data came from; each step records the host's CPU wait during it (Linux's pressure stall information,
    contract 5). A run fails when its allocation shared the node, another process used its accelerator, the host
    was busy as it started (load above 1.5 x its CPUs, or its own ranks if more), or its steps waited for a CPU
    half their time or more while its own ranks and threads asked no more than the host's CPUs (ranks x threads
    at most the CPUs: a load that came from elsewhere, after the start); it cannot be verified when the run
    recorded none of this. Data on a shared filesystem (NFS, Lustre, GPFS, ...) is listed in the evidence.
    Why it misleads: other users' jobs, I/O and GPU work slow some runs and not others; the difference is then
    read as a property of the framework or of the scale (the seeds ask for "close to ideal situations, not
    influenced by other users' I/O activity or GPU utilization"; Hoefler & Belli, SC15, rule 9 on the setup).
    Example: the one-worker base case ran while a compiler used both cores of the node, so the two-worker run
    looks superlinear.
    Fix: allocate nodes exclusively (`#SBATCH --exclusive`), check the accelerator is free, rerun the affected
    runs when the node is quiet, and stage data on node-local storage when the shared filesystem is busy.
    Reference: Hoefler & Belli, SC15, rule 9 (document and control the environment).
    """

    code = "HS208"
    name = "shared-node"
    severity = "warning"
    summary = "runs measured on an exclusive, quiet node with a free accelerator"

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        problems = {r.id: _problems(r) for r in target.runs}
        unknown = [r for r in target.runs if problems[r.id] is None]
        bad = [r for r in target.runs if problems[r.id]]
        shared_fs = sorted(
            {
                str(fs)
                for r in target.runs
                if problems[r.id] is not None
                and (fs := (r.isolation or {}).get("data_filesystem")) in SHARED_FILESYSTEMS
            }
        )
        if bad:
            reasons = sorted({p for r in bad for p in problems[r.id] or []})
            yield self.fail(
                target,
                bad,
                *shared_or_busy(reasons),
                reasons=reasons,
                shared_filesystems=shared_fs,
            )
        if unknown:
            yield self.cannot_verify(target, unknown, *ISOLATION_NOT_RECORDED)
