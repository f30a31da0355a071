# The route section: writes route-address, route; facts/sections/route.py parses them (the
# document's key: `route`; docs/facts.md).
# Which interface and source address this node reaches an address through (a serving group's
# head: NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME are that interface unless a setting names one),
# only when the control side asks (PROBE_ROUTE_TO: an IP address or a host name, checked by
# bringup/layout.py probe_address before it gets here; empty: nothing runs, nothing is written).
# A host name is resolved as the node resolves it (getent ahosts: its own /etc/hosts and DNS, the
# view the member's SGLang will have), then `ip -j route get` (iproute2's JSON) asks the kernel
# which route it would take; an iproute2 without JSON for routes answers in its text form, which
# the parser reads too. Nothing is sent to the address: the kernel's routing decision alone.
# Both tools run as the other tools do (driver_tool, run_program_within), bounded.
ROUTE_SECONDS=10

probe_route() {
    [ -n "${PROBE_ROUTE_TO:-}" ] || return 0
    # The control side sends only an address or a host name; anything else (an inherited value)
    # is refused here too (rc 64, EX_USAGE: getent exits 2 for a name it cannot resolve), never
    # handed to a program.
    case $PROBE_ROUTE_TO in
        -* | *[!A-Za-z0-9.:-]*)
            emit route-address 64 "" "to=refused"
            return 0 ;;
    esac
    # An IPv6 address has a colon, an IPv4 one only digits and dots; anything else is a name.
    case $PROBE_ROUTE_TO in
        *:*) route_literal=yes ;;
        *[!0-9.]*) route_literal=no ;;
        *) route_literal=yes ;;
    esac
    if [ "$route_literal" = yes ]; then
        route_addr=$PROBE_ROUTE_TO
        emit route-address 0 "$route_addr" "to=$PROBE_ROUTE_TO"
    elif tool=$(driver_tool getent); then
        # The first address of the first line: the one a connect() would try first.
        route_out=$(run_program_within "$ROUTE_SECONDS" "$tool" ahosts "$PROBE_ROUTE_TO" 2>/dev/null); route_rc=$?
        route_addr=${route_out%%"$NL"*}
        route_addr=${route_addr%%[ 	]*}
        emit route-address "$route_rc" "$(printf '%s\n' "$route_addr" | printable)" "to=$PROBE_ROUTE_TO"
        [ "$route_rc" = 0 ] && [ -n "$route_addr" ] || return 0
    else
        emit route-address 127 "" "to=$PROBE_ROUTE_TO"
        return 0
    fi
    case $route_addr in -* | *[!0-9A-Fa-f.:]*) return 0 ;; esac
    if ! tool=$(driver_tool ip); then
        emit route 127 "" "format=none"
        return 0
    fi
    route_out=$(run_program_within "$ROUTE_SECONDS" "$tool" -j route get "$route_addr" 2>&1); route_rc=$?
    case $route_out in
        "["*) emit route "$route_rc" "$(printf '%s\n' "$route_out" | driver_head 20 | printable)" "format=json" ;;
        *)
            route_out=$(run_program_within "$ROUTE_SECONDS" "$tool" route get "$route_addr" 2>&1); route_rc=$?
            emit route "$route_rc" "$(printf '%s\n' "$route_out" | driver_head 20 | printable)" "format=text" ;;
    esac
}
