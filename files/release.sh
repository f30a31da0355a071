#!/bin/sh
# The releases of one node's SGLang service: what was live (the venv link's target, the
# unit, the env file), recorded whole so that a rollback restores exactly that.
#
#   release.sh look|seed|promote|record|restore|settle
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
# hand-built venv at VENV; venv_id: that venv directory's identity, "<device> <inode>
# <birth time>", which a rename keeps: the venv step's adoption moves a hand-built venv to
# venvs/adopted-<time>, and the rollback finds it there; unit, env: copies, 0600; stat:
# their modes and owners), named
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
#   restore  the rollback: previous is made live (venv link, unit, env file),
#            all three or none: everything is checked first (the record's copies readable
#            and matching its digest, their owners and groups on the node, the
#            destination directories there and writable), the three are staged beside
#            their destinations, then renamed into place; a rename that fails puts back
#            what was renamed. Exit 3 (one line on stderr, nothing changed): refused, there
#            is nothing to go back to, its venv is missing or incomplete, or a check or a
#            stage failed; exit 4: a rename failed and what was renamed is back (the node
#            is as it was); exit 5: a rename failed and putting back failed too (the line
#            says which files are whose). Killed at any point, a re-run converges.
#   settle   after the rollback's restart: the release restored is current and no longer
#            the rollback (a second rollback finds nothing to go back to); before it, the
#            release restored is live and not started (deploy restarts for it), and a
#            re-run of an interrupted rollback restores and restarts again.
set -eu
umask 077
log() { printf 'release: %s\n' "$*"; }
NO_PREVIOUS="no previous release recorded"

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

# A directory's identity: "<device> <inode> <birth time>" (a rename keeps all three; the
# birth time, "-" where the file system records none, tells a reused inode apart).
dir_id() { stat -c '%d %i %w' -- "$1" 2>/dev/null || true; }

# Whether a directory is the one of a recorded identity: its inode and birth time (a
# reboot may renumber the device: dynamic NVMe or device-mapper minors, a btrfs
# subvolume's anonymous device); the device too where no birth time is recorded.
is_dir_of() {  # dir id
    now=$(dir_id "$1")
    [ -n "$now" ] || return 1
    case $2 in *" -") [ "$now" = "$2" ] ;; *) [ "${now#* }" = "${2#* }" ] ;; esac
}

# The directory a venv target names ("" for none).
venv_dir() {  # target
    case $1 in dir) echo "$VENV" ;; venvs/*) echo "$VENVS/${1#venvs/}" ;; esac
}

# Where the venv a record ran is now: its target when it is still there (the hand-built
# venv at VENV only when it is the same directory), else venvs/<name> of the directory with
# its identity (an adopted venv), else the target as recorded ("gone:dir" for a hand-built
# venv found nowhere).
resolved_venv() {  # record
    target=$(cat "$RELEASES/$1/venv")
    id=$(cat "$RELEASES/$1/venv_id" 2>/dev/null || true)
    case $target in
        dir) if [ -d "$VENV" ] && [ ! -L "$VENV" ] && { [ -z "$id" ] || is_dir_of "$VENV" "$id"; }; then
                 echo dir; return 0
             fi ;;
        venvs/*) if [ -d "$VENVS/${target#venvs/}" ] && [ ! -L "$VENVS/${target#venvs/}" ]; then
                     echo "$target"; return 0
                 fi ;;
        *) echo "$target"; return 0 ;;
    esac
    if [ -n "$id" ]; then
        for dir in "$VENVS"/*; do
            if [ -d "$dir" ] && [ ! -L "$dir" ] && is_dir_of "$dir" "$id"; then
                echo "venvs/${dir##*/}"; return 0
            fi
        done
    fi
    case $target in dir) echo gone:dir ;; *) echo "$target" ;; esac
}

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
    id=$(dir=$(venv_dir "$1"); [ -z "$dir" ] || [ -L "$dir" ] || dir_id "$dir")
    if [ -f "$RELEASES/$digest/digest" ]; then
        # A record written before identities were: the venv's is added (whole).
        if [ ! -f "$RELEASES/$digest/venv_id" ] && [ -n "$id" ]; then
            printf '%s\n' "$id" > "$RELEASES/$digest/.venv_id.new"
            mv -f "$RELEASES/$digest/.venv_id.new" "$RELEASES/$digest/venv_id"
        fi
        echo "$digest"; return
    fi
    tmp=$RELEASES/.new-$digest-$$
    rm -rf "$tmp"
    mkdir -m 0700 "$tmp"
    printf '%s\n' "$1" > "$tmp/venv"
    [ -z "$id" ] || printf '%s\n' "$id" > "$tmp/venv_id"
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
             echo "the hand-built venv it ran is no longer at $VENV nor under $VENVS"; return 0 ;;
        gone:dir) echo "the hand-built venv it ran is no longer at $VENV nor under $VENVS"; return 0 ;;
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
    venv_problem "$(resolved_venv "$previous")"
}

