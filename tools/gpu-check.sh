#!/usr/bin/env bash
# tools/gpu-check.sh: the GPU check (docs/gpu-check.md). Six steps, each with its own time limit, each writing into
# OUT/stepN/; a failing step never stops the others; one table at the end (OUT/table.txt, OUT/table.tsv).
#
#   tools/gpu-check.sh [--tree DIR] [--out DIR] [--mode auto|gpu|double] [--python PY] [--steps 1,3,...]
#   tools/gpu-check.sh --pack DIR [--tree BUILD]      # the relocatable bundle a GPU machine runs from
#
# --tree: a meson build directory (default: build/ beside tools/), or a bundle made by --pack (the same relative
# layout, plus gpu-libs/ with shared libraries the GPU machine may lack). --mode gpu runs on the real driver, CUDA
# runtime, CUPTI and torch; --mode double runs over the CUDA driver double (tests/cuda_double; PLATEAU_LIBCUDA
# points the backend and the stand-in runtime at it) and skips, with the reason, what needs a real GPU; auto picks
# gpu when nvidia-smi lists a GPU. Exit status: 0 when no step failed, 1 when one did, 2 on a usage error.
set -u

SELF=$(readlink -f "$0")
ROOT=$(cd "$(dirname "$SELF")/.." && pwd)
TREE='' OUT='' MODE=auto PY='' STEPS=1,2,3,4,5,6 STEP='' PACK=''

usage() { sed -n '2,13p' "$SELF" | sed 's/^# \{0,1\}//'; }
die() { echo "gpu-check: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --tree) TREE=${2:?}; shift ;;
    --out) OUT=${2:?}; shift ;;
    --mode) MODE=${2:?}; shift ;;
    --python) PY=${2:?}; shift ;;
    --steps) STEPS=${2:?}; shift ;;
    --step) STEP=${2:?}; shift ;;   # internal: run one step (the driver runs each under its own timeout)
    --pack) PACK=${2:?}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
    esac
    shift
done
[ -n "$TREE" ] || TREE=$ROOT/build
[ -d "$TREE" ] || die "no build tree at $TREE (make build, or --tree DIR)"
TREE=$(cd "$TREE" && pwd)
case "$MODE" in auto | gpu | double) ;; *) die "--mode must be auto, gpu or double, not '$MODE'" ;; esac

# Seconds each step may take (their sum, 450 s, keeps the whole check under 8 minutes with its start).
declare -A LIMIT=([1]=60 [2]=60 [3]=120 [4]=60 [5]=60 [6]=90)
for n in 1 2 3 4 5 6; do  # GPU_CHECK_LIMIT_<n>=SECONDS overrides one (the test uses it to make a step time out)
    v=GPU_CHECK_LIMIT_$n
    [ -n "${!v:-}" ] && LIMIT[$n]=${!v}
done
declare -A NAME=([1]="allocator on the cuda backend" [2]="plateau-train cuda vs cpu" [3]="torch CUDA script under plateau run"
                 [4]="plateau.torch.use_allocator()" [5]="--torch-snapshot vs torch, plateau tune" [6]="tracer cost, CUDA script")

PLATEAU=$TREE/cli/plateau
DOUBLE=$TREE/tests/cuda_double/libcuda.so.1
GPU_LIBS=$TREE/gpu-libs

