"""The service user and the SGLang venv, built from the pinned lock."""

import posixpath

from pyinfra.api import deploy
from pyinfra.operations import apt, files, server

from tasks.operations.sglang import LIBEXEC, index_options, venv_from_lock

UV_LOCK = "files/locks/uv-cp311-x86_64.txt"


def service_home(config):
    """The service user's home: beside its cache, never a login home."""
    return posixpath.join(posixpath.dirname(config.service_cache_dir), "lib", config.service_user)


@deploy("SGLang venv")
def sglang_venv(config):
    """
    Create the service user and build the venv from ``config.venv_lock``.

    + config: the host's ``bringup.config.Config``
    """
    apt.packages(name="Python venv support and the host compiler FlashInfer's JIT uses",
                 packages=["python3-venv", "g++"], no_recommends=True)
    server.user(name=f"Service user {config.service_user}", user=config.service_user, system=True,
                home=service_home(config), create_home=True, shell="/usr/sbin/nologin")
    files.directory(name="Helper scripts directory", path=LIBEXEC, user="root", group="root", mode="0755")
    for script in ("build-venv.sh", "with-service-env", "prewarm.py"):
        files.put(name=f"Install {script}", src=f"files/{script}", dest=f"{LIBEXEC}/{script}",
                  user="root", group="root", mode="0755")
    files.directory(name="Venv root", path=posixpath.dirname(config.venv_path), user="root", group="root",
                    mode="0755")
    files.directory(name="JIT cache root", path=config.service_cache_dir, user=config.service_user,
                    group=config.service_user, mode="0755")
    venv_from_lock(name=f"Build the venv from {config.venv_lock}", lock=config.venv_lock, uv_lock=UV_LOCK,
                   path=config.venv_path, owner=config.service_user, installer=config.venv_installer,
                   sources=index_options(config.venv_index_url, config.venv_extra_index_urls,
                                         config.venv_find_links, config.venv_no_index))
