"""CUDA_HOME and PATH for login shells, non-interactive SSH commands and the service."""

from io import StringIO

from pyinfra.api import deploy
from pyinfra.operations import server

from bringup.layout import CUDA_LINK
from bringup.planned_env import OWNED_SUFFIX, owned_record
from tasks.operations.cuda import cuda_alternative
from tasks.operations.files import directory_if_missing, shared_env_file, whole_file, whole_template

TEMPLATES = "files/templates"
HEADER = "# Managed by gpu-bringup (tasks/cuda_env.py): it sets the keys below; lines of your own stay."
# The service env file holds the operator's secrets (HF_TOKEN...): root writes it, the
# service's group reads it (the pre-warm and the DeepGEMM compile load it as the service
# user, through files/with-service-env; systemd itself reads it as root), nobody else.
# An operator's stricter mode (0600) stays (tasks/operations/files.py kept_mode).
SERVICE_ENV_MODE = "0640"


@deploy("CUDA environment")
def cuda_environment(node):
    """
    Make every consumer resolve the plan's toolkit and no other; returns the
    operations whose change the running service must pick up.

    + node: the NodePlan (``toolkit``, ``session_path``, ``service``, ``layout``)
    """
    home, version, layout = node.toolkit.home, node.toolkit.version, node.layout
    whole_template(name="CUDA_HOME and PATH for login shells", src=f"{TEMPLATES}/cuda-home.sh.j2",
                   dest=layout.profile_script, home=home, version=version)
    # /etc/environment: root:root, 0644 or the stricter mode it has.
    shared_env_file(name="CUDA_HOME and PATH for SSH sessions", path=layout.pam_environment,
                    managed={"CUDA_HOME": home}, header=HEADER, quoted=["PATH"], path_entry=f"{home}/bin",
                    default_path=node.session_path)
    env_dir = layout.directory("env directory")
    directory_if_missing(name="Service environment directory", path=env_dir.path, mode=env_dir.mode)
    # The account step (after this one) creates the user into this group (tasks/service_account.py).
    server.group(name=f"Service group {node.service.user}", group=node.service.user, system=True)
    # What deploy writes for a reason of its own is recorded before the env file holds it,
    # and forgotten only after the env file no longer does: an interruption never leaves
    # deploy's value in the file unrecorded (then read as the operator's and kept forever).
    owned = f"{node.service.env_file}{OWNED_SUFFIX}"
    if node.env_owned or node.env_drop:
        whole_file(name="Env keys deploy owns (recorded first)", src=StringIO(owned_record(
            {**node.env_drop, **node.env_owned})), dest=owned, user="root", group="root", mode="0600")
    env_file = shared_env_file(name="Service environment file", path=node.service.env_file,
                               managed=node.service.env, header=HEADER, user="root", group=node.service.user,
                               mode=SERVICE_ENV_MODE, drop=tuple(node.env_drop))
    if node.env_drop:
        whole_file(name=f"Env keys deploy took back ({', '.join(node.env_drop)})",
                   src=StringIO(owned_record(node.env_owned)), dest=owned, user="root", group="root", mode="0600")
    if node.manage_alternative:
        cuda_alternative(name=f"Point {CUDA_LINK} at the chosen toolkit", home=home)
    return [env_file]
