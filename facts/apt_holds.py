"""The packages apt holds (``apt-mark showhold``): the driver step holds the driver's at
its lock's versions, so that no routine upgrade moves them."""

from pyinfra.api import FactBase


class AptHolds(FactBase):
    """
    Returns the names of the packages apt holds, sorted.

    .. code:: python

        host.get_fact(AptHolds)
        # ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"]
    """

    command = "apt-mark showhold"

    @staticmethod
    def default():
        return []

    def requires_command(self):
        return "apt-mark"

    def process(self, output):
        """
        >>> AptHolds().process(["nvidia-kernel-open-dkms", "", "libcuda1"])
        ['libcuda1', 'nvidia-kernel-open-dkms']
        """
        return sorted(line.strip() for line in output if line.strip())
