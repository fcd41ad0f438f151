#!/bin/sh
# Cross-build test_dlsym_trampoline.c and its two libraries for aarch64 and run them under qemu-aarch64: the
# preload's aarch64 dlsym trampoline (preload/dlsym_trampoline.h) on a machine without an aarch64 CPU.
# Usage: dlsym_trampoline_cross.sh SRC_ROOT. Exit 77 (meson: skipped) when the cross tools are missing
# (Debian packages gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user).
set -eu
src=$1
cc=aarch64-linux-gnu-gcc
qemu=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
sysroot=/usr/aarch64-linux-gnu
if ! command -v "$cc" >/dev/null 2>&1 || [ -z "$qemu" ] || [ ! -d "$sysroot/lib" ]; then
    echo "skipped: needs $cc, qemu-aarch64 and $sysroot (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)"
    exit 77
fi
dir=$(mktemp -d /tmp/pl-dlsym-aarch64-XXXXXX)
trap 'rm -rf "$dir"' EXIT
flags="-O2 -Wall -Wextra -Werror -fno-omit-frame-pointer"
$cc $flags -fPIC -shared -fvisibility=hidden -I"$src/preload" -o "$dir/libdlsym_tramp.so" \
    "$src/tests/preload/dlsym_tramp_lib.c" -ldl
$cc $flags -fPIC -shared -o "$dir/libdlsym_tramp_probe2.so" "$src/tests/preload/dlsym_tramp_probe2.c"
$cc $flags -rdynamic -I"$src/common" -o "$dir/test_dlsym_trampoline" "$src/tests/preload/test_dlsym_trampoline.c" \
    -L"$dir" -Wl,--no-as-needed -ldlsym_tramp -ldlsym_tramp_probe2 -ldl
exec "$qemu" -L "$sysroot" -E LD_LIBRARY_PATH="$dir" "$dir/test_dlsym_trampoline"
