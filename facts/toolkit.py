"""What one toolkit's nvcc reports, and where /usr/local/cuda points."""

import shlex

from pyinfra.api import FactBase

from bringup.layout import CUDA_LINK
from facts.probe_output import parse_nvcc_release


class NvccRelease(FactBase):
    """
    Returns the ``X.Y`` release ``<home>/bin/nvcc --version`` prints, or None when
    that nvcc is missing or broken.

    + home: the toolkit's home, e.g. ``toolkit_home("13.0")`` (bringup/layout.py)

    .. code:: python

        host.get_fact(NvccRelease, home=toolkit_home("13.0"))  # "13.0"
    """

    def command(self, home):
        return f"{shlex.quote(home + '/bin/nvcc')} --version 2>&1 || true"

    def process(self, output):
        return parse_nvcc_release("\n".join(output))


class CudaLink(FactBase):
    """
    Returns where ``/usr/local/cuda`` leads: ``{"target": resolved path or None,
    "alternatives": [registered homes]}``.

    .. code:: python

        host.get_fact(CudaLink)  # {"target": toolkit_home("12.8"), "alternatives": []}
    """

    command = (
        f"printf 'target=%s\\n' \"$(readlink -f {CUDA_LINK} 2>/dev/null)\"; "
        "update-alternatives --query cuda 2>/dev/null | sed -n 's/^Alternative: /alternative=/p'; true"
    )

    @staticmethod
    def default():
        return {"target": None, "alternatives": []}

    def process(self, output):
        link = {"target": None, "alternatives": []}
        for line in output:
            key, _, value = line.partition("=")
            if key == "target":
                link["target"] = value or None
            elif key == "alternative":
                link["alternatives"].append(value)
        return link
