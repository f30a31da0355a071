# The apt section: writes apt-source, apt-keyring; facts/sections/apt.py parses them
# (the document's keys: `apt`; docs/facts.md).
probe_apt() {
    # Every apt source file, and each keyring a signed-by names: who may change it (the
    # keyring and each directory above it, "owner mode kind|path" as in probe_paths,
    # without following a link) and, for a regular file, its keys (base64, last line).
    # The plan adopts a found source only when root alone can change its keyring.
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$file" ] && emit apt-source 0 "$(cat "$file")" "file=$file"
    done
    keyrings=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        sed -n -e 's/.*signed-by=\([^] ]*\).*/\1/p' \
            -e 's/^[Ss][Ii][Gg][Nn][Ee][Dd]-[Bb][Yy]:[[:space:]]*\(\/[^[:space:]]*\).*/\1/p' | sort -u)
    set -f  # a keyring path is a word, never a pattern
    for keyring in $keyrings; do
        case $keyring in
            /*) ;;
            *) emit apt-keyring 1 "" "file=$keyring"; continue ;;  # a fingerprint or a relative name
        esac
        chain=$(path_chain "$keyring")
        if [ -f "$keyring" ] && [ ! -L "$keyring" ] && [ -r "$keyring" ] && [ "$(wc -c < "$keyring")" -lt 1048576 ]; then
            emit apt-keyring 0 "$chain
$(base64 -w0 < "$keyring")" "file=$keyring"
        else
            emit apt-keyring 1 "$chain" "file=$keyring"
        fi
    done
    set +f
}
