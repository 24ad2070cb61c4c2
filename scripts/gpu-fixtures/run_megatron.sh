#!/usr/bin/env bash
# One-shot device run: Megatron-LM pretrain_gpt.py, tiny GPT on 1 GPU, mock data, no TE/apex.
# Call from the repo root:  bash .mega/run_megatron.sh     (carry: .whl .mega)
# Writes under $OUT (3 files):
#   megatron.log             Megatron's own console output (stdout+stderr of torchrun), the fixture
#   megatron-env.txt         versions, install output, torch.compile preflight, launch command, exit code
#   megatron-nvidia-smi.txt  nvidia-smi -q after the run
# Code: megatron-core 0.19.2 wheel (megatron/core + megatron/training) with pretrain_gpt.py,
# gpt_builders.py, model_provider.py from NVIDIA/Megatron-LM branch core_r0.19.0 @ f8837c04
# (its megatron/training is identical to the wheel's).
set -x

REPO="$(cd "$(dirname "$0")/.." && pwd)"
MEGA="$REPO/.mega"
OUT="${OUT:-/tmp/megatron_out}"
mkdir -p "$OUT"
ENVLOG="$OUT/megatron-env.txt"
SITE="${MEGA_SITE:-/tmp/site}"

{
    echo "== date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "== Megatron-LM scripts commit: $(cat "$MEGA/MEGATRON_LM_COMMIT")"
    nvidia-smi -L
    python3 --version
} > "$ENVLOG" 2>&1

# 1. Install the carried wheel (megatron-core only; never torch).
cd "$REPO"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/megatron_core-0.19.2-*.whl >> "$ENVLOG" 2>&1
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"

# 2. The wheel ships the prebuilt dataset helper (helpers_cpp*.so) but not the Makefile that
#    megatron.training.initialize._compile_dependencies() runs ("make -C .../core/datasets").
#    Put the Makefile + source from the same branch next to it, keep the .so newer than the
#    source so make has nothing to do, and pin LIBEXT so the target name matches the .so.
DS="$SITE/megatron/core/datasets"
cp "$MEGA/datasets_build/Makefile" "$MEGA/datasets_build/helpers.cpp" "$DS/"
touch -d '2000-01-01' "$DS/helpers.cpp"
touch "$DS"/helpers_cpp*.so
export MAKEFLAGS="LIBEXT=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
if ! command -v make >/dev/null 2>&1; then
    # No make on the machine: a stand-in that only checks the prebuilt helper is there.
    mkdir -p /tmp/mega-bin
    printf '#!/bin/sh\nls "$2"/helpers_cpp*.so\n' > /tmp/mega-bin/make
    chmod +x /tmp/mega-bin/make
    export PATH="/tmp/mega-bin:$PATH"
    echo "== make not found: using stand-in /tmp/mega-bin/make" >> "$ENVLOG"
fi
ls -l "$DS" >> "$ENVLOG" 2>&1

# 3. Versions + torch.compile preflight (Megatron's bias-gelu / bias-dropout fusions use
#    torch.compile -> inductor -> triton). If it cannot compile here, run those eagerly.
timeout 45 python3 - >> "$ENVLOG" 2>&1 <<'EOF'
import torch, triton, numpy
import megatron.core, megatron.training
from megatron.core.package_info import __version__
print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "numpy", numpy.__version__)
print("megatron-core", __version__, megatron.core.__file__)
import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
print("nvml energy (mJ)", pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
EOF
if ! timeout 90 python3 -c "
import torch
f = torch.compile(lambda b, y: torch.nn.functional.gelu(y + b, approximate='tanh'))
x = torch.ones(64, 64, device='cuda', dtype=torch.bfloat16, requires_grad=True)
f(torch.zeros(64, device='cuda', dtype=torch.bfloat16), x).sum().backward()
torch.cuda.synchronize(); print('torch.compile preflight ok')
" >> "$ENVLOG" 2>&1; then
    export TORCHDYNAMO_DISABLE=1
    echo "== torch.compile preflight FAILED: running with TORCHDYNAMO_DISABLE=1" >> "$ENVLOG"
fi

# 4. Train. Arguments live in megatron_args.sh (MEGATRON_ARGS array).
cd "$MEGA"
source "$MEGA/megatron_args.sh"
export CUDA_DEVICE_MAX_CONNECTIONS=1
export PYTHONUNBUFFERED=1
if command -v torchrun >/dev/null 2>&1; then
    LAUNCH=(torchrun)
else
    LAUNCH=(python3 -m torch.distributed.run)
fi
LAUNCH+=(--nproc-per-node 1 --nnodes 1 --master-addr 127.0.0.1 --master-port 29511)
echo "== command (cwd .mega): ${LAUNCH[*]} pretrain_gpt.py ${MEGATRON_ARGS[*]}" >> "$ENVLOG"
timeout -k 15 240 "${LAUNCH[@]}" pretrain_gpt.py "${MEGATRON_ARGS[@]}" 2>&1 | tee "$OUT/megatron.log" || true
RC=${PIPESTATUS[0]}
echo "== training exit code: $RC (124 = timeout)" >> "$ENVLOG"

nvidia-smi -q > "$OUT/megatron-nvidia-smi.txt" 2>&1 || true
ls -l "$OUT" >> "$ENVLOG" 2>&1
exit 0
