"""What deploy compiles before the service starts: FlashInfer's JIT modules for the
arch list (and whether the node's cache holds them already), and DeepGEMM's kernels
for the service's model on the node's GPUs.

    >>> from dataclasses import replace
    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> found = []
    >>> context = replace(PlanContext.of({}, Config(), None, found.append), targets=("12.0f",))
    >>> prewarm_plan(context).gap, [finding.code for finding in found]
    ('no pre-warm manifest', ['JIT_CACHE_COLD'])
"""

import shlex
from dataclasses import replace

from bringup import flashinfer as fi
from bringup.deep_gemm import deep_gemm_decision, deep_gemm_request
from bringup.findings import FIX, INFO, WARNING, Finding
from bringup.layout import SERVICE_BASE_PATH
from bringup.plan.model import DeepGemmPlan, PrewarmPlan
from bringup.prewarm import prewarm_request
from bringup.versions import parse


def compiles_without_device(gpus, target_sms, gpu_standin):
    """Whether the pre-warm compiles for the plan's SMs without a GPU to run on (its
    ``--no-device``): on a node the plan knows is GPU-less (no GPU listed, ``target_sms``
    set: an image builder), or whose GPUs are declared stand-ins (``gpu_standin``: a
    test bed's recorded nvidia-smi). Anywhere else CUDA must start, and the pre-warm
    fails when it does not: never inferred from CUDA being unavailable.

    >>> compiles_without_device([], ("12.0",), False), compiles_without_device([{"index": 0}], (), True)
    (True, True)
    >>> compiles_without_device([{"index": 0}], ("12.0",), False)  # a GPU node: its GPUs must answer
    False
    """
    return bool(gpu_standin) or (not gpus and bool(target_sms))


def prewarm_plan(context):
    """The pre-warm request and whether the node's cache already holds it (JIT_CACHE_COLD)."""
    facts, config, layout = context.facts, context.config, context.layout
    arch_list = " ".join(context.targets)
    installed = parse((facts.get("flashinfer") or {}).get("version"))
    # The FlashInfer that will serve: the stack's for a managed venv (deploy builds it),
    # the venv's own otherwise.
    serving = config.flashinfer if config.venv_managed else (installed or config.flashinfer)
    prewarm = PrewarmPlan(request=prewarm_request(config), flashinfer=str(serving), arch_list=arch_list,
                          venv=layout.venv, env_file=layout.env_file, cache_dir=layout.cache_dir,
                          manifest=layout.manifest,
                          user=layout.service_user, home=layout.service_home, base_path=SERVICE_BASE_PATH,
                          runner=layout.helper("with-service-env"), script=layout.helper("prewarm.py"),
                          session_bound=layout.helper("session-bound"),
                          no_device=compiles_without_device(facts.get("gpus") or [], config.target_sms,
                                                            config.gpu_standin))
    if not arch_list:
        return prewarm
    jit = facts.get("jit_cache") or {}
    gap = prewarm.gap_for(jit.get("prewarm"), jit.get("toolchain"))
    if gap:
        where = f"{layout.flashinfer_cache}/{serving}/{fi.workspace_dir_name(arch_list.split())}"
        context.add(Finding("JIT_CACHE_COLD", FIX,
                            f"FlashInfer's JIT cache under {where} is not ready ({gap}): the first requests would "
                            "compile",
                            f"deploy pre-warms {', '.join(config.prewarm_modules)} for {arch_list} as "
                            f"{config.service_user}"))
    return replace(prewarm, gap=gap)


def deep_gemm_plan(context):
    """Whether deploy compiles DeepGEMM's kernels (prewarm_deep_gemm): for the unit's
    model and server arguments, on the GPUs the node reports."""
    config, layout, add = context.config, context.layout, context.add
    # The GPUs' own SMs only: an image builder's target_sms have no GPU to compile on.
    gpu_sms = context.sms if context.facts.get("gpus") else ()
    run, why = deep_gemm_decision(config.prewarm_deep_gemm, config.service_model, gpu_sms)
    # The unit's model and server arguments (--tp-size, --quantization... shape the
    # kernels); its server listens on loopback only, on the service's port (the service
    # is stopped meanwhile).
    server_args = ("--model-path", config.service_model, *shlex.split(config.service_args))
    command = (f"{layout.venv}/bin/python", "-m", "sglang.compile_deep_gemm", *server_args,
               "--host", "127.0.0.1", "--port", config.service_port,
               "--timeout", str(config.prewarm_deep_gemm_timeout))
    deep_gemm = DeepGemmPlan(run=run, why=why,
                             request=deep_gemm_request(config.stack_sglang, config.service_model, server_args, gpu_sms),
                             manifest=layout.deep_gemm_manifest, command=command, user=layout.service_user,
                             home=layout.service_home, env_file=layout.env_file, base_path=SERVICE_BASE_PATH,
                             runner=layout.helper("with-service-env"), unit=layout.unit_name,
                             session_bound=layout.helper("session-bound"))
    if not config.prewarm_deep_gemm:
        return deep_gemm
    if run:
        add(Finding("DEEP_GEMM_PRECOMPILE", INFO,
                    f"{why}: deploy compiles DeepGEMM's kernels for {config.service_model} with "
                    f"python -m sglang.compile_deep_gemm (the model loaded on the GPUs, at most "
                    f"{config.prewarm_deep_gemm_timeout} s; the service is stopped meanwhile), unless "
                    f"{layout.deep_gemm_manifest} records this model, release, arguments and GPUs",
                    "nothing to do; the first start then finds the kernels in SGLANG_DG_CACHE_DIR"))
    elif gpu_sms and config.service_model:
        add(Finding("DEEP_GEMM_NOT_PRECOMPILED", INFO, f"prewarm_deep_gemm is set, but {why}",
                    "nothing to do: the service never compiles DeepGEMM here (or set prewarm_deep_gemm=false)"))
    else:
        add(Finding("DEEP_GEMM_NOT_PRECOMPILED", WARNING, f"prewarm_deep_gemm is set, but {why}",
                    "set service_model and deploy on the GPU node itself; until then the service's first start "
                    "compiles DeepGEMM's kernels (10-20 minutes, SGLang says)"))
    return deep_gemm
