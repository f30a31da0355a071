#!/bin/sh
# State operator-python elsewhere than Ubuntu 22.04: their archives have a final
# CPython >= 3.11 (bringup.platforms), so the sandbox builds none for them.
echo "operator-python is a state of ubuntu2204 nodes only (sandbox/operator_python.py)" >&2
exit 1
