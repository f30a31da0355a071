#!/bin/sh
# State iproute2: the `ip` tool a server image has and the sandbox's minbase image lacks,
# from the distribution's archive as an operator installs it. The serving groups' route
# probe (files/probe.d/route.sh: `ip -j route get`) needs it on a member; on a bridged node
# (python -m sandbox up ... --network bridge) it shows the node's own eth0 and routes.
set -eu
apt-get update
apt-get install -y --no-install-recommends iproute2
# The downloaded .debs are dead weight in the layer.
apt-get clean
