#!/bin/sh
# allocator.exports: libplateau_alloc.so exports its public API and nothing of the allocator's internals.
# Every exported pl_* function is declared PL_API in include/plateau/ or in allocator/batch.h (the batch that
# tune/replay.c runs); plateau_torch_* are the entry points PyTorch's CUDAPluggableAllocator loads (pluggable.c).
# The handle API (pl_alloc_malloc_block / pl_alloc_free_block) and pl_alloc_check stay inside: the allocator's tests
# link the static plateau_alloc_internal.
# usage: test_exports.sh LIBPLATEAU_ALLOC_SO SOURCE_ROOT
set -eu
lib=$1 root=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
syms=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -E '^(pl_|plateau_)' || true)
[ -n "$syms" ] || fail "no pl_ / plateau_ symbols exported by $lib"
for s in $syms; do
    case $s in plateau_torch_*) continue ;; esac
    grep -Eq "PL_API .*[^a-z_]$s\(" "$root"/include/plateau/*.h "$root"/allocator/batch.h ||
        fail "$lib exports $s, which no public header (include/plateau/, allocator/batch.h) declares PL_API"
done
for s in pl_alloc_malloc_block pl_alloc_free_block pl_alloc_check; do
    if echo "$syms" | grep -qx "$s"; then fail "$lib exports the internal $s"; fi
done
for s in pl_alloc_create pl_alloc_malloc pl_alloc_run_batch plateau_torch_malloc; do
    echo "$syms" | grep -qx "$s" || fail "$lib does not export $s"
done
echo "ok: $(echo "$syms" | wc -l) symbols"
