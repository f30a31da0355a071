"""JIT caches compiled before the service starts: FlashInfer's and SGLang's modules, and
DeepGEMM's kernels for the service's model where asked for."""

from pyinfra.api import deploy

from tasks.operations.sglang import deep_gemm_compiled, jit_prewarm


@deploy("FlashInfer JIT pre-warm")
def flashinfer_prewarm(node):
    """
    Build the plan's modules for its arch list into the service's cache.

    + node: the NodePlan (``prewarm``, ``layout``)
    """
    jit_prewarm(name=f"Pre-warm FlashInfer for {node.prewarm.arch_list}", prewarm=node.prewarm,
                layout=node.layout)


@deploy("DeepGEMM pre-compile")
def deep_gemm_precompile(node):
    """
    Compile DeepGEMM's kernels for the service's model on the node's GPUs, where the plan
    says so (``prewarm_deep_gemm`` set, a model, GPUs of SM 9.0 or later).

    + node: the NodePlan (``deep_gemm``)
    """
    deep_gemm_compiled(name=f"Compile DeepGEMM for {node.deep_gemm.request['model']}", deep_gemm=node.deep_gemm)
