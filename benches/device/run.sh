#!/bin/bash
# Runs on the device machine (see prepare.sh): the write_overhead bench, dtrace against bpftrace,
# with 2 to 16 writer threads (as many CPUs busy), after checking that both tracers work there. Output goes
# to $OUT/log.txt too. Knobs: N (writes a writer thread), ROUNDS, WRITERS, CASES, BT (time limit).
D=$PWD/.dev; W=${W:-/usr/local/bin}; mkdir -p $W
exec > >(tee $OUT/log.txt) 2>&1
echo "== machine"; uname -r; nproc; id -u
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug
ls /sys/kernel/btf/vmlinux; ls /sys/kernel/tracing/events/syscalls >/dev/null && echo syscalls-tp-ok
grep -c . /sys/kernel/tracing/available_filter_functions 2>&1 | head -1
echo "== bpftrace"
mkdir -p /tmp/bt && tar xJf $D/bt.tar.xz -C /tmp/bt
printf '#!/bin/sh\nexec %s --library-path /tmp/bt/lib /tmp/bt/bpftrace "$@"\n' "$D/ld-linux-x86-64.so.2" > $W/bpftrace
chmod +x $W/bpftrace; export PATH=$W:$PATH; which bpftrace
bpftrace --version
timeout 30 bpftrace -e 'BEGIN { printf("bt-ok\n"); exit(); }'
echo "== dtrace"
$D/dtrace -V
timeout 20 $D/dtrace -qn 'BEGIN { printf("dt-ok\n"); exit(0); }'
timeout 20 $D/dtrace -l -n fbt::vfs_write:entry
timeout 30 $D/dtrace -qv -n 'syscall::write:entry { @[execname] = count(); }' -c 'dd if=/dev/zero of=/dev/null bs=1 count=1000 status=none' 2>&1 | grep -v "^	\|^$\|Attributes\|Stability"
echo "== bench"
cd /tmp && DTBENCH_DTRACE=$D/dtrace DTBENCH_WRITERS=${WRITERS:-2,4,8,16} DTBENCH_ROUNDS=${ROUNDS:-3} timeout ${BT:-420} $D/write_overhead ${N:-200000} "${CASES:-count by execname|count()|writers|fbt count}"
echo "== end rc=$?"
