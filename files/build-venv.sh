#!/bin/sh
# Build the SGLang venv from a lock into a directory of its own, then switch the live
# link to it atomically (a symlink swap): an interrupted build never touches the live
# venv, and the next run starts that directory again from scratch.
#
#   build-venv.sh [INDEX_OPTION...]
#
# Inputs (environment; the deploy's venv_from_lock operation sets them from the plan):
#   VENV_LINK       the live venv path (a symlink to venvs/<digest>)
#   VENV_DIRS       where the venvs live (venvs/)
#   VENV_DIGEST     the lock's digest: names the venv directory and marks it complete
#   VENV_LOCK       the lock (pins with hashes) on the node
#   VENV_UV_LOCK    the lock uv is bootstrapped from
#   VENV_TOOLS      where uv is bootstrapped: tools/<uv lock digest>/, complete once it
#                   holds .complete (written last); other tool directories are removed
#   VENV_CACHE      the installers' download cache
#   VENV_INSTALLER  uv or pip
#   VENV_PYTHON     the interpreter the venv is built with
#   VENV_TORCH_INFO files/torch_info.py: records torch's arch list inside the venv
#   VENV_RELEASES   the service's release records (files/release.sh): a venv one of
#                   them names is kept, so a rollback always finds it
# INDEX_OPTION: --index-url/--extra-index-url/--find-links/--no-index, as pip and uv take them.
#
# Everything is built and owned by root, read-only to the service: the service user
# (and a compromised server) cannot change code root runs later. Only wheels are
# installed (no sdist build runs as root), each checked against the lock's hashes.
#
# The live venv and the one before it are kept (venvs/previous names the rollback);
# a directory found at VENV_LINK (a hand-built venv) is moved to venvs/adopted-<time>
# and becomes the rollback. An adopted venv is never removed: it is the operator's
# own, built by hand, and no lock can build it again.
set -eu
umask 022
target=$VENV_DIRS/$VENV_DIGEST
log() { printf 'build-venv: %s\n' "$*"; }

# Root builds with VENV_PYTHON (and later runs the venv's python, which loads its
# prefix) only when root may run it (files/root-may-run.sh, installed beside this
# script: it, its links, the directories above them and every file it loads are
# root's alone). Checked before anything is written: a refusal changes nothing.
here=$(dirname -- "$0")
if [ "$(id -u)" = 0 ] && ! sh "$here/root-may-run.sh" "$VENV_PYTHON" interpreter; then
    log "venv_python refused: nothing was built"
    exit 1
fi

cd /
install -d -m 0755 -o root -g root "$VENV_DIRS" "$VENV_CACHE"
# One build at a time on a node: a second deploy, or the re-run of one whose SSH session
# died while its build is still being stopped (files/session-bound), waits here.
exec 9> "$VENV_DIRS/.build.lock"
if ! flock -n 9; then
    log "another venv build holds $VENV_DIRS/.build.lock; waiting up to 120 s for it"
    if ! flock -w 120 9; then
        log "a venv build is still running on this node after 120 s: let it finish, then run deploy again"
        exit 1
    fi
fi
if [ -f "$target/.complete" ] && [ "$(cat "$target/.complete")" = "$VENV_DIGEST" ]; then
    log "venv $VENV_DIGEST already complete"
