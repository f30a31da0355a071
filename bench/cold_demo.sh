#!/bin/bash
# A first `make demo` as a newcomer meets it: a fresh clone of COMMIT, empty caches
# (XDG_CACHE_HOME a new directory), the whole demo. Prints the wall time, the bytes
# eth0 received, the disk used (at the end and the peak, df every 15 s), and the
# caches' and the node's sizes; then takes the node down and deletes the clone and the
# caches. Needs about 40 GB free; run nothing else meanwhile.
#
#     bench/cold_demo.sh [COMMIT] [NODE] [ADDR]     # default: HEAD cold1 127.0.0.211
set -u
commit=${1:-HEAD}; name=${2:-cold1}; addr=${3:-127.0.0.211}
clone=/var/tmp/gpu-bringup-cold-demo; cache=/var/tmp/gpu-bringup-cold-cache; peak_file=$clone.peak
rm -rf "$clone" "$cache" && git clone -q "$(git rev-parse --show-toplevel)" "$clone" && git -C "$clone" checkout -q "$commit" || exit 1
rx() { awk '/eth0:/{print $2}' /proc/net/dev; }
used() { df --output=used -B1 / | tail -1; }
rx0=$(rx); df0=$(used); t0=$(date +%s); echo "$df0" > "$peak_file"
( while sleep 15; do u=$(used); [ "$u" -gt "$(cat "$peak_file")" ] && echo "$u" > "$peak_file"; done ) &
sampler=$!
(cd "$clone" && XDG_CACHE_HOME="$cache" make demo DEMO_NODE="$name" DEMO_ADDR="$addr") > "$clone.log" 2>&1
rc=$?
t1=$(date +%s); rx1=$(rx); df1=$(used); kill "$sampler"
echo "commit $(git -C "$clone" rev-parse --short HEAD): make demo rc=$rc, $((t1 - t0)) s (log: $clone.log)"
echo "downloaded (eth0): $(( (rx1 - rx0) / 1000000 )) MB"
echo "disk: $(( (df1 - df0) / 1000000 )) MB at the end, $(( ($(cat "$peak_file") - df0) / 1000000 )) MB at the peak"
du -sh "$cache/gpu-bringup" "$clone/.sandbox"
(cd "$clone" && XDG_CACHE_HOME="$cache" make sandbox-down) > /dev/null 2>&1
rm -rf "$clone" "$cache" "$peak_file"
exit $rc
