"""Before the probe on a host reached through sudo: refuse it in one line when sudo
would ask for a password pyinfra was not given. pyinfra would otherwise stop the run
at its own password prompt (or, with no terminal, fail on the probe's first command)."""

from pyinfra.api.arguments import pop_global_arguments

from facts.sudo import SudoAsks, asks_password


def sudo_refusal(state, host):
    """The one line refusing ``host``, or "" when sudo is not used, has its password
    (``_sudo_password``) or does not ask for one. One sudo as pyinfra runs it (its
    ``_sudo_user``, ``_use_sudo_login``, ``_preserve_sudo_env``), as the SSH user."""
    arguments, _ = pop_global_arguments(state, host, {})
    if not arguments.get("_sudo") or arguments.get("_sudo_password"):
        return ""
    said = host.get_fact(SudoAsks, user=arguments.get("_sudo_user"), login=bool(arguments.get("_use_sudo_login")),
                         preserve_env=bool(arguments.get("_preserve_sudo_env")), _sudo=False)
    if not asks_password(said):
        return ""
    user = host.data.get("ssh_user") or "the SSH user"
    return (f"{host.name}: sudo asks {user} for a password ({said}): set pyinfra's _sudo_password for this host "
            "(its inventory data, or --data _sudo_password=...), or give the user passwordless sudo "
            "(NOPASSWD in its sudoers entry); nothing changed")