# The record of a release whose venv is now elsewhere (an adopted hand-built venv): the
# same unit and env file, its venv where it is now; the record itself when it has not moved.
record_at() {  # record venv
    if [ "$(cat "$RELEASES/$1/venv")" = "$2" ]; then echo "$1"; return 0; fi
    moved=$(make_record "$2" "$RELEASES/$1/unit" "$RELEASES/$1/env")
    # The copies' modes and owners are the live files' of then, not the copies'.
    cp -- "$RELEASES/$1/stat" "$RELEASES/$moved/stat"
    echo "$moved"
}

# --- restore: check everything, stage, then swap --------------------------------------

# A failed restore's stderr: "state=<unchanged|as-before|mixed>", then its one line.
refuse() { printf 'state=unchanged\n%s\n' "$*" >&2; exit 3; }
stage_of() { echo "${1%/*}/.${1##*/}.release-new"; }
backup_of() { echo "${1%/*}/.${1##*/}.release-old"; }
dest_of() { case $1 in unit) echo "$UNIT" ;; env) echo "$ENV_FILE" ;; venv) echo "$VENV" ;; esac; }
named_as() { case $1 in unit) echo "the unit $UNIT" ;; env) echo "the env file $ENV_FILE" ;; venv) echo "the venv link $VENV" ;; esac; }
exists() { [ -e "$1" ] || [ -L "$1" ]; }
clear_stages() {
    for part in unit env venv; do rm -f -- "$(stage_of "$(dest_of $part)")" "$(backup_of "$(dest_of $part)")"; done
}

