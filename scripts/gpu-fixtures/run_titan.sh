#!/usr/bin/env bash
# One-shot torchtitan fixture run for honestscale's importer (1 GPU, torch 2.11, no internet).
# Call from the repo root:  bash .titan/run_titan.sh      (carry: .whl .titan)
# Three short llama3 "debugmodel" trainings on the c4_test stand-in, launched the torchtitan way
# (torchrun --nproc_per_node=1 ... -m torchtitan.train, as run_train.sh does), bf16 via AMP:
#   r022 : torchtitan 0.2.2 (PyPI wheel, the release of torch 2.11's time): console + Kineto traces + TensorBoard
#   obs  : pytorch/torchtitan 5678e7d39 (ghstack PRs #2601-#2607, "[Observability 1-7/7]", closed unmerged):
#          experiment_logs/trainer_rank_0_experiment.jsonl  (metrics JSONL: key/reduce/sum|value/weight/step/rank/source)
#          system_logs/trainer_rank_0_system.jsonl          (system log, layout 1: {"int","normal","double","normvector"})
#   sl   : pytorch/torchtitan a2a0d99e3 (main, 2026-05-14; same structured_logger as the 0.3.0 wheel):
#          structured_logs/training.global_rank_0.<YYYYmmdd-HHMMSS>-<RAND6>.jsonl (layout 2: flat JSON)
# Outputs (flat, in $OUT): titan.tar.gz, titan-traces.tar.gz, titan-console-{r022,obs,sl}.log, titan-manifest.txt
set -x
: "${OUT:?OUT must be set}"
REPO=$PWD
T=$REPO/.titan
W=/tmp/titan_work
SITE=${TITAN_SITE:-/tmp/site}
STEPS=${STEPS:-80}
PROFILE_FREQ=${PROFILE_FREQ:-40}
RUN_TIMEOUT=${RUN_TIMEOUT:-100}
EXTRA_ARGS_R022=${EXTRA_ARGS_R022:-}   # CPU-test hooks only; empty on the device
EXTRA_ARGS_NEW=${EXTRA_ARGS_NEW:-}
rm -rf "$W"; mkdir -p "$W/env" "$OUT"
MAN=$W/MANIFEST.txt
T0=$(date +%s)
log() { echo "$*" | tee -a "$MAN"; }

# ---- wheels (same as the lead's preamble; harmless if already done) ----
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl || true
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
# torchtitan 0.2.2 release wheel goes to its own target, so that the two source trees below don't
# report "torchtitan version: 0.2.2" via importlib.metadata.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site022 "$T"/wheels/torchtitan-0.2.2-py3-none-any.whl || true

export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME=/tmp/titan_hf TOKENIZERS_PARALLELISM=false
export PYTORCH_ALLOC_CONF="expandable_segments:True" LOG_RANK=0
rm -rf /tmp/titan_hf

# ---- environment record ----
{ date -u; uname -a; } > "$W/env/uname.txt" 2>&1 || true
nvidia-smi -q > "$W/env/nvidia-smi-q.txt" 2>&1 || true
nvidia-smi > "$W/env/nvidia-smi.txt" 2>&1 || true
python3 -m pip list > "$W/env/pip-list.txt" 2>&1 || true
python3 -m pip list --path "$SITE" > "$W/env/pip-list-carried.txt" 2>&1 || true
python3 - > "$W/env/torch-info.txt" 2>&1 <<'EOF' || true
import sys, torch
print("python", sys.version)
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
print("cuda available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", torch.cuda.get_device_name(0), "cc", torch.cuda.get_device_capability(0), "mem", p.total_memory, "sms", p.multi_processor_count)
    print("bf16 supported", torch.cuda.is_bf16_supported())
for m in ("datasets", "torchdata", "tyro", "typeguard", "typing_extensions", "tokenizers", "huggingface_hub", "httpx", "pyarrow", "pandas", "fsspec", "numpy", "tensorboard", "dill", "multiprocess"):
    try:
        import importlib.metadata as md; mod = __import__(m)
        try: v = md.version(m.replace("_", "-"))
        except Exception: v = getattr(mod, "__version__", "?")
        print(m, v, getattr(mod, "__file__", ""))
    except Exception as e:
        print(m, "IMPORT FAILED", repr(e))
EOF
cat "$W/env/torch-info.txt" || true

log "torchtitan fixture run, started $(date -u +%FT%TZ), STEPS=$STEPS PROFILE_FREQ=$PROFILE_FREQ"
log "c4_test: stand-in built by .titan/make_c4_standin.py (CPython doc prose, 417 docs, ~1 MB); the real tests/assets/c4_test/data.json is not in the stored snapshot"

