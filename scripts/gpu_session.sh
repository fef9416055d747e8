#!/usr/bin/env bash
# One session on a GPU machine, in one script: what the machine has, the GPU checks, the
# transformers throughput benchmark and as much of the test suite as the time limits allow.
#
# For a machine with a GPU, Python 3.12, torch and transformers but no Ray, no vLLM and no package
# index (docs/development.md, "A GPU machine"): build the bundle here first,
#   bash ../shared/gpu-bundle/make-bundle.sh gpu-bundle      # Ray stripped + small wheels, ~30 MB
#   git show e41810b:backends/transformers_backend.py > gpu-bundle/transformers_backend_e41810b.py
#                                          # the benchmark's baseline, for a copy without .git
# carry the checkout with gpu-bundle/ (ignored by git) to the machine, and run there
#   bash scripts/gpu_session.sh [OUT]
# OUT (default $OUT, else runs/gpu-session) gets one log per step, the JSON of the checks and the
# benchmark, and the tests' JUnit XML. Each step has its own time limit (seconds, from the
# environment: CHECK_S, BENCH_S, LOOP_S, RAY_S; BENCH_ARGS replaces the benchmark's workload); a
# step that fails or runs out is reported and the next one runs. The defaults add up to 560 s,
# inside one 10-minute command. The last lines are a summary, one line per step.
#
# Try it here first, on the CPU, with this checkout's .venv and no bundle:
#   GPU_SESSION_HERE=1 BENCH_ARGS='--model tiny --dtype float32 --waves 1 --per-wave 4' \
#     CHECK_S=300 BENCH_S=200 LOOP_S=200 RAY_S=60 bash scripts/gpu_session.sh /tmp/gs
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-runs/gpu-session}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary=()

if [ -n "${GPU_SESSION_HERE:-}" ]; then
  PY=.venv/bin/python
else
  PY=python3
  bundle=${GPU_BUNDLE:-gpu-bundle}
  [ -f "$bundle/unpack.sh" ] || cp ../shared/gpu-bundle/unpack.sh "$bundle/" 2>/dev/null || true
  if [ -f "$bundle/ray-stripped.tar.xz" ]; then
    # shellcheck disable=SC1091
    source "$bundle/unpack.sh" >"$out/unpack.log" 2>&1 || echo "unpack failed: see $out/unpack.log"
  else
    echo "no bundle in $bundle/ (bash ../shared/gpu-bundle/make-bundle.sh $bundle): Ray must already be installed"
  fi
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1

# step NAME LIMIT_S CMD...: run CMD under a time limit, its output to OUT/NAME.log and its tail here
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc
  echo "== $name (limit ${limit} s): $*"
  timeout --signal=INT --kill-after=20 "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  grep -E "^(FAILED|ERROR)|(PASS|FAIL|SKIP) +[a-z]" "$out/$name.log" | head -n 40
  tail -n 3 "$out/$name.log"
  local how="rc $rc"
  { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && how="ran out of its ${limit} s"
  summary+=("$name: $how, $((SECONDS - t0)) s")
}

step machine 30 bash -c "nvidia-smi -L; nproc; $PY - <<'EOF'
import importlib, platform
print('python', platform.python_version())
for name in ('torch', 'transformers', 'ray', 'vllm', 'boto3', 'pytest', 'pandas', 'pyarrow', 'math_verify', 'rich', 'networkx', 'yaml', 'psutil', 'sentence_transformers'):
    try:
        mod = importlib.import_module(name)
        print(f'{name:22} {getattr(mod, \"__version__\", \"?\")}')
    except Exception as exc:
        print(f'{name:22} MISSING ({type(exc).__name__})')
import torch
print('cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')
EOF"
step gpu_check "${CHECK_S:-200}" $PY scripts/gpu_check.py --backends transformers --out "$out/gpu_check.json"
# the baseline backend comes from git; a copy without .git reads it from the bundle folder
base=()
git rev-parse -q --verify e41810b^{commit} >/dev/null 2>&1 || base=(--baseline-file "${GPU_BUNDLE:-gpu-bundle}/transformers_backend_e41810b.py")
read -ra bench <<<"${BENCH_ARGS:---workload gpu --model tiny --dtype bfloat16}"
step bench_transformers "${BENCH_S:-180}" $PY scripts/bench_transformers.py "${bench[@]}" ${base[@]+"${base[@]}"} \
  --out "$out/bench_transformers.json"
# -v: each test's line is in the log as it ends, so a step cut by its limit still says how far it got
step tests_ray_free "${LOOP_S:-100}" $PY -m pytest -m "not ray and not slow" -v -p no:cacheprovider \
  --junitxml="$out/tests_ray_free.xml"
step tests_ray "${RAY_S:-50}" $PY -m pytest -m "ray and not slow" -v -p no:cacheprovider \
  tests/actors tests/backends tests/scripts --junitxml="$out/tests_ray.xml"

echo "== summary ($out)"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
