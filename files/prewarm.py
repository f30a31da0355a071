"""Pre-warm FlashInfer's JIT cache on a node, inside the SGLang venv.

Runs as the service user with exactly the service's environment (files/with-service-env),
so the build files, flags and cache paths are the ones the service will use and
its first request finds every module fresh (ninja has no work):

    with-service-env "$SERVICE_PATH" /etc/sglang/sglang.env /opt/sglang/venv/bin/python prewarm.py \
        --modules sampling,norm,activation:silu,prefill --head-dims 128 --dtypes bf16 \
        --manifest /var/cache/sglang/prewarm/manifest.json

Prints one line per module with its time; writes the manifest (write, then rename)
only when every module built.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

REQUIRED_ENV = ("CUDA_HOME", "FLASHINFER_CUDA_ARCH_LIST", "FLASHINFER_WORKSPACE_BASE")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", required=True, help="comma-separated module names")
    parser.add_argument("--head-dims", default="128")
    parser.add_argument("--dtypes", default="bf16")
    parser.add_argument("--manifest", required=True)
    return parser.parse_args(argv)


def specs(modules, head_dims, dtypes):
    """(request name, JitSpec) pairs for the requested modules."""
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
        else:
            raise SystemExit(f"prewarm: unknown module {module!r}")


def write_manifest(path, document):
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    temp.write_text(json.dumps(document, indent=2) + "\n")
    os.chmod(temp, 0o644)
    os.replace(temp, path)


def main(argv=None):
    args = parse_args(argv)
    missing = [key for key in REQUIRED_ENV if not os.environ.get(key)]
    if missing:
        raise SystemExit(f"prewarm: run with the service environment; missing {', '.join(missing)}")
    # FlashInfer fixes its cache directory and target archs at import time.
    import flashinfer
    from flashinfer.jit import env as jit_env

    modules = [m for m in args.modules.split(",") if m]
    head_dims = [int(h) for h in args.head_dims.split(",") if h]
    dtypes = [d for d in args.dtypes.split(",") if d]
    built = []
    total = time.monotonic()
    for request, spec in specs(modules, head_dims, dtypes):
        start = time.monotonic()
        spec.build()
        library = spec.get_library_path()
        if not library.exists():
            raise SystemExit(f"prewarm: {spec.name} built no {library}")
        built.append({"request": request, "name": spec.name, "dir": str(spec.build_dir), "library": str(library)})
        print(f"prewarm: {request:24} {spec.name:60} {time.monotonic() - start:7.1f}s", flush=True)
    write_manifest(Path(args.manifest), {
        "flashinfer": flashinfer.__version__,
        "arch_list": os.environ["FLASHINFER_CUDA_ARCH_LIST"],
        "workspace": str(jit_env.FLASHINFER_WORKSPACE_DIR),
        "request": {"modules": modules, "head_dims": head_dims, "dtypes": dtypes},
        "modules": built,
    })
    print(f"prewarm: {len(built)} module(s) ready in {time.monotonic() - total:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