# run NAME CWD PYTHONPATH_PREFIX -- torchtitan args...
run() {
  local name=$1 cwd=$2 pp=$3; shift 3
  local dump=$W/$name
  mkdir -p "$dump"
  log ""
  log "== run $name (cwd .titan/${cwd##*/.titan/})"
  log "source: $(cat "$cwd/TORCHTITAN_COMMIT" 2>/dev/null)"
  log "cmd: PYTHONPATH=$pp:\$PYTHONPATH torchrun --nproc_per_node=1 --rdzv_backend c10d --rdzv_endpoint=localhost:0 --local-ranks-filter 0 --role rank --tee 3 -m torchtitan.train $*"
  local t1=$(date +%s)
  ( { set +x; } 2>/dev/null; cd "$cwd" && PYTHONPATH="$pp${PYTHONPATH:+:$PYTHONPATH}" timeout -k 15 "$RUN_TIMEOUT" \
      python3 -m torch.distributed.run --nproc_per_node=1 --rdzv_backend c10d --rdzv_endpoint="localhost:0" \
      --local-ranks-filter 0 --role rank --tee 3 \
      -m torchtitan.train "$@" ) > "$W/console-$name.log" 2>&1
  local rc=$?
  log "rc=$rc wall=$(( $(date +%s) - t1 ))s"
  tail -n 8 "$W/console-$name.log" | cut -c1-300 || true
  ( cd "$W" && find "$name" -type f | sort | xargs -r ls -l ) | tee -a "$MAN" || true
}

# r022: the released 0.2.2 (TOML config from the v0.2.2 tag: torchtitan/models/llama3/train_configs/debug_model.toml)
run r022 "$T/r022" /tmp/site022 \
  --job.config_file ./debug_model.toml --job.dump_folder "$W/r022" \
  --training.steps "$STEPS" \
  --profiling.enable_profiling --profiling.profile_freq "$PROFILE_FREQ" \
  --metrics.enable_tensorboard $EXTRA_ARGS_R022 || true

# obs: ghstack "[Observability 7/7]" head 5678e7d39 (init_observability is unconditional in its train.py)
run obs "$T/obs" "$T/obs" \
  --module llama3 --config llama3_debugmodel --dump-folder "$W/obs" \
  --training.steps "$STEPS" \
  --profiling.enable-profiling --profiling.profile-freq "$PROFILE_FREQ" \
  --metrics.enable-tensorboard $EXTRA_ARGS_NEW || true

# sl: main a2a0d99e3; llama3_debugmodel_ce_loss = debugmodel with plain CE (its default ChunkedCELoss
# fails under torch 2.11: "tensor has a non-zero number of elements, but its data is not allocated yet")
run sl "$T/sl" "$T/sl" \
  --module llama3 --config llama3_debugmodel_ce_loss --dump-folder "$W/sl" \
  --training.steps "$STEPS" \
  --profiler.enable-profiling --profiler.profile-freq "$PROFILE_FREQ" \
  --metrics.enable-tensorboard --debug.enable-structured-logging $EXTRA_ARGS_NEW || true

# ---- package: traces separately (they are the big part) ----
log ""
log "total wall $(( $(date +%s) - T0 ))s"
cp "$MAN" "$OUT/titan-manifest.txt" || true
for n in r022 obs sl; do cp "$W/console-$n.log" "$OUT/titan-console-$n.log" 2>/dev/null || true; done
( cd "$W" && find . -name '*trace*.json' -path '*trac*' | sort > /tmp/titan_traces.lst; cat /tmp/titan_traces.lst ) || true
( cd "$W" && tar -czf "$OUT/titan.tar.gz" --exclude-from=/tmp/titan_traces.lst . ) || true
( cd "$W" && tar -czf "$OUT/titan-traces.tar.gz" -T /tmp/titan_traces.lst ) || true
# keep each file <= 16 MiB: if the traces archive is too big, keep one trace per run
if [ "$(stat -c %s "$OUT/titan-traces.tar.gz" 2>/dev/null || echo 0)" -gt 15728640 ]; then
  ( cd "$W" && for n in r022 obs sl; do grep "^./$n/" /tmp/titan_traces.lst | tail -n 1; done > /tmp/titan_traces1.lst
    tar -czf "$OUT/titan-traces.tar.gz" -T /tmp/titan_traces1.lst ) || true
fi
if [ "$(stat -c %s "$OUT/titan-traces.tar.gz" 2>/dev/null || echo 0)" -gt 15728640 ]; then
  ( cd "$W" && head -n 1 /tmp/titan_traces1.lst > /tmp/titan_traces2.lst && tar -czf "$OUT/titan-traces.tar.gz" -T /tmp/titan_traces2.lst ) || true
fi
ls -la "$OUT" || true
tar -tzvf "$OUT/titan.tar.gz" | head -n 60 || true
exit 0
