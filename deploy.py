"""Bring GPU nodes to a serving-ready SGLang install.

    pyinfra inventory/gpu.py deploy.py

Every host is validated first (the same report as validate.py); a host whose plan
has blockers gets no change at all, and the output says why.
"""

from tasks.node_plan import planned_host

planned = planned_host("deploy")
