#!/usr/bin/env bash
# Writes sacct-jobs.txt and sacct-steps.txt beside this script: what sacct printed on a real one-node Slurm with
# slurmdbd and MariaDB (scripts/slurm-local start), fresh (job ids from 1), after four jobs:
#   ok         2 tasks, one srun step (python3 sleeping 3 s)             COMPLETED 0:0
#   fail       the batch script exits 3                                 FAILED 3:0
#   array      an array of 2 tasks (_0, _1), each an srun step           COMPLETED
#   cancelled  scancel'ed while its srun step runs                       CANCELLED
#   train      honestscale's torch runner, 2 ranks, a ResNet-18 on the CPU for about 40 s of training,
#              recorded (recorded/: its run_start holds the job id)     COMPLETED
# Run as root: tests/data/imported/sacct/make_sacct.sh [DIR]   (DIR: the cluster's folder, default /tmp/slurmtest;
# it is removed first and the cluster is stopped at the end).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
dir=$(realpath -m "${1:-/tmp/slurmtest}")
fields=JobID,JobName,User,Start,End,ElapsedRaw,NNodes,NodeList,AllocTRES,ConsumedEnergyRaw,State,ExitCode

if [ -e "$dir" ] && [ ! -f "$dir/slurm.conf" ]; then echo "make_sacct: $dir is not a slurm-local folder" >&2; exit 1; fi
"$repo/scripts/slurm-local" stop "$dir" >/dev/null
rm -rf "$dir"
eval "$("$repo/scripts/slurm-local" start "$dir")"   # export SLURM_CONF=DIR/slurm.conf
trap '"$repo/scripts/slurm-local" stop "$dir" >/dev/null' EXIT
cd "$dir"

ok=$(sbatch --parsable -J ok -N1 -n2 --wrap 'srun python3 -c "import time,socket; time.sleep(3)"')
fail=$(sbatch --parsable -J fail -n1 --wrap 'exit 3')
array=$(sbatch --parsable -J array -n1 --array=0-1 --wrap 'srun sleep 2')
cancelled=$(sbatch --parsable -J cancelled -n1 --wrap 'srun sleep 120')
rm -rf "$here/recorded"
train=$(sbatch --parsable -J train -N1 -n2 --wrap "$repo/.venv/bin/honestscale run --workers 2 --model resnet18 \
  --dataset synthetic --synthetic-shape 3,32,32 --batch-size 16 --epochs 1000 --max-time 40 --cpu --out $here/recorded")
# Cancel it once its srun step runs.
for _ in $(seq 600); do
  if squeue -h -s -j "$cancelled" -o '%i' | grep -qx "$cancelled.0"; then break; fi
  sleep 0.1
done
sleep 2
scancel "$cancelled"
# Wait until the queue is empty, then until slurmdbd has every job and step in a final state.
for _ in $(seq 600); do [ -z "$(squeue -h -o %i)" ] && break; sleep 0.5; done
for _ in $(seq 120); do
  states=$(sacct -n -P -a -S 2026-01-01 --format=JobID,State)
  if [ "$(grep -c '^' <<<"$states")" -ge 5 ] && ! grep -qE '\|(PENDING|RUNNING|COMPLETING|REQUEUED)' <<<"$states" \
     && grep -q "^$cancelled\.0|" <<<"$states" && grep -q "^${array}_1\.0|" <<<"$states"; then
    break
  fi
  sleep 1
done
echo "jobs: ok=$ok fail=$fail array=$array cancelled=$cancelled train=$train" >&2
sacct -P --noconvert -a -S 2026-01-01 --format="$fields" > "$here/sacct-steps.txt"
sacct -P --noconvert -a -X -S 2026-01-01 --format="$fields" > "$here/sacct-jobs.txt"
sinfo -V >&2
