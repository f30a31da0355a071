"""CUDA_HOME and PATH for login shells, non-interactive SSH commands and the service."""

import posixpath

from pyinfra.api import deploy
from pyinfra.operations import files

from tasks.operations.cuda import cuda_alternative

TEMPLATES = "files/templates"
PROFILE = "/etc/profile.d/zz-cuda-home.sh"
# pam_env reads it for every SSH session, interactive or not (Debian and Ubuntu).
PAM_ENVIRONMENT = "/etc/environment"


@deploy("CUDA environment")
def cuda_environment(node, env_file, manage_alternative):
    """
    Make every consumer resolve the plan's toolkit and no other.

    + node: the NodePlan as a dict (``toolkit``, ``env``)
    + env_file: the service's environment file
    + manage_alternative: also point /usr/local/cuda at the toolkit
    """
    home, version = node["toolkit"]["home"], node["toolkit"]["version"]
    files.template(name="CUDA_HOME and PATH for login shells", src=f"{TEMPLATES}/cuda-home.sh.j2",
                   dest=PROFILE, user="root", group="root", mode="0644", home=home, version=version)
    files.line(name="CUDA_HOME for SSH sessions", path=PAM_ENVIRONMENT,
               line=r"^CUDA_HOME=.*$", replace=f"CUDA_HOME={home}")
    files.line(name="PATH for SSH sessions", path=PAM_ENVIRONMENT,
               line=r"^PATH=.*$", replace=f'PATH="{node["session_path"]}"')
    files.directory(name="Service environment directory", path=posixpath.dirname(env_file),
                    user="root", group="root", mode="0755")
    files.template(name="Service environment file", src=f"{TEMPLATES}/service.env.j2", dest=env_file,
                   user="root", group="root", mode="0644", env=node["env"])
    if manage_alternative:
        cuda_alternative(name="Point /usr/local/cuda at the chosen toolkit", home=home)