else
    # Whatever is there is a build that did not finish.
    rm -rf "$target"
    start=$(date +%s)
    log "building venv $VENV_DIGEST: $(grep -c '^[A-Za-z0-9]' "$VENV_LOCK") pinned packages with $VENV_INSTALLER" \
        "(minutes when the download cache is cold, seconds from it)"
    if [ "$VENV_INSTALLER" = uv ]; then
        # uv lives in a directory named by its lock's digest, complete once it holds the
        # marker written last: a new uv lock bootstraps a new uv, and a bootstrap that
        # did not finish is done again, never reused.
        uv_digest=$(sha256sum "$VENV_UV_LOCK" | cut -c1-16)
        tools=$VENV_TOOLS/$uv_digest
        if [ ! -f "$tools/.complete" ] || [ "$(cat "$tools/.complete")" != "$uv_digest" ] || [ ! -x "$tools/bin/uv" ]; then
            rm -rf "$tools"
            install -d -m 0755 -o root -g root "$VENV_TOOLS"
            "$VENV_PYTHON" -m venv "$tools"
            if ! PIP_CACHE_DIR="$VENV_CACHE/pip" "$tools/bin/pip" install -q --disable-pip-version-check \
                    --require-hashes --no-deps --only-binary=:all: "$@" -r "$VENV_UV_LOCK"; then
                rm -rf "$tools"
                rmdir "$VENV_TOOLS" 2>/dev/null || true
                log "uv could not be installed from the configured index with the hashes of $VENV_UV_LOCK;" \
                    "fix the index (venv_index_url, venv_find_links) or set venv_installer=pip"
                exit 1
            fi
            printf '%s\n' "$uv_digest" > "$tools/.complete.tmp"
            mv -f "$tools/.complete.tmp" "$tools/.complete"
            log "uv bootstrapped into $tools"
        fi
        # Older uvs (other lock digests, or the single tools/ venv of earlier releases).
        for old in "$VENV_TOOLS"/* "$VENV_TOOLS"/.[!.]*; do
            [ -e "$old" ] || [ -L "$old" ] || continue
            [ "${old##*/}" = "$uv_digest" ] || rm -rf "$old"
        done
        # The uv kept from an earlier bootstrap, run by root only while root may.
        if [ "$(id -u)" = 0 ] && ! sh "$here/root-may-run.sh" "$tools/bin/uv"; then
            log "the bootstrapped uv in $tools was refused: nothing was built"
            exit 1
        fi
        UV_CACHE_DIR="$VENV_CACHE/uv" "$tools/bin/uv" venv -q --python "$VENV_PYTHON" "$target"
        # uv's own summary lines (resolved, prepared, installed, with times) show the phases.
        UV_CACHE_DIR="$VENV_CACHE/uv" "$tools/bin/uv" pip sync --no-progress --python "$target/bin/python" \
            --require-hashes --no-build --compile-bytecode "$@" "$VENV_LOCK"
        # uv leaves its lock file world-writable (0666); nothing in root's venv may be.
        rm -f "$target/.lock"
    else
        "$VENV_PYTHON" -m venv "$target"
        log "installing with pip (downloads and installs everything in one quiet step)"
        PIP_CACHE_DIR="$VENV_CACHE/pip" "$target/bin/pip" install -q --disable-pip-version-check \
            --require-hashes --no-deps --only-binary=:all: "$@" -r "$VENV_LOCK"
    fi
    # torch's compiled arch list, recorded with the venv it describes: the node probe
    # reads it instead of importing torch (seconds).
    if [ -n "${VENV_TORCH_INFO:-}" ]; then
        if "$target/bin/python" -I "$VENV_TORCH_INFO" --emit-record > "$target/.torch-arch.json.tmp"; then
            mv -f "$target/.torch-arch.json.tmp" "$target/.torch-arch.json"
        else
            rm -f "$target/.torch-arch.json.tmp"
            log "torch does not import in $target: no arch list recorded (validate imports it and reports why)"
        fi
    fi
    # Root writes its marker into a directory only root can write: no link to follow.
    printf '%s\n' "$VENV_DIGEST" > "$target/.complete.tmp"
    mv -f "$target/.complete.tmp" "$target/.complete"
    log "venv $VENV_DIGEST built with $VENV_INSTALLER in $(( $(date +%s) - start ))s"
fi

# The rollback: the venv live until now, by name. A hand-built venv found at VENV_LINK
# is named the rollback before it is moved under venvs/, so from the moment it is there
# the cleanup below keeps it, however a run is interrupted (a re-run finds either the
# directory still at VENV_LINK, or it under venvs/ and named by previous).
set_previous() {
    ln -sfn "$1" "$VENV_DIRS/previous.new"
    mv -T "$VENV_DIRS/previous.new" "$VENV_DIRS/previous"
}
if [ -d "$VENV_LINK" ] && [ ! -L "$VENV_LINK" ]; then
    previous=adopted-$(date -u +%Y%m%dT%H%M%SZ)
    set_previous "$previous"
    mv -T "$VENV_LINK" "$VENV_DIRS/$previous"
    log "kept the venv found at $VENV_LINK as $VENV_DIRS/$previous"
else
    previous=$(readlink "$VENV_LINK" 2>/dev/null | sed -n 's|^venvs/||p')
    if [ -n "$previous" ] && [ "$previous" != "$VENV_DIGEST" ]; then
        set_previous "$previous"
    fi
fi
ln -sfn "venvs/$VENV_DIGEST" "$VENV_LINK.new"
mv -T "$VENV_LINK.new" "$VENV_LINK"
log "$VENV_LINK -> venvs/$VENV_DIGEST"

# Keep the live venv, the rollback, every adopted venv and every venv a release record
# names (the service's rollback, files/release.sh); drop the others.
rollback=$(readlink "$VENV_DIRS/previous" 2>/dev/null || true)
released=" "
for record in "${VENV_RELEASES:-/nonexistent}"/*/venv; do
    [ -f "$record" ] && released="$released$(sed -n 's|^venvs/||p' "$record") "
done
for dir in "$VENV_DIRS"/*; do
    name=${dir##*/}
    case $name in previous|"$VENV_DIGEST"|"$rollback"|adopted-*) continue ;; esac
    case $released in *" $name "*) continue ;; esac
    rm -rf "$dir"
done