# Why ``record`` (its venv at ``venv``) cannot be put in place here ("" when it can).
restore_problem() {  # record venv
    dir=$RELEASES/$1
    for part in venv digest stat unit; do
        [ -f "$dir/$part" ] && [ -r "$dir/$part" ] || { echo "the previous release's record $dir has no readable $part"; return 0; }
    done
    if [ "$(triple_digest "$(cat "$dir/venv")" "$dir/unit" "$dir/env")" != "$1" ]; then
        echo "the previous release's record $dir does not match its digest (a copy changed or is missing)"; return 0
    fi
    for part in unit env; do
        line=$(sed -n "s/^$part //p" "$dir/stat")
        [ -n "$line" ] || continue
        read -r mode owner group <<EOF
$line
EOF
        case $mode in ''|*[!0-7]*) echo "the previous release's record $dir has no mode for its $part"; return 0 ;; esac
        id -u -- "$owner" >/dev/null 2>&1 ||
            { echo "$(named_as $part) of the previous release belongs to user $owner, who no longer exists on this node"; return 0; }
        getent group -- "$group" >/dev/null 2>&1 ||
            { echo "$(named_as $part) of the previous release belongs to group $group, which no longer exists on this node"; return 0; }
    done
    for part in unit env venv; do
        dest=$(dest_of $part)
        case $part in
            env) [ -f "$dir/env" ] || exists "$dest" || continue ;;
            venv) [ "$2" != dir ] || continue
                  if [ -d "$VENV" ] && [ ! -L "$VENV" ]; then
                      echo "$VENV is a directory (a venv built there by hand) where the previous release's venv link goes: move it away"; return 0
                  fi ;;
        esac
        parent=${dest%/*}
        if [ ! -d "$parent" ] || [ -L "$parent" ]; then
            echo "the directory of $(named_as $part), $parent, is missing (or a link)"; return 0
        fi
        if [ "$(stat -c %u -- "$parent")" != "$(id -u)" ] || [ $(( 0$(stat -c %a -- "$parent") & 022 )) -ne 0 ]; then
            echo "the directory of $(named_as $part), $parent, is not root's alone (owner $(stat -c %U -- "$parent"), mode $(stat -c %a -- "$parent"))"; return 0
        fi
        [ -w "$parent" ] || { echo "the directory of $(named_as $part), $parent, is not writable (a read-only file system?)"; return 0; }
        if [ -d "$dest" ] && [ ! -L "$dest" ] && [ $part != venv ]; then echo "$(named_as $part) is a directory"; return 0; fi
    done
}

# Stage a part beside its destination (the record's copy with its mode and owner, or
# nothing when the release had none), and keep what is there aside (a hard link) so that
# it can be put back (the venv link itself, -P: never what it points at).
stage_part() {  # part venv
    dest=$(dest_of "$1")
    if exists "$dest"; then
        err=$(ln -fP -- "$dest" "$(backup_of "$dest")" 2>&1) ||
            refuse "could not keep $(named_as "$1") aside in ${dest%/*}: $err"
    fi
    if [ "$1" = venv ]; then
        err=$(ln -sfn -- "$2" "$(stage_of "$dest")" 2>&1) ||
            refuse "could not stage $(named_as venv) in ${dest%/*}: $err"
        return 0
    fi
    [ -f "$RELEASES/$record/$1" ] || return 0
    read -r mode owner group <<EOF
$(sed -n "s/^$1 //p" "$RELEASES/$record/stat")
EOF
    err=$(install -m "$mode" -o "$owner" -g "$group" -- "$RELEASES/$record/$1" "$(stage_of "$dest")" 2>&1) ||
        refuse "could not stage $(named_as "$1") in ${dest%/*}: $err"
}

# One rename into place (or the removal of a file the release did not have), and its undo.
swap_part() {  # part
    dest=$(dest_of "$1")
    if exists "$(stage_of "$dest")"; then mv -fT -- "$(stage_of "$dest")" "$dest"
    elif exists "$dest"; then rm -f -- "$dest"
    fi
}
put_back() {  # part
    dest=$(dest_of "$1")
    if exists "$(backup_of "$dest")"; then mv -fT -- "$(backup_of "$dest")" "$dest"; else rm -f -- "$dest"; fi
}

# "the unit /etc/...sglang.service and the env file ..." for a list of parts.
listed() {
    text=""
    for part; do text="${text:+$text and }$(named_as "$part")"; done
    echo "$text"
}

case ${1:-} in
    look)
        # What seed would record: a unit under an existing venv root (releases_dir).
        recordable=; [ -d "${RELEASES%/*}" ] && [ -f "$UNIT" ] && recordable=yes
        [ -d "$RELEASES" ] && [ ! -L "$RELEASES" ] || RELEASES=/nonexistent
        current=$(named current)
        previous=$(named previous)
        echo "current=$current"
        echo "live=$(live_digest)"
        echo "previous=$previous"
        echo "previous_venv=$( [ -n "$previous" ] && resolved_venv "$previous" || true)"
        echo "previous_problem=$(previous_problem)"
        echo "recordable=$recordable"
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
        # A hand-built venv build-venv.sh has since adopted: the record names it there (found
        # by its identity; a record without one, by the adoption's venvs/previous).
        if [ "$venv" = dir ] && [ -L "$VENV" ]; then
            moved=$(resolved_venv "$current")
            if [ "$moved" = dir ] && [ ! -f "$RELEASES/$current/venv_id" ]; then
                adopted=$(readlink "$VENVS/previous" 2>/dev/null || true)
                case $adopted in adopted-*) moved=venvs/$adopted ;; esac
            fi
            case $moved in venvs/*) record=$(record_at "$current" "$moved") ;; esac
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
        [ -d "$RELEASES" ] && [ ! -L "$RELEASES" ] || refuse "$NO_PREVIOUS"
        problem=$(previous_problem)
        [ -z "$problem" ] || refuse "$problem"
        record=$(named previous)
        venv=$(resolved_venv "$record")
        # What a killed run left beside the destinations goes first.
        clear_stages
        problem=$(restore_problem "$record" "$venv")
        [ -z "$problem" ] || refuse "$problem"
        # Its venv where it is now (an adopted hand-built venv): a record that says so.
        moved=$(record_at "$record" "$venv") || refuse "could not write the record of release $record in $RELEASES"
        trap clear_stages EXIT
        parts="unit env"
        [ "$venv" = dir ] || parts="$parts venv"
        for part in $parts; do stage_part "$part" "$venv"; done
        swapped=""
        for part in $parts; do
            if ! err=$(swap_part "$part" 2>&1); then
                kept=""
                for done_part in $swapped; do put_back "$done_part" 2>/dev/null || kept="$kept $done_part"; done
                what="could not put $(named_as "$part") of the previous release in place ($err)"
                if [ -z "$kept" ]; then
                    printf 'state=as-before\n%s\n' "$what; ${swapped:+$(listed $swapped) put back: }the node is as it was before the rollback" >&2
                    exit 4
                fi
                failed=$(dest_of "$part")
                # shellcheck disable=SC2086
                printf 'state=mixed\n%s\n' "$what, and could not put back $(listed $kept): the node has $(listed $kept) \
of the previous release with the other files of the release it ran; run the rollback again once ${failed%/*} is writable" >&2
                exit 5
            fi
            swapped="$part $swapped"
        done
        [ "$moved" = "$record" ] || point previous "$moved"
        record=$moved
        # current names what the service was last started with: settle, after the restart.
        log "back on release $record: $VENV -> $venv, with its unit and env file"
        tidy
        ;;
    settle)
        [ -d "$RELEASES" ] && [ ! -L "$RELEASES" ] || exit 0
        previous=$(named previous)
        if [ -n "$previous" ] && [ "$previous" = "$(live_digest)" ]; then
            point current "$previous"
            rm -f -- "$RELEASES/previous"
            log "release $previous restored and restarted: no rollback left"
            tidy
        fi
        ;;
    *)
        echo "usage: release.sh look|seed|promote|record|restore|settle" >&2
        exit 2
        ;;
esac
