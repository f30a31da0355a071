#!/bin/sh
# The releases of one node's SGLang service: what was live (the venv link's target, the
# unit, the env file), recorded whole so that a rollback restores exactly that.
#
#   release.sh look|seed|promote|record|restore
#
# Inputs (environment; tasks/operations/release.py sets them from the plan):
#   RELEASES  the records' directory (<venv root>/releases, root's, 0700; made here,
#             never its parent: no venv root, no record)
#   VENV      the live venv path (a link to venvs/<name>, or a hand-built directory)
#   VENVS     where the venvs live (venvs/)
#   UNIT      the unit file
#   ENV_FILE  the service env file (it holds the operator's secrets)
#
# A record is a directory RELEASES/<digest>/ (venv: the link's target, or "dir" for a
# hand-built venv at VENV; unit, env: copies, 0600; stat: their modes and owners), named
# by the digest of what it holds and written whole (built under a temporary name, then
# renamed). RELEASES/current names the record of what the service was last started
# with; RELEASES/previous the one before it (the rollback). Both are links, swapped
# atomically; records no link names are removed.
#
#   look     print current=, live=, previous=, previous_venv=, previous_problem=
#            (digests and names only: never a file's content)
#   seed     no current record yet and a unit is there: record what is live as current
#            (the first deploy of a node deployed before releases were recorded)
#   promote  before a restart: the current record becomes previous, unless it is what
#            is live now (nothing to go back to then)
#   record   after a (re)start: what is live becomes current
#   restore  the rollback: previous is made live (venv link, unit, env file) and current;
#            previous is gone (a second rollback finds nothing to go back to). Refused
#            (exit 3, one line on stderr, nothing changed) when there is nothing to go
#            back to or its venv is missing or incomplete.
set -eu
umask 077
log() { printf 'release: %s\n' "$*"; }

# The digest of a triple: the venv's target, then the unit's and the env file's sha256.
triple_digest() {  # venv-target unit-file env-file
    {
        printf 'venv %s\n' "$1"
        if [ -f "$2" ]; then sha256sum < "$2"; else echo none; fi
        if [ -f "$3" ]; then sha256sum < "$3"; else echo none; fi
    } | sha256sum | cut -c1-16
}

live_venv() {
    if [ -L "$VENV" ]; then readlink "$VENV"; elif [ -d "$VENV" ]; then echo dir; else echo none; fi
}

live_digest() { triple_digest "$(live_venv)" "$UNIT" "$ENV_FILE"; }

# The record a link names, "" when none (or not a complete record).
named() {
    [ -L "$RELEASES/$1" ] || return 0
    name=$(readlink "$RELEASES/$1")
    if [ -f "$RELEASES/$name/digest" ]; then echo "$name"; fi
}

# The records' directory, made (0700, root's) inside the venv root and never above it:
# this script runs under umask 077, and a venv root it made would be 0700, closing the
# service user out of its venv (the venv step makes the root with its mode from
# bringup/layout.py LAYOUT_DIRECTORIES). No venv root yet (a bare node): nothing was
# live, so there is nothing to record; the step says so and writes nothing.
releases_dir() {
    if [ ! -d "${RELEASES%/*}" ]; then
        log "no venv root ${RELEASES%/*} yet: no release recorded"
        exit 0
    fi
    if [ -L "$RELEASES" ] || { [ -e "$RELEASES" ] && [ ! -d "$RELEASES" ]; }; then
        echo "release: $RELEASES is a link or a file, not root's directory: move it away" >&2
        exit 1
    fi
    [ -d "$RELEASES" ] || mkdir -m 0700 -- "$RELEASES"
    chown root:root "$RELEASES"
    chmod 0700 "$RELEASES"
}

# Write a record of (venv, unit, env file) whole; print its name.
make_record() {  # venv-target unit-file env-file
    digest=$(triple_digest "$1" "$2" "$3")
    if [ -f "$RELEASES/$digest/digest" ]; then echo "$digest"; return; fi
    tmp=$RELEASES/.new-$digest-$$
    rm -rf "$tmp"
    mkdir -m 0700 "$tmp"
    printf '%s\n' "$1" > "$tmp/venv"
    : > "$tmp/stat"
    for part in unit env; do
        if [ "$part" = unit ]; then src=$2; else src=$3; fi
        [ -f "$src" ] || continue
        cp -- "$src" "$tmp/$part"
        printf '%s %s\n' "$part" "$(stat -c '%a %U %G' -- "$src")" >> "$tmp/stat"
    done
    chmod 0600 "$tmp"/*
    printf '%s\n' "$digest" > "$tmp/digest"
    chmod 0600 "$tmp/digest"
    rm -rf "${RELEASES:?}/$digest"
    mv -T "$tmp" "$RELEASES/$digest"
    echo "$digest"
}

point() {  # link record
    ln -sfn "$2" "$RELEASES/$1.new"
    mv -T "$RELEASES/$1.new" "$RELEASES/$1"
}

# Records no link names (and temporaries a killed run left) go.
tidy() {
    keep_current=$(named current)
    keep_previous=$(named previous)
    for dir in "$RELEASES"/* "$RELEASES"/.new-*; do
        [ -e "$dir" ] || continue
        name=${dir##*/}
        case $name in current|previous) continue ;; "$keep_current"|"$keep_previous") [ -n "$name" ] && continue ;; esac
        rm -rf -- "$dir"
    done
}

