"""dpkg's own view of unfinished work (an interrupted install)."""

from pyinfra.api import FactBase


class DpkgAudit(FactBase):
    """
    Returns the lines of ``dpkg --audit``: empty when no package is half-installed
    or half-configured.

    .. code:: python

        if host.get_fact(DpkgAudit):
            ...  # an earlier apt run was interrupted
    """

    command = "dpkg --audit 2>&1 || true"

    @staticmethod
    def default():
        return []

    def requires_command(self):
        return "dpkg"

    def process(self, output):
        return [line for line in output if line.strip()]
