#!/bin/sh
# Build the SGLang venv from a lock into its own directory, then switch the live
# link to it atomically (a symlink swap): an interrupted build never touches the
# live venv, and the next run starts that directory again from scratch.
#
#   build-venv.sh LOCK DIGEST LINK OWNER INSTALLER UV_LOCK [INDEX_OPTION...]
#
# LOCK      the lock (pins with hashes) on the node
# DIGEST    its digest: names the venv directory and marks it complete
# LINK      the live venv path (a symlink to <dirname LINK>/venvs/<digest>)
# OWNER     user that owns the venv
# INSTALLER uv or pip; uv is bootstrapped from UV_LOCK and falls back to pip
# INDEX_OPTION  --index-url/--extra-index-url/--find-links/--no-index, as pip and uv take them
set -eu
lock=$1 digest=$2 link=$3 owner=$4 installer=$5 uv_lock=$6
shift 6
root=$(dirname "$link")
target=$root/venvs/$digest
tools=$root/tools
log() { printf 'build-venv: %s\n' "$*"; }

install -d -m 0755 -o "$owner" -g "$owner" "$root/venvs" "$root/cache"
# Build as the owner, from a directory and with a HOME the owner can read.
cd /
as_owner() { runuser -u "$owner" -- env HOME="$(getent passwd "$owner" | cut -d: -f6)" "$@"; }
if [ -f "$target/.complete" ] && [ "$(cat "$target/.complete")" = "$digest" ]; then
    log "venv $digest already complete"
else
    # Whatever is there is a build that did not finish.
    rm -rf "$target"
    start=$(date +%s)
    if [ "$installer" = uv ] && [ ! -x "$tools/bin/uv" ]; then
        rm -rf "$tools"
        if python3 -m venv "$tools" && "$tools/bin/pip" install -q --require-hashes --no-deps "$@" -r "$uv_lock"; then
            log "uv bootstrapped into $tools"
        else
            log "uv is not available from the configured index; falling back to pip"
            rm -rf "$tools"
            installer=pip
        fi
    fi
    if [ "$installer" = uv ]; then
        as_owner UV_CACHE_DIR="$root/cache/uv" "$tools/bin/uv" venv -q --python /usr/bin/python3 "$target"
        as_owner UV_CACHE_DIR="$root/cache/uv" "$tools/bin/uv" pip sync -q \
            --python "$target/bin/python" --require-hashes "$@" "$lock"
    else
        as_owner python3 -m venv "$target"
        as_owner PIP_CACHE_DIR="$root/cache/pip" "$target/bin/pip" install -q \
            --disable-pip-version-check --require-hashes --no-deps "$@" -r "$lock"
    fi
    printf '%s\n' "$digest" > "$target/.complete.tmp"
    mv -f "$target/.complete.tmp" "$target/.complete"
    chown "$owner:$owner" "$target/.complete"
    log "venv $digest built with $installer in $(( $(date +%s) - start ))s"
fi
ln -sfn "venvs/$digest" "$link.new"
mv -T "$link.new" "$link"
log "$link -> venvs/$digest"
# Keep the live venv and the one before it (rollback); drop older ones.
ls -1t "$root/venvs" | tail -n +3 | while read -r old; do
    [ "$old" = "$digest" ] || rm -rf "$root/venvs/$old"
done