# ------------------------------------------------------------------------------------------------------------ pack
# The bundle: what the steps run, copied from a build tree with its relative layout (RUNPATHs are $ORIGIN-relative,
# plateau finds its preload and Python bootstrap beside itself), links resolved, plus gpu-libs/: the build's shared
# libraries that are not glibc's, libstdc++ or libgcc (cmocka, OpenMP), used only for plateau's own C programs.
pack() {
    local dst=$1 f
    [ -x "$TREE/cli/plateau" ] || die "--pack: $TREE is not a build tree (no cli/plateau)"
    mkdir -p "$dst" || die "--pack: cannot make $dst"
    dst=$(cd "$dst" && pwd)
    local files=(cli/plateau preload/libplateau_preload.so training/plateau-train training/libplateau-train-cuda.so
                 tests/allocator/test_alloc_driver tests/cuda_double/libcuda.so.1 tests/targets/target_cuda
                 tests/targets/target_cuda_loop tests/targets/libcudart_standin.so)
    for f in "${files[@]}"; do
        [ -e "$TREE/$f" ] || { echo "gpu-check: --pack: $f is not in $TREE (left out)" >&2; continue; }
        mkdir -p "$dst/$(dirname "$f")" && cp -L "$TREE/$f" "$dst/$f" || die "--pack: copying $f failed"
    done
    mkdir -p "$dst/allocator"
    for f in "$TREE"/allocator/libplateau_alloc.so*; do
        [ -d "$f" ] || cp -L "$f" "$dst/allocator/" || die "--pack: copying $f failed"
    done
    rm -rf "$dst/python" && cp -rL "$TREE/python" "$dst/python" && find "$dst/python" -name __pycache__ -prune -exec rm -rf {} +
    mkdir -p "$dst/gpu-libs"
    for f in cli/plateau training/plateau-train tests/allocator/test_alloc_driver; do
        [ -e "$dst/$f" ] || continue
        ldd "$TREE/$f" | awk '$3 ~ /^\// {print $3}' | grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so' |
            grep -v "^$TREE/" | while read -r lib; do cp -L "$lib" "$dst/gpu-libs/"; done
    done
    local kib
    kib=$(du -sk "$dst" | cut -f1)
    (cd "$dst" && find . -type f ! -name 'MANIFEST*' | sort | xargs ls -l | awk '{print $5, $9}') > "$dst/MANIFEST.tmp"
    mv "$dst/MANIFEST.tmp" "$dst/MANIFEST"
    local glibc
    glibc=$(find "$dst" -type f \( -perm -u+x -o -name '*.so*' \) -exec objdump -T {} + 2>/dev/null |
            grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
    echo "needs ${glibc:-GLIBC_?} or newer (the machine's: ldd --version)" >> "$dst/MANIFEST"
    echo "gpu-check: bundle $dst: $((kib / 1024)) MiB ($(($(wc -l < "$dst/MANIFEST") - 1)) files, MANIFEST); needs ${glibc:-GLIBC_?} or newer; the run tool carries at most 64 MiB"
    [ "$kib" -lt $((60 * 1024)) ] || { echo "gpu-check: --pack: the bundle is over 60 MiB" >&2; return 1; }
}
if [ -n "$PACK" ]; then pack "$PACK"; exit $?; fi

# ------------------------------------------------------------------------------------------------------- one step
# Inside a step: S is its folder; result STATUS DETAIL writes S/result (the last word wins) and ends the step.
result() { printf '%s\t%s\n' "$1" "$2" > "$S/result"; exit 0; }
pass() { result PASS "$1"; }
fail() { result FAIL "$1"; }
skip() { result SKIP "$1"; }
# plateau's C programs find gpu-libs/ (a bundle's) before the system; Python programs never get it.
cenv() { if [ -d "$GPU_LIBS" ]; then env LD_LIBRARY_PATH="$GPU_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; else "$@"; fi; }
need_torch_cuda() {
    [ "$MODE" = gpu ] || skip "GPU-only: needs a GPU, the CUDA runtime and torch with CUDA (this is the driver double)"
    [ -n "$PY" ] || skip "no Python with torch and a CUDA device found (--python PY)"
}
# A torch script that failed with status $1 (output in $2): SKIP when torch sees no CUDA device (the scripts exit 77;
# use_allocator() refuses in one line saying so), else FAIL.
torch_failed() {
    if [ "$1" -eq 77 ] || grep -q 'sees no CUDA device' "$2"; then
        skip "GPU-only: $(grep -m1 'sees no CUDA device' "$2" | head -c 200)"
    fi
    local why
    why=$(grep -m1 -E 'use_allocator\(\): |Error|error' "$2" || grep -v '^ ' "$2" | tail -1)
    fail "$3 exited $1 ($(basename "$2"): $(echo "$why" | head -c 200))"
}
check() { python3 "$ROOT/tools/gpu/check.py" "$@"; }

step1() {  # the allocator's unit tests on the cuda backend
    local exe=$TREE/tests/allocator/test_alloc_driver ran=0 failed=() n
    [ -x "$exe" ] || skip "test_alloc_driver not built (CUDA's headers not found: -Dcuda=disabled?)"
    if [ "$MODE" = double ]; then  # the whole cuda-backend suite as meson runs it, then the driver-only tests
        for n in alloc expandable fastpath stress backend_cuda pluggable; do
            [ -x "$TREE/tests/allocator/test_alloc_$n" ] || continue
            ran=$((ran + 1))
            env PLATEAU_TEST_BACKEND=cuda PLATEAU_LIBCUDA="$DOUBLE" PL_CUDA_DOUBLE=leak_exitcode:97 PLATEAU_ALLOC_CONF= \
                PYTORCH_CUDA_ALLOC_CONF= PL_STRESS_OPS=300 "$TREE/tests/allocator/test_alloc_$n" > "$S/suite_$n.log" 2>&1 ||
                failed+=("$n")
        done
    fi
    cenv env "${DENV[@]}" PL_CUDA_DOUBLE=leak_exitcode:97 PLATEAU_ALLOC_CONF= PYTORCH_CUDA_ALLOC_CONF= "$exe" \
        > "$S/driver.log" 2>&1
    local rc=$? tests
    tests=$(grep -c '^\[       OK \]' "$S/driver.log")
    local exp
    exp=$(sed -n 's/^gpu-check: expandable segments: \(granularity [0-9]* KiB, [0-9]* maps\).*/\1/p' "$S/driver.log")
    local drv="driver-only tests $tests/4 OK${exp:+ ($exp)}"
    [ $rc -eq 0 ] || fail "test_alloc_driver exited $rc: $drv; $( (grep -m1 '^ERROR: ' "$S/driver.log" ||
        grep -m1 -E '^\[  (ERROR|FAILED) +\]' "$S/driver.log") | head -c 200)"
    [ ${#failed[@]} -eq 0 ] || fail "suite over the double: ${failed[*]} failed (suite_*.log); $drv"
    if [ "$MODE" = double ] && [ $ran -eq 0 ]; then pass "the suite's executables are not in this tree (a bundle); $drv"; fi
    if [ "$MODE" = double ]; then pass "suite on the double: $ran/$ran executables (stress: 300 ops a config); $drv"; fi
    pass "real VMM: $drv; $(sed -n 's/^gpu-check: plain segments: //p' "$S/driver.log" | cut -d, -f1-3)"
}

step2() {  # plateau-train --device cuda vs --device cpu
    local train=$TREE/training/plateau-train args=(--steps 20 --seed 1 --log-every 1 --threads 4)
    [ -x "$train" ] || skip "plateau-train not built"
    cenv env "${DENV[@]}" PL_CUDA_DOUBLE=leak_exitcode:97 "$train" --device cuda "${args[@]}" > "$S/cuda.log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
        local why
        why=$(grep -m1 -- '--device cuda' "$S/cuda.log" | head -c 240)
        [ "$MODE" = double ] && skip "GPU-only: the CUDA runtime cannot start on the driver double: ${why:-exit $rc}"
        fail "--device cuda exited $rc: ${why:-see cuda.log}"
    fi
    cenv "$train" --device cpu "${args[@]}" > "$S/cpu.log" 2>&1 || fail "--device cpu exited $? (cpu.log)"
    check losses "$S/cpu.log" "$S/cuda.log" > "$S/compare.txt" || fail "$(tail -1 "$S/compare.txt")"
    pass "$(tail -1 "$S/compare.txt")"
}

# plateau run on the torch script; $1 = mode (leak|healthy), rest = extra script arguments. Writes S/<mode>/ (the
# run), S/<mode>.json (plateau's report), S/<mode>.torch.json (torch's stats), S/<mode>.torch_snapshot.pickle.
# 200 steps of this loop last about a second on a GPU: at the census's default budget (1 % of wall time) it would
# run about once, and naming who keeps the leak needs several, so these runs give it 25 % (PLATEAU_CENSUS_BUDGET,
# as the retention corpus does); step 6 measures the cost at the defaults.
run_torch() {
    local m=$1
    shift
    rm -rf "${S:?}/$m"
    PLATEAU_CENSUS_BUDGET=0.25 "$PLATEAU" run -o "$S/$m" --no-report -- "$PY" "$ROOT/tests/gpu/train_cuda.py" --mode "$m" --steps 200 \
        --stats "$S/$m.torch.json" --snapshot "$S/$m.torch_snapshot.pickle" "$@" > "$S/$m.out" 2>&1 || return $?
    "$PLATEAU" report --json "$S/$m.json" "$S/$m" > "$S/$m.report.txt" 2>&1
}

step3() {  # a torch 2 CUDA script under plateau run: hooks, CUPTI, torch's stats, dev.* verdicts, the leak's line
    if [ "$MODE" = double ]; then step3_double; fi
    need_torch_cuda
    local m
    for m in leak healthy; do run_torch "$m" || torch_failed $? "$S/$m.out" "the $m run"; done
    check torch-run "$S" "$ROOT/tests/gpu/train_cuda.py" > "$S/check.txt" 2>&1
    local rc=$?
    [ $rc -eq 0 ] && pass "$(tail -1 "$S/check.txt")"
    fail "$(tail -1 "$S/check.txt")"
}

# Over the double: the preload's driver hooks with the stand-in runtime (target_cuda: every device event equals the
# double's log), then a device leak and a device warmup (target_cuda_loop) judged by their dev.* verdicts.
step3_double() {
    local t=$TREE/tests/targets m
    [ -x "$t/target_cuda" ] && [ -x "$t/target_cuda_loop" ] || skip "the stand-in runtime's targets are not built"
    rm -rf "$S/hooks"
    env PLATEAU_LIBCUDA="$DOUBLE" PL_CUDA_DOUBLE="log:$S/driver.log,leak_exitcode:97" PLATEAU_DEBUG_CUDA=1 \
        PLATEAU_CUPTI=0 "$PLATEAU" run -o "$S/hooks" --no-report -- "$t/target_cuda" 60 > "$S/hooks.out" 2>&1 ||
        fail "target_cuda under plateau run exited $? (hooks.out)"
    "$PLATEAU" report --json "$S/hooks.json" "$S/hooks" > "$S/hooks.report.txt" 2>&1 || fail "plateau report on the hooks run failed"
    for m in leak healthy; do
        rm -rf "${S:?}/$m"
        env PLATEAU_LIBCUDA="$DOUBLE" PL_CUDA_DOUBLE=leak_exitcode:97 PLATEAU_CUPTI=0 \
            "$PLATEAU" run -o "$S/$m" --no-report -- "$t/target_cuda_loop" "$m" 200 > "$S/$m.out" 2>&1 ||
            fail "target_cuda_loop $m under plateau run exited $? ($m.out)"
        "$PLATEAU" report --json "$S/$m.json" "$S/$m" > "$S/$m.report.txt" 2>&1 || fail "plateau report on the $m run failed"
    done
    check double-run "$S" > "$S/check.txt" 2>&1
    local rc=$?
    [ $rc -eq 0 ] && pass "$(tail -1 "$S/check.txt")"
    fail "$(tail -1 "$S/check.txt")"
}

step4() {  # plateau.torch.use_allocator() for a few real training steps
    need_torch_cuda
    "$PLATEAU" run -o "$S/run" --no-report -- "$PY" "$ROOT/tests/gpu/use_allocator.py" --steps 10 --out "$S/plateau.json" \
        > "$S/run.out" 2>&1 || torch_failed $? "$S/run.out" "use_allocator.py under plateau run"
    "$PY" "$ROOT/tests/gpu/use_allocator.py" --steps 10 --reference --out "$S/reference.json" > "$S/reference.out" 2>&1 ||
        torch_failed $? "$S/reference.out" "the reference run on torch's allocator"
    check use-allocator "$S/plateau.json" "$S/reference.json" > "$S/check.txt" 2>&1 && pass "$(tail -1 "$S/check.txt")"
    fail "$(tail -1 "$S/check.txt")"
}

step5() {  # --torch-snapshot of the step-3 leak run vs its torch.cuda.memory._snapshot(), and plateau tune on it
    need_torch_cuda
    local run=$OUT/step3/leak
    if [ ! -d "$run" ] || [ ! -f "$run.torch_snapshot.pickle" ]; then  # step 3 not run, or it failed early
        run_torch leak || torch_failed $? "$S/leak.out" "the leak run"
        run=$S/leak
    fi
    "$PLATEAU" report --torch-snapshot "$S/plateau_snapshot.pickle" "$run" > "$S/report.txt" 2>&1 ||
        fail "plateau report --torch-snapshot exited $? ($(tail -1 "$S/report.txt" | head -c 200))"
    "$PLATEAU" tune "$run" > "$S/tune.txt" 2>&1 || fail "plateau tune on the run exited $? (tune.txt)"
    "$PY" "$ROOT/tools/gpu/check.py" snapshot "$run.torch_snapshot.pickle" "$S/plateau_snapshot.pickle" "$S/tune.txt" \
        > "$S/check.txt" 2>&1 && pass "$(tail -1 "$S/check.txt")"
    fail "$(tail -1 "$S/check.txt")"
}

step6() {  # the tracer's cost on the CUDA script: traced / untraced, interleaved rounds
    need_torch_cuda
    local r
    : > "$S/times.tsv"
    for r in 1 2 3; do
        "$PY" "$ROOT/tests/gpu/train_cuda.py" --mode healthy --steps 300 --stats "$S/untraced.$r.json" \
            > "$S/untraced.$r.out" 2>&1 || torch_failed $? "$S/untraced.$r.out" "untraced round $r"
        rm -rf "${S:?}/run.$r"
        "$PLATEAU" run -o "$S/run.$r" --no-report -- "$PY" "$ROOT/tests/gpu/train_cuda.py" --mode healthy --steps 300 \
            --stats "$S/traced.$r.json" > "$S/traced.$r.out" 2>&1 || torch_failed $? "$S/traced.$r.out" "traced round $r"
    done
    check cost "$S" 3 > "$S/check.txt" 2>&1 && pass "$(tail -1 "$S/check.txt")"
    fail "$(tail -1 "$S/check.txt")"
}

if [ -n "$STEP" ]; then
    : "${OUT:?}"
    # torch's and plateau's allocator settings from the machine would change what the steps compare
    unset PYTORCH_CUDA_ALLOC_CONF PLATEAU_ALLOC_CONF
    DENV=()  # over the double, what loads the driver loads the double
    [ "$MODE" = double ] && DENV=("PLATEAU_LIBCUDA=$DOUBLE")
    S=$OUT/step$STEP
    mkdir -p "$S"
    [ -x "$PLATEAU" ] || skip "no plateau in $TREE"
    "step$STEP"
    fail "the step ended without a result"
fi

# ---------------------------------------------------------------------------------------------------------- driver
[ -n "$OUT" ] || OUT=$PWD/gpu-check-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT" || die "cannot make $OUT"
OUT=$(cd "$OUT" && pwd)
if [ "$MODE" = auto ]; then
    MODE=double
    if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        MODE=gpu
    elif ! command -v nvidia-smi > /dev/null; then  # no nvidia-smi: ask torch, if there is one
        for c in python3 /opt/torch/.venv/bin/python3; do
            "$c" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' > /dev/null 2>&1 && MODE=gpu && break
        done
    fi
fi
# over the double, step 1 runs the whole cuda-backend suite (~10 s, 45 s on a loaded 2-core machine), not one test
[ "$MODE" = double ] && [ -z "${GPU_CHECK_LIMIT_1:-}" ] && LIMIT[1]=120
if [ -z "$PY" ] && [ "$MODE" = gpu ]; then  # the first python3 whose torch sees a CUDA device
    for c in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
        command -v "$c" > /dev/null || continue
        if "$c" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' > /dev/null 2>&1; then
            PY=$(command -v "$c"); break
        fi
    done
fi
{
    echo "gpu-check: $(date -u +%FT%TZ) mode $MODE, tree $TREE, repository $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "host: $(uname -srm); $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
    [ -n "$PY" ] && "$PY" -c 'import sys, torch; print("python %s, torch %s, CUDA %s" % (sys.version.split()[0], torch.__version__, torch.version.cuda))' 2>&1
    [ "$MODE" = double ] && echo "driver double: $DOUBLE"
    echo "plateau: $("$PLATEAU" --version 2>&1 | head -1)"
    env | grep -E '^(PYTORCH_CUDA_ALLOC_CONF|PLATEAU_ALLOC_CONF|CUDA_VISIBLE_DEVICES)=' | sed 's/^/set here (the steps unset the first two): /'
    [ -f "$TREE/MANIFEST" ] && echo "bundle: $(tail -1 "$TREE/MANIFEST"); this machine: $(ldd --version 2>&1 | head -1)"
} > "$OUT/environment.txt"
cat "$OUT/environment.txt"

printf 'step\tcheck\tstatus\tseconds\tdetail\n' > "$OUT/table.tsv"
n_fail=0
for n in ${STEPS//,/ }; do
    [ -n "${LIMIT[$n]:-}" ] || die "no step $n (steps are 1-6)"
    mkdir -p "$OUT/step$n"
    rm -f "$OUT/step$n/result"
    t0=$(date +%s.%N)
    timeout -k 10 "${LIMIT[$n]}" "$SELF" --step "$n" --tree "$TREE" --out "$OUT" --mode "$MODE" ${PY:+--python "$PY"} \
        > "$OUT/step$n/log" 2>&1
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        status=FAIL detail="timed out after ${LIMIT[$n]} s (step$n/log)"
    elif [ -s "$OUT/step$n/result" ]; then
        IFS=$'\t' read -r status detail < "$OUT/step$n/result"
    else
        status=FAIL detail="exited $rc without a result (step$n/log: $(tail -1 "$OUT/step$n/log" | head -c 160))"
    fi
    [ "$status" = FAIL ] && n_fail=$((n_fail + 1))
    printf '%s\t%s\t%s\t%s\t%s\n' "$n" "${NAME[$n]}" "$status" "$secs" "$detail" >> "$OUT/table.tsv"
    printf 'step %s %-40s %-4s %6ss  %s\n' "$n" "${NAME[$n]}" "$status" "$secs" "$detail"
done > "$OUT/table.txt"
cat "$OUT/table.txt"
echo "gpu-check: outputs in $OUT"
[ $n_fail -eq 0 ]
