#!/bin/bash
# Install and integrate: `meson install` into a DESTDIR gives a C/C++ trainer what it needs, and the
# installed plateau works from there and from a copy moved elsewhere.
# - headers <plateau/step.h>, <plateau/alloc.h> (each compiles alone as C11 and C++), plateau.pc: a trainer built
#   with `pkg-config --cflags --libs plateau` runs untraced (the step API does nothing) and under the installed
#   `plateau run`, which finds the installed preload through the configured libdir relative to itself (not the
#   build tree's, not the absolute install path): every plateau_step() is recorded;
# - the CMake package: find_package(plateau) and plateau::plateau build the same trainer;
# - a man page for plateau and each command `plateau --help` lists, rendered by groff without warnings, naming
#   every option of that command's --help; bash completion completes commands, options and enumerated values.
# usage: test_install.sh BUILD_ROOT SOURCE_TESTS_INSTALL PREFIX BINDIR LIBDIR INCLUDEDIR MANDIR DATADIR WORKDIR
set -euo pipefail
build=$1 src=$2 prefix=$3 bindir=$4 libdir=$5 includedir=$6 mandir=$7 datadir=$8 work=$9/install-$$
rel() { case $1 in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac; }
bindir=$(rel "$bindir") libdir=$(rel "$libdir") includedir=$(rel "$includedir") mandir=$(rel "$mandir")
datadir=$(rel "$datadir")
rm -rf "$work"; mkdir -p "$work"; chmod 700 "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.txt; do echo "== $f"; head -c 3000 "$f"; done >&2; exit 1; }
unset PLATEAU_PRELOAD PLATEAU_JEMALLOC PLATEAU_PYTHON_DIR LD_PRELOAD

D=$work/dest
meson install -C "$build" --destdir "$D" --no-rebuild --quiet >"$work/install.txt" 2>&1 || fail "meson install"
P=$D$bindir/plateau
[ -x "$P" ] || fail "no $P"
for h in step.h alloc.h; do [ -f "$D$includedir/plateau/$h" ] || fail "header $h not installed"; done
[ -f "$D$libdir/pkgconfig/plateau.pc" ] || fail "plateau.pc not installed"

# --- headers alone, as C11 and as C++ ---
for h in step.h alloc.h; do
    printf '#include <plateau/%s>\nint main(void) { return 0; }\n' "$h" >"$work/h.c"
    cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$D$includedir" -c "$work/h.c" -o "$work/h.o" 2>"$work/hc.txt" ||
        fail "$h does not compile alone as C11"
    c++ -x c++ -Wall -Wextra -Werror -I"$D$includedir" -c "$work/h.c" -o "$work/h.o" 2>"$work/hcxx.txt" ||
        fail "$h does not compile as C++"
done

# --- a trainer built with pkg-config from the DESTDIR ---
export PKG_CONFIG_PATH=$D$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D
flags=$(pkg-config --cflags --libs plateau) || fail "pkg-config plateau"
cc -std=c11 -Wall -Wextra -o "$work/trainer" "$src/trainer.c" $flags 2>"$work/cc.txt" || fail "cc with pkg-config"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
export LD_LIBRARY_PATH=$D$libdir
"$work/trainer" 3 >"$work/untraced.txt" 2>&1 || fail "the trainer untraced"
grep -qx 'preload=' "$work/untraced.txt" || fail "untraced run preloaded something"

# plateau run [from BIN] [LIBDIR expected to hold the preload] [DATADIR expected to hold the bootstrap] [run dir]
traced() {
    local p=$1 lib=$2 data=$3 out=$4
    (cd "$work" && "$p" run -o "$out" --no-report -- "$work/trainer" 12) >"$work/$out.txt" 2>&1 ||
        fail "plateau run from $p"
    grep -qx "preload=$(realpath "$lib")/libplateau_preload.so" "$work/$out.txt" ||
        fail "plateau run from $p did not preload $lib/libplateau_preload.so"
    grep -q "^PYTHONPATH=$(realpath "$data")/plateau/python" "$work/$out.txt" ||
        fail "plateau run from $p did not find its Python bootstrap in $data/plateau/python"
    "$p" report "$work/$out" --json "$work/$out.json" >"$work/$out-report.txt" 2>&1 || fail "report $out"
    python3 - "$work/$out.json" <<'PY' || fail "steps of the pkg-config trainer not recorded ($out)"
import json, sys
d = json.load(open(sys.argv[1]))
procs = d["run"]["processes"]
assert len(procs) == 1 and procs[0]["steps"] == 12, procs
PY
}
traced "$P" "$D$libdir" "$D$datadir" run-destdir

