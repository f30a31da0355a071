#!/bin/bash
# Venv build time per lock: a bare Debian 12 node and a bare Debian 13 node, each
# deployed through the venv step, one after the other in the same minutes; prints
# build-venv's own figures and the ratio Debian 13 / Debian 12. The nodes' uv caches
# start empty (every wheel from the sandbox's mirror). Nodes vb12/vb13 go at the end.
#   bash bench/venv_per_os.sh
set -u
cd "$(dirname "$0")/.."
PY=.venv/bin/python
logs=$(mktemp -d)
trap '$PY -m sandbox down vb12 vb13 >/dev/null 2>&1; rm -rf "$logs"' EXIT
$PY -m sandbox up vb12 --addr 127.0.0.91 --gpu rtx-pro-6000-x8 >/dev/null
$PY -m sandbox up vb13 --addr 127.0.0.92 --gpu rtx-pro-6000-x8 --os debian13 >/dev/null
declare -A built
for node in vb12 vb13; do
    start=$(date +%s)
    .venv/bin/pyinfra -y --data deploy_steps=repo,toolkit,env,account,venv --data service_enable=false \
        inventory/gpu.py --limit "$node" deploy.py > "$logs/$node" 2>&1
    rc=$?
    built[$node]=$(sed -n 's/.*build-venv: venv [0-9a-f]* built with [a-z]* in \([0-9]*\)s.*/\1/p' "$logs/$node")
    echo "$node: deploy.py rc=$rc $(( $(date +%s) - start )) s;" \
         "$(grep -o 'building venv [0-9a-f]*: [0-9]* pinned packages' "$logs/$node");" \
         "$(grep -o 'Prepared [0-9]* packages in [0-9.a-z]*' "$logs/$node");" \
         "$(grep -o 'Installed [0-9]* packages in [0-9.a-z]*' "$logs/$node"); build-venv ${built[$node]:-?} s"
done
if [ -n "${built[vb12]}" ] && [ -n "${built[vb13]}" ]; then
    python3 -c "print(f'ratio Debian 13 / Debian 12 venv build: {${built[vb13]} / ${built[vb12]}:.2f}')"
fi
