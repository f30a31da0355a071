"""What every decision of one node's plan reads: ``PlanContext``.

The decisions (the other modules of bringup/plan/) are pure functions of a context,
and of the step plans decided before them where they need one; they report what they
find through its ``add`` and return what they decide.

    >>> from bringup.config import Config
    >>> context = PlanContext.of({"os": {"arch": "aarch64"}}, Config(), locks=None, add=print)
    >>> context.machine, context.torch_cuda, context.home == toolkit_home("13.0")
    ('aarch64', <Version('13.0')>, True)
"""

from dataclasses import dataclass
from typing import Callable

from packaging.version import Version

from bringup.config import Config
from bringup.layout import NodeLayout, toolkit_home
from bringup.locks import LockFiles
from bringup.versions import major_minor, parse


@dataclass(frozen=True)
class PlanContext:
    """One node's facts and settings, what follows from them alone, and the collector
    of findings.

    ``sms`` and ``targets`` are the GPU decisions (bringup/plan/gpus.py): plan() gives
    the checks after them a context that holds them (``dataclasses.replace``).
    """

    facts: dict
    config: Config
    # Where the control side's lock files are read.
    locks: LockFiles
    # Collects a Finding (the NodePlan's findings, in the order they are found).
    add: Callable
    layout: NodeLayout
    # The node's CPU (the facts' os.arch), None when not probed.
    machine: str
    # The CUDA build that decides the toolkit (X.Y), and where that toolkit lives.
    torch_cuda: Version
    home: str
    # The SMs built for (the GPUs', else target_sms) and FlashInfer's arch target of each.
    sms: tuple = ()
    targets: tuple = ()
    # This node's place in its serving group (bringup.group.Member), None when it serves alone.
    member: object = None

    @classmethod
    def of(cls, facts, config, locks, add, member=None):
        torch_cuda = _torch_cuda(facts, config)
        return cls(facts=facts, config=config, locks=locks, add=add, layout=config.layout,
                   machine=(facts.get("os") or {}).get("arch"), torch_cuda=torch_cuda, home=toolkit_home(torch_cuda),
                   member=member)


def _torch_cuda(facts, config):
    """The CUDA build that decides the toolkit: the configured stack for a managed
    venv (that is what runs after the deploy), the venv's own torch otherwise.

    >>> from bringup.config import Config
    >>> str(_torch_cuda({"torch": {"cuda": "12.8"}}, Config(venv_managed=False))), str(_torch_cuda({}, Config()))
    ('12.8', '13.0')
    """
    torch = facts.get("torch") or {}
    if not config.venv_managed and parse(torch.get("cuda")):
        return major_minor(torch["cuda"])
    return major_minor(config.stack_torch_cuda)
