#!/bin/bash
# Cold build by `xtask kernel` (a fresh cache) against plain `make -j2` on the same .config, per
# arch; the figures in BENCHMARKS.md. Needs the default kernels built once (for their .config)
# and about 20 minutes. Usage: bash xtask/bench/cold-build.sh [x86_64 arm64]
set -eu
cd "$(dirname "$0")/../.."
work=${WORK:-/tmp/xtask-bench-cold}
mkdir -p "$work"
src="$work/plain-src"
[ -f "$src/Makefile" ] || { mkdir -p "$src"; tar -xf /usr/src/linux-source-6.12.tar.xz -C "$src" --strip-components=1; }
cargo build -q -p xtask
[ $# -gt 0 ] || set -- x86_64 arm64
for arch in "$@"; do
  case $arch in
    x86_64) vars="ARCH=x86"; target=bzImage ;;
    arm64) vars="ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-"; target=Image ;;
  esac
  image=$(target/debug/xtask kernel --arch "$arch" 2>/dev/null | awk '{print $2}')
  out="$work/plain-$arch"; rm -rf "$out"; mkdir -p "$out"; cp "$(dirname "$image")/config" "$out/.config"
  make -s -C "$src" O="$out" $vars olddefconfig
  sync; sleep 5
  /usr/bin/time -f "$arch plain make -j2 $target: wall %e s, user %U s" make -s -C "$src" O="$out" $vars -j2 $target >/dev/null
  rm -rf "$work/cache"; sync; sleep 5
  /usr/bin/time -f "$arch xtask kernel, empty cache: wall %e s, user %U s" \
    env XTASK_CACHE_DIR="$work/cache" target/debug/xtask kernel --arch "$arch" >/dev/null 2>"$work/xtask-$arch.log"
  tail -1 "$work/xtask-$arch.log"
  python3 -c "import json,glob,sys; m=json.load(open(glob.glob(sys.argv[1])[0])); print('$arch phases', {k: round(v, 1) for k, v in m['durations'].items()})" \
    "$work/cache/kernels/$arch/*/metadata.json"
  cmp "$out/.config" "$work"/cache/kernels/$arch/*/config && echo "$arch: same .config"
done
