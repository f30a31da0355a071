"""dpkg's own view of unfinished work (an interrupted install)."""

from pyinfra.api import FactBase


class DpkgUnfinished(FactBase):
    """
    Returns what an interrupted dpkg run left, in one round trip:
    ``{"audit": [...], "reinstall_required": [...]}``. ``audit`` holds the lines of
    ``dpkg --audit`` plus any entry of dpkg's update journal (empty when no package is
    half-installed or half-configured and no dpkg run stopped halfway);
    ``reinstall_required`` names the packages a run killed while it unpacked them left
    half-written: apt refuses every install until they are reinstalled or removed
    (``needs to be reinstalled, but I can't find an archive``).

    .. code:: python

        host.get_fact(DpkgUnfinished)
        # {"audit": ["journal: 0001"], "reinstall_required": ["cuda-cccl-13-0"]}
    """

    # The reinstall-required flag is the third letter of db:Status-Abbrev ("iHR":
    # half-installed, reinstall required); dpkg-query reads dpkg's update journal too.
    command = ("dpkg --audit 2>&1 | sed 's/^/audit: /'; "
               "ls -A /var/lib/dpkg/updates 2>/dev/null | sed 's/^/audit: journal: /'; "
               "dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n' 2>/dev/null | sed -n 's/^..R */reinstall: /p'; "
               "true")

    @staticmethod
    def default():
        return {"audit": [], "reinstall_required": []}

    def requires_command(self):
        return "dpkg-query"

    def process(self, output):
        """
        >>> DpkgUnfinished().process(["audit: ", "audit: journal: 0001", "reinstall: cuda-cccl-13-0"])
        {'audit': ['journal: 0001'], 'reinstall_required': ['cuda-cccl-13-0']}
        """
        unfinished = self.default()
        for line in output:
            kind, _, value = line.partition(": ")
            if kind == "audit" and value.strip():
                unfinished["audit"].append(value)
            elif kind == "reinstall" and value.strip():
                unfinished["reinstall_required"].append(value.strip())
        return unfinished
