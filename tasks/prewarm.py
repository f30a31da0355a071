"""FlashInfer JIT cache, compiled before the service starts."""

from pyinfra.api import deploy

from tasks.operations.sglang import jit_prewarm


@deploy("FlashInfer JIT pre-warm")
def flashinfer_prewarm(node):
    """
    Build the plan's modules for its arch list into the service's cache.

    + node: the NodePlan (``prewarm``)
    """
    jit_prewarm(name=f"Pre-warm FlashInfer for {node.prewarm.arch_list}", prewarm=node.prewarm)
