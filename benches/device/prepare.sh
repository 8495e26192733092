#!/usr/bin/env bash
# Packs what the many-CPU run of the write_overhead bench needs into .dev/ (ignored by git, carried
# to the device machine with the run's `carry: [".dev"]`): a stripped dtrace, the stripped bench
# binary, this machine's bpftrace with every library it loads and the dynamic loader (the device
# machine has no bpftrace and no network), and run.sh, which the device runs:
#
#   bash benches/device/prepare.sh        (here, after `cargo build --release`)
#   device run: N=1000000 ROUNDS=3 WRITERS=2,4,8,16 bash .dev/run.sh     (carry .dev)
#
# The whole tree travels with .dev: keep it under the device's 64 MiB (bpftrace packs to ~46 MB
# with xz -9e, which takes ~3 minutes on two cores; the pack is reused when it exists).
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.dev/' >> .git/info/exclude; }
mkdir -p .dev
cargo build --release --locked -p dtrace-cli --bench write_overhead
bench=$(ls -t target/release/deps/write_overhead-* | grep -v '\.d$' | head -1)
strip -o .dev/write_overhead "$bench"
strip -o .dev/dtrace target/release/dtrace
cp benches/device/run.sh .dev/run.sh
if [ ! -s .dev/bt.tar.xz ]; then
    tmp=$(mktemp -d)
    mkdir -p "$tmp/lib"
    cp /usr/bin/bpftrace "$tmp/"
    ldd /usr/bin/bpftrace | awk '$3 ~ /^\// {print $3}' | xargs -I{} cp -L {} "$tmp/lib/"
    tar cf - -C "$tmp" bpftrace lib | xz -9e -T0 > .dev/bt.tar.xz
    rm -rf "$tmp"
fi
cp -L /lib64/ld-linux-x86-64.so.2 .dev/
du -sh .dev
