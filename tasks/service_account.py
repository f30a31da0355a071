"""The service account, the helper scripts and the JIT cache root: what every later
step (venv, pre-warm, service) needs, whether the venv is managed or not."""

from pyinfra.api import deploy
from pyinfra.operations import files, server

from bringup.layout import SERVICE_ACCOUNT_MARK
from tasks.operations.account import service_account_ours
from tasks.operations.files import directory_if_missing, whole_file

HELPER_SOURCES = "files"


@deploy("Service account and helpers")
def service_account(node):
    """
    Create the service user, install the node-side helpers, make the cache root.

    + node: the NodePlan (``layout``, ``service``)
    """
    layout, service = node.layout, node.service
    # Never an account (or a home) deploy did not create: checked again as it runs.
    service_account_ours(name=f"Service user {service.user} is gpu-bringup's own", layout=layout)
    # Its own group, which reads the service env file (tasks/cuda_env.py creates it when
    # the env step runs first; useradd refuses to make a group that exists).
    if not node.runs("env"):
        server.group(name=f"Service group {service.user}", group=service.user, system=True)
    # The mark (GECOS) says the account is ours (bringup/plan/account.py SERVICE_USER_FOREIGN).
    server.user(name=f"Service user {service.user}", user=service.user, group=service.user, system=True,
                home=service.home, create_home=True, shell="/usr/sbin/nologin", comment=SERVICE_ACCOUNT_MARK)
    helpers = layout.directory("helpers directory")
    # Its parents (/usr/local/libexec) 0755 whatever the session's umask; then its owner
    # and mode kept as the layout says.
    directory_if_missing(name="Helper scripts directory's parents", path=helpers.path, mode=helpers.mode, reached=True)
    files.directory(name="Helper scripts directory", path=helpers.path, user=helpers.owner, group=helpers.owner,
                    mode=helpers.mode)
    for script in layout.helpers:
        whole_file(name=f"Install {script}", src=f"{HELPER_SOURCES}/{script}", dest=layout.helper(script),
                   mode="0755")
    cache = layout.directory("service cache")
    directory_if_missing(name="JIT cache root", path=cache.path, user=cache.owner, group=cache.owner,
                         mode=cache.mode, reached=cache.reached)