# Why the venv a record names cannot be made live ("" when it can).
venv_problem() {  # target
    case $1 in
        dir) [ -d "$VENV" ] && [ ! -L "$VENV" ] && return 0
             echo "the hand-built venv it ran is no longer at $VENV"; return 0 ;;
        none) echo "it has no venv"; return 0 ;;
        venvs/*) ;;
        *) echo "its venv $1 is not under $VENVS"; return 0 ;;
    esac
    dir=$VENVS/${1#venvs/}
    if [ ! -d "$dir" ] || [ -L "$dir" ]; then echo "its venv $dir is missing"; return 0; fi
    if [ ! -x "$dir/bin/python" ]; then echo "its venv $dir has no bin/python"; return 0; fi
    case ${1#venvs/} in
        adopted-*) ;;
        *) [ "$(cat "$dir/.complete" 2>/dev/null)" = "${1#venvs/}" ] || { echo "its venv $dir is incomplete (no .complete)"; return 0; } ;;
    esac
}

previous_problem() {
    previous=$(named previous)
    if [ -z "$previous" ]; then echo "no previous release recorded"; return 0; fi
    [ -f "$RELEASES/$previous/unit" ] || { echo "the previous release has no unit"; return 0; }
    venv_problem "$(cat "$RELEASES/$previous/venv")"
}

# Put a record's copy of a file in place whole, with the mode and owner it had.
restore_file() {  # part dest
    src=$RELEASES/$record/$1
    if [ ! -f "$src" ]; then rm -f -- "$2"; return; fi
    set -- "$1" "$2" $(sed -n "s/^$1 //p" "$RELEASES/$record/stat")
    tmp=${2%/*}/.${2##*/}.release-$$
    rm -f -- "$tmp"
    install -m "${3:-600}" -o "${4:-root}" -g "${5:-root}" -- "$src" "$tmp"
    mv -f -- "$tmp" "$2"
}

case ${1:-} in
    look)
        [ -d "$RELEASES" ] && [ ! -L "$RELEASES" ] || RELEASES=/nonexistent
        current=$(named current)
        previous=$(named previous)
        echo "current=$current"
        echo "live=$(live_digest)"
        echo "previous=$previous"
        echo "previous_venv=$( [ -n "$previous" ] && cat "$RELEASES/$previous/venv" || true)"
        echo "previous_problem=$(previous_problem)"
        ;;
    seed)
        releases_dir
        if [ -n "$(named current)" ]; then log "current release $(named current) kept"; exit 0; fi
        if [ ! -f "$UNIT" ]; then log "nothing live yet: no release recorded"; exit 0; fi
        point current "$(make_record "$(live_venv)" "$UNIT" "$ENV_FILE")"
        log "recorded what is live as release $(named current)"
        tidy
        ;;
    promote)
        releases_dir
        current=$(named current)
        if [ -z "$current" ]; then log "no release was live before: nothing to go back to"; exit 0; fi
        if [ "$current" = "$(live_digest)" ]; then log "release $current is still live: previous kept"; exit 0; fi
        record=$current
        venv=$(cat "$RELEASES/$current/venv")
        # A hand-built venv build-venv.sh has since adopted: the record names it there.
        if [ "$venv" = dir ] && [ -L "$VENV" ]; then
            adopted=$(readlink "$VENVS/previous" 2>/dev/null || true)
            case $adopted in adopted-*)
                record=$(make_record "venvs/$adopted" "$RELEASES/$current/unit" "$RELEASES/$current/env")
                # The copies' modes and owners are the live files' of then, not the copies'.
                cp -- "$RELEASES/$current/stat" "$RELEASES/$record/stat" ;;
            esac
        fi
        point previous "$record"
        log "release $record (venv $(cat "$RELEASES/$record/venv")) is the rollback"
        tidy
        ;;
    record)
        releases_dir
        live=$(live_digest)
        if [ "$(named current)" = "$live" ]; then log "release $live is live"; exit 0; fi
        point current "$(make_record "$(live_venv)" "$UNIT" "$ENV_FILE")"
        log "release $(named current) is live"
        tidy
        ;;
    restore)
        problem=$( [ -d "$RELEASES" ] && [ ! -L "$RELEASES" ] && previous_problem || echo "no previous release recorded")
        if [ -n "$problem" ]; then echo "$problem" >&2; exit 3; fi
        record=$(named previous)
        venv=$(cat "$RELEASES/$record/venv")
        if [ "$venv" != dir ]; then
            ln -sfn "$venv" "$VENV.release-new"
            mv -T "$VENV.release-new" "$VENV"
        fi
        restore_file unit "$UNIT"
        restore_file env "$ENV_FILE"
        point current "$record"
        rm -f -- "$RELEASES/previous"
        log "back on release $record: $VENV -> $venv, with its unit and env file"
        tidy
        ;;
    *)
        echo "usage: release.sh look|seed|promote|record|restore" >&2
        exit 2
        ;;
esac
