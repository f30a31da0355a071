# What the model section says of a hub cache entry's snapshot (docs/facts.md
# "model.snapshot"; bringup/plan/model_source.py entry_partial decides), run as the
# cache's reader (the service user, else nobody: root reads nothing of another user's
# cache), the record never read through a link, every count bounded. huggingface_hub
# (file_download.py) writes refs/main and the small files before the weights and
# downloads each blob as blobs/<etag>.incomplete, renamed when whole; the fetch
# (tasks/operations/model.py) writes .gpu-bringup-complete after hf download exits 0:
# repo=, revision=, then file=<path> for each file of the snapshot; and leaves
# .gpu-bringup-fetching there while it runs (a fetch killed before its end leaves it).
# shellcheck disable=SC2016
SNAPSHOT_STATE='entry=$1 snap=$1/snapshots/$2 record=$1/.gpu-bringup-complete
{ [ -d "$snap" ] && [ ! -L "$snap" ] && cd "$snap" && timeout 20 find . -mindepth 1 \( -type f -o -type l \) -print 2>/dev/null \
    | head -n 10000; } | {
    files=0 weights=0
    while IFS= read -r name; do
        [ -e "$snap/$name" ] || continue
        files=$((files + 1))
        case $name in *.safetensors | *.bin | *.pt | *.pth | *.gguf | *.h5 | *.msgpack | *.ckpt) weights=$((weights + 1)) ;; esac
    done
    printf "snapshot_files=%s\nsnapshot_weights=%s\n" "$files" "$weights"
}
# A blob still downloading: <etag>.incomplete (1.33.0: <etag>.<random>.incomplete, left
# behind by a killed process), counted while <etag> itself is not there.
timeout 20 find "$entry/blobs" -mindepth 1 -maxdepth 1 -name "*.incomplete" -print 2>/dev/null | head -n 1000 | {
    incomplete=0
    while IFS= read -r partial; do
        name=${partial##*/}
        [ -e "$entry/blobs/${name%%.*}" ] || incomplete=$((incomplete + 1))
    done
    printf "snapshot_incomplete=%s\n" "$incomplete"
}
# The shards a weights index at the top of the snapshot (model.safetensors.index.json,
# pytorch_model.bin.index.json) names and the snapshot lacks: a download stopped between two
# shards (SGLang downloading at its start, an operator) leaves no .incomplete and no record.
# With a safetensors index, a .bin index is not read: the loaders take safetensors then
# (SGLang 0.5.23 weight_utils), and a download of *.json and *.safetensors is whole.
shards=0 indexes=0 safetensors=
for index in "$snap"/*.safetensors.index.json; do [ -f "$index" ] && safetensors=yes; done
for index in "$snap"/*.index.json; do
    case $index in *.bin.index.json) [ -z "$safetensors" ] || continue ;; esac
    [ -f "$index" ] && [ "$indexes" -lt 8 ] || continue
    indexes=$((indexes + 1))
    lacking=$(timeout 5 head -c 4194304 -- "$index" 2>/dev/null | grep -oE "\"[^\"/]+[.](safetensors|bin)\"" \
        | LC_ALL=C sort -u | head -n 10000 | {
        lacking=0
        while IFS= read -r quoted; do name=${quoted#?}; [ -e "$snap/${name%?}" ] || lacking=$((lacking + 1)); done
        echo "$lacking"; })
    shards=$((shards + ${lacking:-0}))
done
printf "snapshot_shards_missing=%s\n" "$shards"
if [ -e "$entry/.gpu-bringup-fetching" ] || [ -L "$entry/.gpu-bringup-fetching" ]; then
    echo snapshot_fetching=yes
else
    echo snapshot_fetching=no
fi
if [ -L "$record" ] || { [ -e "$record" ] && [ ! -f "$record" ]; }; then echo record=refused; exit 0; fi
[ -e "$record" ] || { echo record=none; exit 0; }
text=$(timeout 10 head -c 262145 -- "$record") || { echo record=refused; exit 0; }
# Cut at 256 KiB: the line the cut falls in is left out, not counted missing (LC_ALL=C: bytes).
nl=$(printf "\nx") nl=${nl%x}
[ "${#text}" -le 262144 ] || text=${text%"$nl"*}
listed=0 missing=0 repo= revision=
while IFS= read -r line; do
    case $line in
        repo=*) repo=${line#repo=} ;;
        revision=*) revision=${line#revision=} ;;
        file=*) listed=$((listed + 1)) name=${line#file=}
            case /$name/ in */../* | //*) missing=$((missing + 1)) ;; *) [ -e "$snap/$name" ] || missing=$((missing + 1)) ;; esac ;;
    esac
done <<RECORD
$text
RECORD
# The reader wrote them: only the characters of a hub id and a commit go out (a line separator
# of the parser, such as \r or \034, would pass for a key of this section).
case $repo in *[!A-Za-z0-9._/-]*) repo= ;; esac
case $revision in *[!0-9a-f]*) revision= ;; esac
printf "record=present\nrecord_repo=%.200s\nrecord_revision=%.64s\nrecord_files=%s\nrecord_missing=%s\n" \
    "$repo" "$revision" "$listed" "$missing"'

snapshot_lines() {
    # What SNAPSHOT_STATE printed, held to its own lines and their shapes (4 KiB at most): it
    # runs as the cache's reader, whose other processes may trace it and print what they like.
    head -c 4096 | while IFS= read -r sl_line; do
        case $sl_line in
            snapshot_files=* | snapshot_weights=* | snapshot_incomplete=* | snapshot_shards_missing=* | record_files=* \
                | record_missing=*) case ${sl_line#*=} in "" | *[!0-9]*) ;; *) printf '%s\n' "$sl_line" ;; esac ;;
            snapshot_fetching=yes | snapshot_fetching=no | record=none | record=present | record=refused)
                printf '%s\n' "$sl_line" ;;
            record_repo=* | record_revision=*)
                case ${sl_line#*=} in *[!A-Za-z0-9._/-]*) ;; *) printf '%s\n' "$sl_line" ;; esac ;;
        esac
    done
}

deploy_owned() {
    # deploy_owned RECORD KEY VALUE: whether deploy's record of the env file keys it wrote
    # for a reason of its own says KEY=VALUE (owned_record: root's alone, 4 KiB at most).
    do_text=$(owned_record "$1") || return 1
    case "$NL$do_text$NL" in *"$NL$2=$3$NL"*) return 0 ;; esac
    return 1
}

probe_model() {
    # Where service_model comes from, as SGLang will look for it (docs/facts.md "model";
    # bringup/plan/model_source.py decides): a directory (os.path.isdir, as SGLang 0.5.23
    # tells a local model from a hub id: sglang/srt/utils/common.py has_hf_quant_config),
    # absolute or under the unit's WorkingDirectory (the service's home); otherwise a hub
    # id, looked up in the service's hub cache (where huggingface_hub puts it:
    # HUB_CACHE_ORDER, bringup/layout.py; ~ is the service's HOME; huggingface_hub 1.33.0
    # file_download.py: models--<org>--<name>/refs/main names the snapshot), and
    # the hub (HF_ENDPOINT, else https://huggingface.co) asked once, bounded, without a
    # token, whether it answers from here. The service's settings: PROBE_MODEL_ENV_<KEY>
    # (service_env's, which deploy writes), else the env file's. Readable by the service
    # user: checked as that user when the account exists (a clean environment), else
    # left to the planner from the owners and modes of each directory on the way.
    [ -n "${PROBE_MODEL:-}" ] || { emit model 127 ""; return; }
    # MODEL_ENV_KEYS (bringup/layout.py, facts/probe_script.py planner_tables); HF_TOKEN only
    # to say whether it is set.
    # shellcheck disable=SC2086
    read_env_file "$PROBE_ENV_FILE" $MODEL_ENV_KEYS HF_TOKEN
    file_offline=${service_env_HF_HUB_OFFLINE-}
    for key in $MODEL_ENV_KEYS; do
        if eval "[ -n \"\${PROBE_MODEL_ENV_$key+set}\" ]"; then
            eval "service_env_$key=\$PROBE_MODEL_ENV_$key"
        fi
    done
    model=$PROBE_MODEL home=$PROBE_SERVICE_HOME
    reader=
    getent passwd "$PROBE_SERVICE_USER" >/dev/null 2>&1 && reader=$PROBE_SERVICE_USER
    case $model in
        /*) place=$model ;;
        *) place=$home/$model ;;
    esac
    token=unset
    [ -n "${service_env_HF_TOKEN:-}" ] && token=set
    unset service_env_HF_TOKEN
    offline=${service_env_HF_HUB_OFFLINE:-${service_env_TRANSFORMERS_OFFLINE:-}}
    # The env file's HF_HUB_OFFLINE is deploy's when its record says it wrote that value
    # (bringup/planned_env.py OWNED_SUFFIX) and service_env does not set it: then it is no
    # reason not to ask the hub (deploy takes it back when the hub answers again).
    offline_by= operator_offline=$offline
    if [ -z "${PROBE_MODEL_ENV_HF_HUB_OFFLINE+set}" ] && [ -n "$file_offline" ] \
            && deploy_owned "$PROBE_ENV_FILE.deploy-owned" HF_HUB_OFFLINE "$file_offline"; then
        offline_by=deploy operator_offline=${service_env_TRANSFORMERS_OFFLINE:-}
    fi
    endpoint=${service_env_HF_ENDPOINT:-https://huggingface.co}
    endpoint=${endpoint%/}
    case $model in
        /*) kind=path ;;
        *) if [ -d "$place" ]; then kind=path; else kind=hub; fi ;;
    esac
    # A user and password in the endpoint's URL are never reported: everything up to its
    # last "@" (a password may hold "/", "?", "#", "@" or a space), as bringup/redact.py
    # VALUE_USERINFO.
    case $endpoint in *://*@*) shown=${endpoint%%://*}://'<redacted>'@${endpoint##*@} ;; *) shown=$endpoint ;; esac
    body="kind=$kind${NL}offline=$offline${NL}offline_by=$offline_by${NL}token=$token${NL}endpoint=$shown"
    if [ "$kind" = path ]; then
        config=$place/config.json
        body="$body${NL}path=$place${NL}dir=$(stat -L -c '%U %a %F' -- "$place" 2>/dev/null)"
    else
        # The first setting of HUB_CACHE_ORDER (bringup/layout.py) that is set, even empty
        # (os.getenv's default applies only to an unset key), joined to its suffix as
        # os.path.join joins them; a relative result is under the service's working
        # directory, its home (snapshot_download resolves the cache so).
        cache=$home/$HUB_CACHE_DEFAULT via=default
        for hub_item in $HUB_CACHE_ORDER; do
            eval "[ -n \"\${service_env_${hub_item%%:*}+set}\" ]" || continue
            eval "hub_setting=\$service_env_${hub_item%%:*}"
            via=${hub_item%%:*} hub_suffix=${hub_item#*:}
            case $hub_setting in
                "") cache=${hub_suffix#/} ;;
                */) cache=$hub_setting${hub_suffix#/} ;;
                *) cache=$hub_setting$hub_suffix ;;
            esac
            break
        done
        case $cache in
            "~"/*) cache=$home/${cache#"~"/} ;;
            "~") cache=$home ;;
            /*) ;;
            *) cache=$home${cache:+/$cache} ;;
        esac
        case $cache in ?*/) cache=${cache%/} ;; esac
        # huggingface_hub's repo_folder_name: "models--" and the id with "/" as "--".
        entry=$cache/models--$(printf '%s' "$model" | sed 's|/|--|g')
        revision=
        # Read as the cache's reader (the service user, else nobody), never through a link,
        # 64 bytes at most: root reads nothing another user can point it at.
        # shellcheck disable=SC2016
        revision=$(as_user "${reader:-nobody}" /bin/sh -c '[ -f "$1" ] && [ ! -L "$1" ] && timeout 5 head -c 64 -- "$1"' \
            sh "$entry/refs/main" 2>/dev/null)
        case $revision in "" | *[!0-9a-f]*) revision= ;; esac
        # There (root sees it) but not read as the reader: the planner says who cannot read it.
        refs=
        [ -z "$revision" ] && { [ -e "$entry/refs/main" ] || [ -L "$entry/refs/main" ]; } && refs=unread
        config=
        [ -n "$revision" ] && config=$entry/snapshots/$revision/config.json
        body="$body${NL}cache=$cache${NL}via=$via${NL}entry=$entry${NL}revision=$revision${NL}refs_main=$refs"
        # Whether the snapshot is whole (SNAPSHOT_STATE), read as the cache's reader.
        [ -n "$revision" ] && body="$body${NL}$(as_user "${reader:-nobody}" /bin/sh -c "$SNAPSHOT_STATE" sh \
            "$entry" "$revision" 2>/dev/null | snapshot_lines)"
    fi
    state=
    [ -n "$config" ] && state=$(stat -L -c '%U %a %F' -- "$config" 2>/dev/null)
    body="$body${NL}config=$state"
    if [ -n "$state" ]; then
        if [ -z "$reader" ]; then
            body="$body${NL}readable=unknown"
        elif as_user "$reader" /bin/sh -c 'test -r "$1" && test -r "${1%/*}" && test -x "${1%/*}"' sh "$config"; then
            body="$body${NL}readable=yes"
        else
            body="$body${NL}readable=no"
        fi
        # Who may read each directory on the way, for a service user not created yet.
        body="$body${NL}$(stat -L -c 'chain=%U %G %a %F|%n' -- "$config" 2>/dev/null)"
        chain=${config%/*}
        while [ -n "$chain" ]; do
            body="$body${NL}$(stat -L -c 'chain=%U %G %a %F|%n' -- "$chain" 2>/dev/null)"
            chain=${chain%/*}
        done
    fi
    # The hub: asked unless the settings make the service offline; one HEAD of the
    # model's config.json, as the service's first request is, no token, no redirect
    # followed, 5 s at most; the system's python, isolated, as root reads nothing of it.
    # The endpoint and the model reach it on its stdin (printf is the shell's own: no
    # process has them in its argv, which ps shows every user); the endpoint's user and
    # password are taken out before it is asked (urllib sends none; it took them for a
    # port: "nonnumeric port: 'PASSWORD@host'") and out of any error text it prints.
    # huggingface_hub's true values (constants.py _is_true: 1, ON, YES, TRUE, any case).
    case $(printf '%s' "$operator_offline" | tr '[:lower:]' '[:upper:]') in 1 | ON | YES | TRUE) asked=no ;; *) asked=yes ;; esac
    if [ "$asked" = yes ] && [ -x /usr/bin/python3 ]; then
        hub=$(printf '%s\n%s\n' "$endpoint" "$model" | as_user "" /usr/bin/python3 -I -c '
import re, sys, urllib.error, urllib.request
class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None
endpoint, model = sys.stdin.read().split("\n")[:2]
found = re.match(r"([A-Za-z][A-Za-z0-9+.-]*://)(.*)@", endpoint)
secrets = []
if found:
    secrets = sorted({found.group(2), *re.split("[:@]", found.group(2))} - {""}, key=len, reverse=True)
    endpoint = found.group(1) + endpoint[found.end():]
def shown(text):
    for secret in secrets:
        text = text.replace(secret, "<redacted>")
    return text
url = endpoint + "/" + model + "/resolve/main/config.json"
try:
    answer = urllib.request.build_opener(Stay).open(urllib.request.Request(url, method="HEAD"), timeout=5)
    print("status=%d" % answer.status)
except urllib.error.HTTPError as error:
    print("status=%d" % error.code)
except Exception as error:
    reason = getattr(error, "reason", error)
    print("error=" + shown(" ".join(str(reason).split()))[:200])
' 2>&1 | head -n 1)
        body="$body${NL}hub_$hub"
    fi
    emit model 0 "$body" "model=$model"
}
