#!/usr/bin/env bash
# The GPU checks Kiln waits on, as one device call of at most 590 s (steps bounded 560 s in all; docs/performance.md,
# "Next GPU run"). Here, first: bash ../shared/tools/gpu-kit/pack.sh && bash scripts/gpu-device-prep.sh aside
# Then `device run` with carry [".gpukit", ".gl"] and the command:  bash scripts/gpu-run.sh [STEP...]
# and afterwards, here: bash scripts/gpu-device-prep.sh restore
#
# Steps (default: all, in this order; each bounded, its log in $OUT/<step>.txt, at most 8 files come back):
#   tests   every engine test file on the GPU (kernels vs CPU references)                          60 s
#   gemm    bench:engine --sizes large --only matmul,attention,linear --torch cuda: the register-tiled GEMM and
#           the subgroup-matrix one at each tile of SUBGROUP_TILES (the file kernel's '64', '128' and the generated
#           double-buffered 'db128', 'db128x64', 'db64k64' of issue 43), matmul and Krea-shaped linear (f16 and
#           int8 weights); the flash and
#           the tensor-core attention, also at Krea's 1K GQA shape, with the generated attention's presets
#           (ATTENTION_TILES 'g16x4k32', 'g32x2k32', 'g16x2k64', 'g32x4k32' of issue 43: at L4096 and Krea 1K);
#           PyTorch beside; softmax and sum (the memory-bound rate) and one empty dispatch. The f16 GEMM winners
#           per shape class and the attention's at Krea 1K go to $OUT/tuning.json (src/engine/tuning.ts's
#           format) with the rates they ran at (what `npm run plan` predicts step times from): commit it as the
#           file name the log's last lines print, tuning/<vendor>-<architecture>.json                      180 s
#   krea    Krea 2 Turbo at real size, 1K step + VAE + 8-step job (KILN_SUBGROUP_MATRIX=$SG, default 1;
#           KILN_SUBGROUP_TILE=$TILE, default the kernel's: 128; KILN_SUBGROUP_ATTENTION=$SGA, default 1:
#           0 keeps the flash attention with the tensor-core GEMM; KILN_SUBGROUP_ATTENTION_TILE=$ATILE, default
#           empty: the file attention kernel, g16x4k32 etc. a generated one; KILN_PROFILE=$PROF, default 1: GPU time
#           per kernel of one step)                                                                      150 s
#   kf2     MiniMax H3, a 2-keyframe 480p 5 s job's sequence, 2 of 50 blocks (step extrapolated), VAE  100 s
#   ref3    MiniMax H3, 3 pictures + 1 voice (Ref2VA) at 480p 5 s, 2 of 50 blocks, no VAE decode      70 s
#
# Rehearsal without a GPU (docs/performance.md, "Next GPU run"): with no .gpukit/ the steps run here with this
# machine's node from the build in $BUILD; GEMM_SIZES=tiny makes the gemm step a small sweep, TORCH=off without PyTorch:
#   npx tsc -p tsconfig.test.json --outDir build/rehearse
#   BUILD=build/rehearse GEMM_SIZES=tiny TORCH=off ONLY='matmul f16,linear f16' OUT=/tmp/rehearse bash scripts/gpu-run.sh gemm
# (ONLY: bench:engine's --only, row-name prefixes.) EMULATE=1 adds the tensor-core rows through the emulated builtins
# (lavapipe has no subgroup matrix); each costs lavapipe a slow cold compile, so give it GEMM_TIMEOUT=600 or more.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
for f in "$root"/.gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
ldconfig 2>/dev/null
out=${OUT:-/tmp/gpu-run-out}
mkdir -p "$out"
kit="$root/.gpukit/run.sh"
sg=${SG:-1}
export KILN_SUBGROUP_ATTENTION=${SGA:-1}
# the benches (gemm, krea, kf2, ref3) run as the GPU worker does: Dawn's validation and robustness off
# (engine/device.ts PRODUCTION_TOGGLES; TOGGLES=safe to compare); the tests step keeps Dawn's checks on, and its
# test/engine/dawn_toggles holds every kernel family bit-identical with them off
bench_toggles=${TOGGLES:-fast}
export KILN_SUBGROUP_TILE=${TILE:-128}
export KILN_SUBGROUP_ATTENTION_TILE=${ATILE:-}   # the tensor-core attention's tile (e.g. g16x4k32); empty: the file kernel's
b=${BUILD:-build}
step() { # name timeout command...
  local name=$1 t=$2; shift 2
  if [ -f "$kit" ]; then
    STEP_TIMEOUT=$t bash "$kit" "cmd:$* > $out/$name.txt 2>&1; tail -n 30 $out/$name.txt"
  else   # rehearsal: no kit, this machine's node and build
    (cd "$root" && KILN_ALLOW_SOFTWARE_GPU=1 timeout "$t" bash -c "$* > $out/$name.txt 2>&1"; echo "== $name: exit $? (no .gpukit: run here)"; tail -n 30 "$out/$name.txt")
  fi
}
# After the tests step: a tensor-core kernel whose native test failed on this GPU is kept out of the later steps
# (unless TILE / SG / SGA were given), so one refused kernel does not cost the run its model figures: tile 128
# failed and 64 passed -> tile 64; no tile passed -> SG=0 (the tensor-core attention goes with it); the attention
# failed -> SGA=0. The subtest names are test/engine/matmul_subgroup's and attention_subgroup's.
fallbacks() {
  local t=$out/tests.txt
  [ -f "$t" ] || return 0
  if [ -z "${TILE:-}" ] && grep -q "✖ native builtins, tile 128" "$t"; then
    if grep -q "✔ native builtins, tile 64" "$t"; then
      export KILN_SUBGROUP_TILE=64; echo "gpu-run: tile 128 failed its native test: later steps use tile 64"
    elif [ -z "${SG:-}" ]; then
      sg=0; echo "gpu-run: no tensor-core GEMM tile passed its native test: later steps run without (SG=0)"
    fi
  fi
  if [ -z "${SGA:-}" ] && grep -q "✖ attention subgroup-matrix f16 (native builtins)" "$t"; then
    export KILN_SUBGROUP_ATTENTION=0; echo "gpu-run: the tensor-core attention failed its native test: later steps keep flash (SGA=0)"
  fi
}
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(tests gemm krea kf2 ref3)
[ -f "$kit" ] && { STEP_TIMEOUT=20 bash "$kit" info > /dev/null 2>&1; head -8 "$out/info.txt" 2>/dev/null; }
for s in "${steps[@]}"; do
  case "$s" in
    tests) step tests 60 "node --test --test-concurrency=1 --test-reporter=spec $b/test/engine/*.test.js"; fallbacks ;;
    gemm)  step gemm "${GEMM_TIMEOUT:-180}" "KILN_DAWN_TOGGLES=$bench_toggles node $b/bench/engine/main.js --sizes ${GEMM_SIZES:-large} --only '${ONLY:-matmul,attention,linear,softmax,sum,dispatch}' --torch ${TORCH:-cuda} --tuning-out $out/tuning.json${EMULATE:+ --emulate}" ;;
    krea)  echo "krea: KILN_SUBGROUP_MATRIX=$sg KILN_SUBGROUP_TILE=$KILN_SUBGROUP_TILE KILN_SUBGROUP_ATTENTION=$KILN_SUBGROUP_ATTENTION KILN_SUBGROUP_ATTENTION_TILE=$KILN_SUBGROUP_ATTENTION_TILE"
           step krea 150 "KILN_DAWN_TOGGLES=$bench_toggles KILN_PROFILE=${PROF:-1} KILN_SUBGROUP_MATRIX=$sg node $b/bench/image/main.js --profile imgart_turbo --sizes 1024" ;;
    kf2)   step kf2 100 "KILN_DAWN_TOGGLES=$bench_toggles KILN_SUBGROUP_MATRIX=$sg node $b/bench/video/main.js --cases 480p:5 --keyframes 2 --layers 2" ;;
    ref3)  step ref3 70 "KILN_DAWN_TOGGLES=$bench_toggles KILN_SUBGROUP_MATRIX=$sg node $b/bench/video/main.js --cases 480p:5 --references 3 --voices 1 --layers 2 --skip-vae" ;;
    *) echo "gpu-run: unknown step $s" ;;
  esac
done
rm -f "$out/cmd.txt"