# --- the CMake package builds the same trainer ---
mkdir -p "$work/cm"
cat >"$work/cm/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.13)
project(trainer C)
find_package(plateau 0.1 REQUIRED)
add_executable(trainer_cmake "$src/trainer.c")
target_link_libraries(trainer_cmake PRIVATE plateau::plateau)
CM
cmake -S "$work/cm" -B "$work/cm/b" -DCMAKE_PREFIX_PATH="$D$prefix" >"$work/cmake.txt" 2>&1 || fail "cmake configure"
cmake --build "$work/cm/b" >>"$work/cmake.txt" 2>&1 || fail "cmake build"
"$work/cm/b/trainer_cmake" 2 >"$work/cmake-run.txt" 2>&1 || fail "the CMake-built trainer"
grep -q 'trainer: 2 steps' "$work/cmake-run.txt" || fail "CMake-built trainer output"

# --- man pages: plateau and each command, rendered cleanly, naming every option of its --help ---
man1=$D$mandir/man1
cmds=$("$P" --help | sed -n 's/^  \([a-z]*\)  .*/\1/p' | grep -vx help)
# the options a command's --help defines: option lines and the synopsis's [--option ...], not words in prose
opts_of() { "$P" "$1" --help | grep -oE '(^  |\[)--?[a-z][a-z-]*' | sed 's/^[[ ]*//' | sort -u; }
# those with a line of their own (described), which the man page's OPTIONS section must hold
described_of() { "$P" "$1" --help | grep -oE '^  --?[a-z][a-z-]*' | sed 's/^ *//' | sort -u; }
[ -n "$cmds" ] || fail "no commands in plateau --help"
for page in plateau $(for c in $cmds; do echo "plateau-$c"; done); do
    f=$man1/$page.1
    [ -f "$f" ] || fail "no man page $page.1"
    warn=$(groff -man -Tascii -ww -z "$f" 2>&1) || fail "groff $page.1"
    [ -z "$warn" ] || fail "groff warns on $page.1: $warn"
done
for c in $cmds; do
    groff -man -Tascii "$man1/plateau-$c.1" 2>/dev/null | sed 's/.\x08//g' >"$work/man-$c.txt"
    sed -n '/^OPTIONS/,/^SEE ALSO/p' "$work/man-$c.txt" >"$work/man-$c-options.txt"
    for o in $(described_of "$c"); do
        grep -qE -- "^ +$o( |,|\$)" "$work/man-$c-options.txt" || fail "plateau-$c.1's OPTIONS lacks $o"
    done
    for o in $(opts_of "$c"); do
        grep -q -- "$o" "$work/man-$c.txt" || fail "plateau-$c.1 lacks $o"
    done
    grep -q "^NAME" "$work/man-$c.txt" && grep -q "plateau-$c" "$work/man-$c.txt" || fail "plateau-$c.1 NAME"
done
groff -man -Tascii "$man1/plateau.1" 2>/dev/null | sed 's/.\x08//g' >"$work/man-plateau.txt"
for c in $cmds; do grep -q "plateau-$c(1)" "$work/man-plateau.txt" || fail "plateau.1 does not refer to plateau-$c"; done

# --- bash completion ---
comp=$D$datadir/bash-completion/completions/plateau
[ -f "$comp" ] || fail "no bash completion"
bash -n "$comp" || fail "the completion does not parse"
complete_words() {
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _plateau
             printf "%s\n" "${COMPREPLY[@]}"' sh "$comp" "$@"
}
[ "$(complete_words plateau re | sort | tr '\n' ' ')" = "replay report " ] || fail "completion of 're'"
[ "$(complete_words plateau run --host-allocator j)" = jemalloc ] || fail "completion of --host-allocator"
complete_words plateau report --metric heap. | grep -qx heap.count || fail "completion of --metric"
for c in $cmds; do
    got=$(complete_words plateau "$c" -)
    for o in $(opts_of "$c"); do
        echo "$got" | grep -qx -- "$o" || fail "completion of 'plateau $c --' lacks $o"
    done
done

# --- the installed tree moved elsewhere still finds its own preload and libraries ---
mv "$D$prefix" "$work/moved"
moved_bin=$work/moved/${bindir#"$prefix"/} moved_lib=$work/moved/${libdir#"$prefix"/}
moved_data=$work/moved/${datadir#"$prefix"/}
export LD_LIBRARY_PATH=$moved_lib
traced "$moved_bin/plateau" "$moved_lib" "$moved_data" run-moved
echo "ok: install from a DESTDIR and a moved copy"
