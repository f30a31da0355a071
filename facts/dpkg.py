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


class DpkgReinstallRequired(FactBase):
    """
    Returns the packages dpkg marks reinstall-required: a run killed while it unpacked
    them left their files half-written, and apt refuses every install until they are
    reinstalled or removed (``needs to be reinstalled, but I can't find an archive``).

    .. code:: python

        host.get_fact(DpkgReinstallRequired)  # ["cuda-cccl-13-0"]
    """

    # The status flag is the third letter of db:Status-Abbrev ("iHR": half-installed,
    # reinstall required); dpkg-query reads dpkg's update journal too.
    command = "dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n' 2>/dev/null; true"

    @staticmethod
    def default():
        return []

    def requires_command(self):
        return "dpkg-query"

    def process(self, output):
        """
        >>> DpkgReinstallRequired().process(["ii  bash", "iHR cuda-cccl-13-0", "rc  old"])
        ['cuda-cccl-13-0']
        """
        return [line.split()[-1] for line in output if len(line) > 3 and line[2] == "R"]
