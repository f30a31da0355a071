"""Pre-warm the service's JIT caches on a node, inside the SGLang venv: FlashInfer's
modules, and SGLang's own JIT kernels (sglang.kernels.jit) where they build without a GPU.

Runs as the service user with exactly the service's environment (files/with-service-env),
so the build files, flags and cache paths are the ones the service will use and its
first request finds every module fresh:

    with-service-env "$SERVICE_PATH" /etc/sglang/sglang.env /opt/sglang/venv/bin/python prewarm.py \
        --modules sampling,norm,activation:silu,prefill,sglang-activation --head-dims 128 --dtypes bf16 \
        --manifest /var/cache/sglang/prewarm/manifest.json

Prints a line when each module starts (with the time it took on two cores, where
measured) and when it is done; writes the manifest (write, then rename) only when every
module built. ``--verify`` builds nothing: it loads SGLang's modules with
SGLANG_CRASH_ON_JIT_COMPILE=1 (sglang/kernels/jit/utils/compile/loader.py:150-156 raises
on a cache miss) and exits non-zero when any would compile.

CUDA must start (torch initialises it) before anything is built: a node whose GPUs do
not answer fails here, with the cause torch gives. ``--no-device`` compiles for the
arch list without a GPU; the plan passes it only where it knows there is none to run
on (bringup.plan.prewarm.compiles_without_device: an image builder's target_sms, or
GPUs declared stand-ins with gpu_standin).
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REQUIRED_ENV = ("CUDA_HOME", "FLASHINFER_CUDA_ARCH_LIST", "FLASHINFER_WORKSPACE_BASE")
# Cold build seconds measured for 12.0f on two cores (bench/README.md), for progress lines.
COLD_SECONDS = {"sampling": 69, "rope": 24, "norm": 25, "activation": 4, "page": 13, "cascade": 9,
                "prefill": 123, "decode": 21, "sglang-activation": 20}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", required=True, help="comma-separated module names")
    parser.add_argument("--head-dims", default="128")
    parser.add_argument("--dtypes", default="bf16")
    parser.add_argument("--manifest", help="where to record what was built (required unless --verify)")
    parser.add_argument("--toolchain", default="",
                        help="the digest of the service's compilers and header packages (the JitCache fact's)")
    parser.add_argument("--verify", action="store_true", help="build nothing; fail if SGLang's modules would compile")
    parser.add_argument("--no-device", action="store_true",
                        help="compile for the arch list without a GPU (the plan's GPU-less or stand-in node)")
    parser.add_argument("--sglang-arch", help=argparse.SUPPRESS)  # one target per child process
    return parser.parse_args(argv)


def flashinfer_specs(modules, head_dims, dtypes):
    """(request name, JitSpec) pairs for the requested FlashInfer modules."""
    import torch
    from flashinfer import jit
    from flashinfer.jit import cascade, norm, page, rope, sampling

    dtype_of = {"bf16": torch.bfloat16, "fp16": torch.float16}
    simple = {
        "sampling": sampling.gen_sampling_module,
        "rope": rope.gen_rope_module,
        "norm": norm.gen_norm_module,
        "page": page.gen_page_module,
        "cascade": cascade.gen_cascade_module,
    }
    for module in modules:
        family, _, argument = module.partition(":")
        if family in simple:
            yield module, simple[family]()
        elif family == "activation":
            yield module, jit.gen_act_and_mul_module(argument or "silu")
        elif family in ("prefill", "decode"):
            for head_dim in head_dims:
                for name in dtypes:
                    dtype = dtype_of[name]
                    # SGLang's FlashInfer backend: no RoPE fusion, no sliding window,
                    # no soft-cap, int32 indices, fa2 (the backend for SM 12.x).
                    if family == "prefill":
                        spec = jit.gen_batch_prefill_module("fa2", dtype, dtype, dtype, torch.int32,
                                                            head_dim, head_dim, 0, False, False, False)
                    else:
                        spec = jit.gen_batch_decode_module(dtype, dtype, dtype, torch.int32,
                                                           head_dim, head_dim, 0, False, False)
                    yield f"{family}:{head_dim}:{name}", spec
        elif not family.startswith("sglang-"):
            raise SystemExit(f"prewarm: unknown module {module!r}")


def sglang_targets(arch_list):
    """FLASHINFER_CUDA_ARCH_LIST entries -> (major, minor) of each GPU to build for.

    >>> sglang_targets("10.0a 12.0f")
    [(10, 0), (12, 0)]
    """
    return [tuple(int(part) for part in entry.rstrip("abf").split(".")) for entry in arch_list.split()]


def cuda_failure():
    """Why CUDA does not start in this process (torch's own words, first line), or ""."""
    import torch

    try:
        torch.cuda.init()
    except Exception as error:  # torch raises RuntimeError, AssertionError or its own types
        return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
    return ""


def cuda_refusal(cause):
    """The one line the pre-warm fails with when CUDA does not start on a GPU node.

    >>> print(cuda_refusal("RuntimeError: No CUDA GPUs are available"))
    prewarm: CUDA does not start (RuntimeError: No CUDA GPUs are available), nothing was built: the node's \
GPUs must answer (run validate.py: its driver-layer findings name the cause); a GPU-less image builder sets \
target_sms, where the plan compiles without a device
    """
    return (f"prewarm: CUDA does not start ({cause}), nothing was built: the node's GPUs must answer (run "
            "validate.py: its driver-layer findings name the cause); a GPU-less image builder sets target_sms, "
            "where the plan compiles without a device")


def build_sglang(modules, dtypes, target, verify, no_device=False):
    """SGLang's JIT modules for one GPU target, in this process (their factories are
    cached per process, so each target gets a process of its own). Returns manifest
    entries. SGLang picks the target from the GPU (sglang/kernels/jit/utils/arch.py:104-128);
    it is given with override_jit_cuda_arch, and on a ``no_device`` node ``is_cuda`` is
    answered as on the GPU node, since it adds --use_fast_math and so changes the cache key."""
    import torch
    import sglang.kernels.jit.utils.arch as jit_arch

    if verify:
        os.environ["SGLANG_CRASH_ON_JIT_COMPILE"] = "1"
    if no_device:
        jit_arch.is_cuda = lambda: True
    dtype_of = {"bf16": torch.bfloat16, "fp16": torch.float16}
    root = os.environ["SGLANG_JIT_CACHE_DIR"]
    entries = []
    with jit_arch.override_jit_cuda_arch(*target):
        arch = jit_arch.get_jit_cuda_arch()
        # The cache's target directory (sglang/kernels/jit/utils/compile/cache.py:215-230).
        tag = f"sm{arch.major}{arch.minor}{arch.suffix}"
        for module in modules:
            if module != "sglang-activation":
                continue
            from sglang.kernels.ops.activation.activation import activation_module

            for name in dtypes:
                request = f"{module}:{name}:{target[0]}.{target[1]}"
                start = progress_start(request, module)
                activation_module(dtype_of[name])
                found = sorted(glob.glob(f"{root}/{tag}/sgl_kernel_jit_activation_{name}_*/build-*/deps-*/*.so"),
                               key=os.path.getmtime)
                if not found:
                    raise SystemExit(f"prewarm: {request} left no library under {root}/{tag}")
                entries.append({"kind": "sglang", "request": request, "name": Path(found[-1]).stem,
                                "dir": str(Path(found[-1]).parent), "library": found[-1]})
                progress_done(request, start)
    return entries


def progress_start(request, module):
    cold = COLD_SECONDS.get(module.split(":")[0])
    print(f"prewarm: start {request}{f' (about {cold} s cold on 2 cores)' if cold else ''}", flush=True)
    return time.monotonic()


def progress_done(request, start):
    print(f"prewarm: done  {request} in {time.monotonic() - start:.1f} s", flush=True)


def sglang_entries(args, modules, dtypes):
    """Build (or verify) SGLang's modules for every target, a child process per target."""
    entries = []
    for major, minor in sglang_targets(os.environ["FLASHINFER_CUDA_ARCH_LIST"]):
        command = [sys.executable, __file__, "--modules", ",".join(modules), "--dtypes", ",".join(dtypes),
                   "--sglang-arch", f"{major}.{minor}", *(["--verify"] if args.verify else []),
                   *(["--no-device"] if args.no_device else [])]
        child = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        lines = child.stdout.splitlines()
        for line in lines:
            if not line.startswith("@@entries "):
                print(line, flush=True)
        if child.returncode != 0:
            raise SystemExit(f"prewarm: SGLang's modules for {major}.{minor} failed (exit {child.returncode})")
        entries += json.loads(next(line for line in lines if line.startswith("@@entries "))[len("@@entries "):])
    return entries


HELD = []  # the lock files this process holds, open until it exits


def hold_lock(path, timeout=120):
    """An exclusive lock on ``path``, held until this process exits, waiting up to
    ``timeout`` seconds for another pre-warm to finish."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a")
    deadline = time.monotonic() + timeout
    said = False
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            HELD.append(handle)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise SystemExit(f"prewarm: another pre-warm still holds {path} after {timeout} s: let it finish, "
                                 "then run deploy again") from None
            if not said:
                print(f"prewarm: another pre-warm holds {path}; waiting up to {timeout} s", flush=True)
                said = True
            time.sleep(1)


def write_manifest(path, document):
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    temp.write_text(json.dumps(document, indent=2) + "\n")
    os.chmod(temp, 0o644)
    os.replace(temp, path)


def main(argv=None):
    args = parse_args(argv)
    modules = [m for m in args.modules.split(",") if m]
    dtypes = [d for d in args.dtypes.split(",") if d]
    if args.sglang_arch:
        target = tuple(int(part) for part in args.sglang_arch.split("."))
        print("@@entries " + json.dumps(build_sglang(modules, dtypes, target, args.verify, args.no_device)),
              flush=True)
        return 0
    missing = [key for key in REQUIRED_ENV if not os.environ.get(key)]
    if missing:
        raise SystemExit(f"prewarm: run with the service environment; missing {', '.join(missing)}")
    cause = "" if args.no_device else cuda_failure()
    if cause:
        raise SystemExit(cuda_refusal(cause))
    sglang_modules = [m for m in modules if m.startswith("sglang-")]
    if args.verify:
        sglang_entries(args, sglang_modules, dtypes)
        print(f"prewarm: verified {', '.join(sglang_modules) or 'nothing'}: no SGLang module would compile",
              flush=True)
        return 0
    if not args.manifest:
        raise SystemExit("prewarm: --manifest is required to build")
    # One pre-warm at a time per cache: the re-run of a deploy whose SSH session died
    # waits here while the old one is being stopped (files/session-bound).
    hold_lock(Path(args.manifest).parent / ".prewarm.lock")
    # FlashInfer fixes its cache directory and target archs at import time.
    import flashinfer
    from flashinfer.jit import env as jit_env

    head_dims = [int(h) for h in args.head_dims.split(",") if h]
    built = []
    total = time.monotonic()
    for request, spec in flashinfer_specs(modules, head_dims, dtypes):
        start = progress_start(request, request)
        spec.build()
        library = spec.get_library_path()
        if not library.exists():
            raise SystemExit(f"prewarm: {spec.name} built no {library}")
        built.append({"kind": "flashinfer", "request": request, "name": spec.name, "dir": str(spec.build_dir),
                      "library": str(library)})
        progress_done(request, start)
    if sglang_modules:
        built += sglang_entries(args, sglang_modules, dtypes)
    write_manifest(Path(args.manifest), {
        "flashinfer": flashinfer.__version__,
        "arch_list": os.environ["FLASHINFER_CUDA_ARCH_LIST"],
        "workspace": str(jit_env.FLASHINFER_WORKSPACE_DIR),
        "request": {"modules": modules, "head_dims": head_dims, "dtypes": dtypes},
        "toolchain": args.toolchain,
        "modules": built,
    })
    print(f"prewarm: {len(built)} module(s) ready in {time.monotonic() - total:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
