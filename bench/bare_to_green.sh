#!/bin/bash
# Bare to green per OS, in one run: a bare node of each OS (Debian 12, Ubuntu 22.04,
# Ubuntu 24.04; no field state, the base image and the servers warm), brought up by
# deploy.py with the suites' reduced pre-warm, then the node suite; prints each node's
# seconds for `sandbox up`, deploy.py and the node suite, and the ratio to Debian 12.
# Each node (bg-<os>) goes once measured. Ubuntu 22.04's node carries the operator's
# CPython (the operator-python state: its archive has no final CPython >= 3.11), which
# venv_python names.
#   bash bench/bare_to_green.sh [OS ...]   (default: debian12 ubuntu2204 ubuntu2404)
set -u
cd "$(dirname "$0")/.."
PY=.venv/bin/python
if [ $# -gt 0 ]; then OSES=("$@"); else OSES=(debian12 ubuntu2204 ubuntu2404); fi
NET=${SANDBOX_TEST_NET:-127.0.0}
DATA=(--data prewarm_modules=activation:silu,sglang-activation --data service_model=Qwen/Qwen3-0.6B
      --data service_enable=false)
logs=$(mktemp -d)
nodes=()
trap '$PY -m sandbox down "${nodes[@]}" >/dev/null 2>&1; rm -rf "$logs"' EXIT
$PY -m sandbox.aptrepo serve >/dev/null && $PY -m sandbox.pypimirror serve >/dev/null
declare -A total
octet=94
for os in "${OSES[@]}"; do
    node=bg-$os
    nodes+=("$node")
    state=() data=("${DATA[@]}")
    if [ "$os" = ubuntu2204 ]; then
        state=(--state operator-python) data+=(--data venv_python=/opt/cpython-3.11/bin/python3.11)
    fi
    start=$(date +%s)
    $PY -m sandbox up "$node" --addr "$NET.$octet" --gpu rtx-pro-6000-x8 --os "$os" "${state[@]}" \
        > "$logs/$node.up" 2>&1
    up=$(( $(date +%s) - start ))
    .venv/bin/pyinfra -y "${data[@]}" inventory/gpu.py --limit "$node" deploy.py > "$logs/$node.deploy" 2>&1
    rc=$?
    deployed=$(( $(date +%s) - start - up ))
    .venv/bin/pytest -q -p no:cacheprovider tests/node --inventory inventory/gpu.py --node-limit "$node" \
        ${data[@]/--data/--node-data} > "$logs/$node.suite" 2>&1
    suite_rc=$?
    total[$os]=$(( $(date +%s) - start ))
    echo "$os ($node): up $up s, deploy.py rc=$rc $deployed s, node suite rc=$suite_rc" \
         "$(( total[$os] - up - deployed )) s; bare to green ${total[$os]} s" \
         "($(grep -o 'build-venv: venv [0-9a-f]* built with [a-z]* in [0-9]*s' "$logs/$node.deploy"))"
    [ "$rc" = 0 ] || tail -20 "$logs/$node.deploy"
    $PY -m sandbox down "$node" >/dev/null 2>&1
    octet=$((octet + 1))
done
for os in "${OSES[@]}"; do
    [ "$os" = debian12 ] || [ -z "${total[debian12]:-}" ] || \
        python3 -c "print(f'ratio $os / debian12 bare to green: {${total[$os]} / ${total[debian12]}:.2f}')"
done
