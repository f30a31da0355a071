"""dpkg's own view of unfinished work (an interrupted install), and which locked versions
apt's lists serve."""

import shlex

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


def apt_repo_uri(url):
    """A repository URL as apt writes it (``$(REPO_URI)``): ``file:///x`` as ``file:/x``,
    with one trailing slash.

    >>> apt_repo_uri("file:///srv/cuda/debian12/x86_64"), apt_repo_uri("https://m/cuda/debian12/x86_64/")
    ('file:/srv/cuda/debian12/x86_64/', 'https://m/cuda/debian12/x86_64/')
    """
    if url.startswith("file:///"):
        url = "file:/" + url[len("file:///"):]
    return url.rstrip("/") + "/"


class AptUnserved(FactBase):
    """
    Returns the ``name=version`` pins apt's lists and dpkg do not serve (``apt-cache
    show`` finds no such version), in the order given: what ``apt-get install
    name=version`` would refuse with "Version '...' for '...' was not found", asked
    before anything is installed. None when apt's lists hold nothing of ``repo_url``
    (its source missing or never fetched): then no answer can be had.

    + pins: ``name=version`` strings
    + repo_url: the repository whose lists must be there

    .. code:: python

        host.get_fact(AptUnserved, pins=["cuda-nvcc-13-0=13.0.88-1"],
                      repo_url="https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/")  # []
    """

    def command(self, pins, repo_url):
        # One apt-cache for every pin: each run loads apt's whole cache (about 0.3 s of CPU
        # with NVIDIA's lists), and a toolkit lock pins dozens. apt-cache show prints the
        # stanzas of the versions it knows and nothing for the others; apt-get indextargets
        # names each repository whose index apt fetched, whole.
        quoted = " ".join(shlex.quote(pin) for pin in pins)
        return (f"apt-get indextargets --format '$(REPO_URI)' 2>/dev/null | grep -qxF -- "
                f"{shlex.quote(apt_repo_uri(repo_url))} && echo listed; "
                f"served=$(apt-cache show --no-all-versions -- {quoted} 2>/dev/null "
                "| awk '/^Package: /{name=$2} /^Version: /{print name \"=\" $2}'); "
                f"for pin in {quoted}; do printf '%s\\n' \"$served\" | grep -qxF -- \"$pin\" "
                "|| printf 'unserved %s\\n' \"$pin\"; done; true")

    def requires_command(self, pins, repo_url):
        return "apt-cache"

    def process(self, output):
        """
        >>> AptUnserved().process(["listed", "unserved cuda-nvcc-13-0=13.0.999-1", "noise"])
        ['cuda-nvcc-13-0=13.0.999-1']
        >>> AptUnserved().process(["unserved cuda-nvcc-13-0=13.0.999-1"]) is None
        True
        """
        if "listed" not in output:
            return None
        return [line.split(" ", 1)[1] for line in output if line.startswith("unserved ")]
