#!/usr/bin/env bash
# `cargo xtask test` on a fresh machine, as near as a used one gets: what `cargo xtask setup`
# installs is purged (QEMU, the cross compilers, linux-source-6.12, lcov, chromium, postgresql,
# ccache), the apt cache emptied, the Rust targets and virtiofsd removed; then a fresh clone of
# this checkout runs the CI entry point with an empty XTASK_CACHE_DIR and prints its wall time.
# The cargo registry and the Rust toolchain stay. Root only, and it removes packages: it asks for
# --purge-what-setup-installs.
#
#   bash xtask/bench/fresh-machine.sh --purge-what-setup-installs [WORKDIR]   (default /tmp/fresh)
set -euo pipefail
[ "${1:-}" = --purge-what-setup-installs ] || { echo "usage: $0 --purge-what-setup-installs [WORKDIR]" >&2; exit 2; }
work="${2:-/tmp/fresh}"
checkout="$(cd "$(dirname "$0")/../.." && pwd)"
export DEBIAN_FRONTEND=noninteractive
apt-get purge -y -q qemu-system-x86 qemu-system-arm qemu-system-s390x qemu-system-riscv qemu-system-common \
  qemu-system-data gcc-aarch64-linux-gnu gcc-s390x-linux-gnu gcc-riscv64-linux-gnu gcc-arm-linux-gnueabihf \
  libc6-dev-s390x-cross libc6-dev-riscv64-cross libc6-dev-arm64-cross libc6-dev-armhf-cross \
  linux-source-6.12 lcov chromium postgresql postgresql-15 ccache >/dev/null 2>&1 || true
apt-get autoremove --purge -y -q >/dev/null
apt-get clean
rustup target remove x86_64-unknown-linux-musl aarch64-unknown-linux-musl s390x-unknown-linux-gnu \
  riscv64gc-unknown-linux-gnu i686-unknown-linux-musl aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf \
  >/dev/null 2>&1 || true
rm -f "$HOME/.cargo/bin/virtiofsd"
rm -rf "$work" "$work-cache"
git clone -q "$checkout" "$work"
cd "$work"
start=$(date +%s)
status=0
XTASK_CACHE_DIR="$work-cache" .ci/run || status=$?
echo "fresh machine: exit $status, $(( $(date +%s) - start )) s"
exit $status
