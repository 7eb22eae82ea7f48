#!/bin/bash
# machine-meta.sh: this machine in the KEY=VALUE lines of the results pages'
# meta files (scripts/results_page.py reads them): cpu, cores, memory,
# kernel, thp.  scripts/results.sh and test/gpu/run-on-device.sh add what
# they know besides (MPI, UCX, nexar, GPU).
thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
echo "cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)"
echo "cores=$(nproc)"
echo "memory=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "kernel=$(uname -sr)"
echo "thp=${thp:-unknown}"
