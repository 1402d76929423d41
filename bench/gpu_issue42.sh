#!/bin/bash
# docs/gpu.md's H200 measurements in one call of the lent machine, every figure in one process per line below.
# Prepared on the CPU machine: the BBC data of the real runs is packed there (the GPU machine has no corpora):
#   python bench/device_pretrain.py pack .devdata/bbc -- pretrain --init models/minilm-mlm --corpus bbc --max-seq-len 128
# and travels with the work tree (carry .devdata, and .whl: the wheels of datasets, dill and multiprocess, installed
# only if that machine lacks them). Each step has its own time limit, so a slow one cannot take the others' time.
set -u
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/issue42}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/issue42.log") 2>&1
python3 -c "import datasets" 2>/dev/null || { python3 -m pip install -q --no-index --no-deps --no-compile \
  --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
step() { local limit=$1; shift; echo; echo "== $(date -u +%T) [$limit s] $*"; timeout "$limit" "$@"; echo "== exit $?"; }
SHIP="--device cuda --precision bf16 --steps 300 --log-every 50 --replay .devdata/bbc"
# 1. the shipped model's shape (6 x 384), batch 256 x 128: the step alone, then real runs with the serial and the
#    prefetched data path, then the step again
step 100 python3 bench/bench_run_vs_step.py $SHIP --batch-size 256 --prefetch 0 2
# 2. the same with the encoder compiled (the loop's --compile default), step and a prefetched run
step 100 python3 bench/bench_run_vs_step.py $SHIP --batch-size 256 --prefetch 2 --compile default
# 3. DDP, two ranks on the one GPU (gloo carries the CUDA tensors: bertcore.training.dist.process_group_backend)
BERTCORE_DDP_DEVICE=cuda step 60 python3 -m pytest -q -p no:cacheprovider tests/test_ddp.py
# 4. BERT-base (12 x 768), batch 256 x 128: bertcore eager and with the encoder compiled
step 90 python3 bench/bench_train_step.py --preset base --device cuda --batch-size 256 --seq 128 --steps 10 --compile --skip-hf
# 5. BERT-large (24 x 1024), batch 256 x 128, bertcore eager and compiled
step 110 python3 bench/bench_train_step.py --preset large --device cuda --batch-size 256 --seq 128 --steps 8 --compile --skip-hf
# 6. the shipped shape, a larger batch, CUDA graphs on the compiled encoder
step 60 python3 bench/bench_train_step.py --config models/minilm-mlm --device cuda --batch-size 1024 --seq 128 --steps 10 --compile reduce-overhead --skip-hf
echo "== done $(date -u +%T)"
