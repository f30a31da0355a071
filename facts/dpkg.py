"""dpkg's own view of unfinished work (an interrupted install)."""

from pyinfra.api import FactBase


class DpkgAudit(FactBase):
    """
    Returns the lines of ``dpkg --audit`` plus any entry of dpkg's update journal:
    empty when no package is half-installed or half-configured and no dpkg run
    stopped halfway.

    .. code:: python

        if host.get_fact(DpkgAudit):
            ...  # an earlier apt run was interrupted
    """

    command = "dpkg --audit 2>&1; ls -A /var/lib/dpkg/updates 2>/dev/null | sed 's/^/journal: /'; true"

    @staticmethod
    def default():
        return []

    def requires_command(self):
        return "dpkg"

    def process(self, output):
        return [line for line in output if line.strip()]
