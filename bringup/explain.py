"""Explain a failed start: known failure texts in a log -> the finding codes and fixes.

    python -m bringup.explain LOG [--config SETTINGS.yaml]
    journalctl -u sglang --no-pager -o cat | python -m bringup.explain -

The operator meets the message, not the cause: "FlashInfer requires GPUs with sm75 or
higher" says nothing of the nvcc 12.8 that emptied FlashInfer's arch list. Each
signature below is a text the stack really prints for one cause, taken from the logs
recorded in tests/fixtures/failures/ (tests/fixtures/failures/record_failures.py made each by
running the failing configuration on a sandbox node). For every signature found the
CLI prints its finding code (bringup/findings.py), the line that matched, what it
means for the node, and the fix; the fix names the toolkit and env file of the
default settings, or of ``--config``.

The driver's Xid lines (``NVRM: Xid (PCI:...): N, ...``, the kernel's log) are causes too:
one ``GPU_XID`` per GPU and Xid, named with NVIDIA's description and action from NVIDIA's Xid
catalog (bringup/xid.py), before the table's causes, which a failing GPU may lead to.

The planner runs the same table on the service's journal (the ``service_unit`` fact)
and reports a ``SERVICE_FAILED`` finding naming the cause (bringup/plan/service.py).

Exit status: 0 when at least one known cause was found; 1 when none was ("no known
cause", an empty log included); 2 when the log or the settings cannot be read.
"""

import argparse
import re
import sys
from dataclasses import dataclass

import yaml

from bringup import redact, xid, yamlload
from bringup.config import Config, ConfigError
from bringup.findings import CODES
from bringup.layout import toolkit_home
from bringup.report import print_out

EXIT_FOUND, EXIT_UNKNOWN, EXIT_ERROR = 0, 1, 2
# Colour codes some loggers write even into files and the journal.
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class Signature:
    """One known failure: ``patterns`` (regular expressions, any one matching a line)
    -> finding ``code``, a short ``title``, what it ``means`` and the ``fix``.

    ``fix`` may name ``{home}``, ``{cuda}``, ``{suffix}``, ``{env_file}`` and
    ``{arch_list}`` (``Context``)."""

    name: str
    code: str
    title: str
    patterns: tuple
    means: str
    fix: str

    def __post_init__(self):
        if self.code not in CODES:
            raise ValueError(f"signature {self.name}: undocumented finding code {self.code}")
        object.__setattr__(self, "compiled", tuple(re.compile(pattern) for pattern in self.patterns))


@dataclass(frozen=True)
class Context:
    """What a fix names: the toolkit of torch's CUDA build and the service's env file.
    ``arch_list`` is the planned FLASHINFER_CUDA_ARCH_LIST, "" when unknown (no GPU facts)."""

    home: str
    cuda: str
    env_file: str
    arch_list: str = ""

    @classmethod
    def from_config(cls, config):
        cuda = ".".join(config.stack_torch_cuda.split(".")[:2])
        return cls(home=toolkit_home(cuda), cuda=cuda, env_file=config.service_env_file)

    def values(self):
        arch = (f'FLASHINFER_CUDA_ARCH_LIST="{self.arch_list}"' if self.arch_list
                else "FLASHINFER_CUDA_ARCH_LIST for the GPUs (\"12.0f\" for SM 12.0; validate.py names the node's)")
        return {"home": self.home, "cuda": self.cuda, "suffix": self.cuda.replace(".", "-"),
                "env_file": self.env_file, "arch_list": arch}


# The default settings' stack: what the CLI's fixes name without --config.
DEFAULT_CONTEXT = Context.from_config(Config())

RESTART = "then restart sglang (systemctl restart sglang)"
# What deploy.py does about it (tasks/cuda_toolkit.py, tasks/cuda_env.py).
BY_DEPLOY = "deploy.py installs that toolkit and writes these"
SERVICE_TOOLKIT = ("give the service the toolkit of torch's CUDA build: CUDA_HOME={home}, {home}/bin first on PATH "
                   "and {arch_list} in {env_file}")

# Causes before their consequences: a log holding both is explained by the cause first
# (FlashInfer's arch detection refusing the GPU, then the sm75 error it leads to).
SIGNATURES = (
    Signature(
        "flashinfer-arch-needs-newer-cuda", "FLASHINFER_ARCH_TRAP",
        "FlashInfer's arch detection refused the GPU for the CUDA it found",
        # flashinfer/compilation_context.py _normalize_cuda_arch: 0.7.0 for any SM 12.x,
        # 0.7.2 for SM 12.1+ (tests/fixtures/failures/flashinfer-0.7.*-trap.log).
        (r"SM 12\.x requires CUDA >= 12\.9", r"SM 12\.1\+ requires CUDA >= 12\.9"),
        "FlashInfer reads the CUDA version from the nvcc it resolves (CUDA_HOME, CUDA_PATH, the first nvcc "
        "on PATH, /usr/local/cuda). That nvcc is older than 12.9, too old for the GPU's SM. FlashInfer logs "
        "this as a warning, drops the GPU, and its target arch set stays empty: every JIT build then fails "
        "with \"FlashInfer requires GPUs with sm75 or higher\", whatever the GPU.",
        f"{SERVICE_TOOLKIT} ({BY_DEPLOY}), {RESTART}"),
    Signature(
        "flashinfer-empty-arch-set", "FLASHINFER_ARCH_TRAP",
        "FlashInfer built a JIT module for an empty arch set",
        # flashinfer/jit/core.py check_cuda_arch (0.7.0: the bare sentence; 0.7.2 adds
        # "Detected TARGET_CUDA_ARCHS=[].").
        (r"FlashInfer requires GPUs with sm75 or higher",),
        "Not a statement about the GPU: FlashInfer's target arch set was empty when a JIT module was built. "
        "Its arch detection failed (the nvcc it resolves is older than the GPU's SM needs, or no GPU was "
        "visible to the process) and FLASHINFER_CUDA_ARCH_LIST was not set.",
        f"{SERVICE_TOOLKIT} ({BY_DEPLOY}), {RESTART}"),
    Signature(
        "ptxas-unknown-arch", "FLASHINFER_ARCH_TRAP",
        "the toolkit's ptxas does not know the target arch",
        # ptxas of CUDA 12.8 given -arch=sm_120f (tests/fixtures/failures/ptxas-12.8-sm120f.log).
        (r"ptxas fatal\s*: Value '(?:sm|compute)_\w+' is not defined for option 'gpu-name'",),
        "The JIT asked for an arch (such as sm_120f, the SM 12.x family build) that the ptxas of the toolkit "
        "doing the build does not know: that toolkit is older than the arch list (family builds need CUDA "
        ">= 12.9).",
        f"{SERVICE_TOOLKIT} ({BY_DEPLOY}), {RESTART}"),
    Signature(
        "cublas-headers-missing", "TOOLKIT_MISSING",
        "the toolkit lacks cuBLAS's headers",
        # FlashInfer's norm module includes cublasLt.h (flashinfer/trtllm/common/cudaUtils.h).
        (r"fatal error: cublas(?:Lt|_v2)?\.h: No such file or directory",),
        "The toolkit the JIT compiles with has no cuBLAS headers (cublasLt.h): its package libcublas-dev-X-Y "
        "is not installed. FlashInfer's norm module (and the modules including its trtllm headers) cannot "
        "build.",
        "install libcublas-dev-{suffix} from NVIDIA's repository (deploy.py installs CUDA {cuda} with every "
        f"package FlashInfer's JIT compiles and links against), {RESTART}"),
    Signature(
        "curand-headers-missing", "TOOLKIT_MISSING",
        "the toolkit lacks cuRAND's headers",
        # FlashInfer's sampling module includes curand.h (flashinfer/sampling.cuh).
        (r"fatal error: curand(?:_kernel)?\.h: No such file or directory",),
        "The toolkit the JIT compiles with has no cuRAND headers (curand.h): its package libcurand-dev-X-Y is "
        "not installed. FlashInfer's sampling module cannot build.",
        "install libcurand-dev-{suffix} from NVIDIA's repository (deploy.py installs CUDA {cuda} with every "
        f"package FlashInfer's JIT compiles and links against), {RESTART}"),
    Signature(
        "nvcc-not-found", "CUDA_HOME_NOT_EXPLICIT",
        "the JIT's CUDA home has no nvcc",
        # flashinfer/jit/cpp_ext.py get_cuda_path without CUDA_HOME, nvcc or /usr/local/cuda;
        # the shell ninja runs when CUDA_HOME names a missing toolkit (FlashInfer's and
        # SGLang's JIT alike).
        (r"Could not find nvcc and default cuda_home=\S+ doesn't exist",
         r"^(?:/bin/)?sh: \d+: \S*/bin/nvcc: not found"),
        "The JIT runs $CUDA_HOME/bin/nvcc, and there is none: CUDA_HOME (or CUDA_PATH) names a toolkit that "
        "is not installed, or is unset with no nvcc on the service's PATH and no /usr/local/cuda.",
        f"{SERVICE_TOOLKIT}, and have that toolkit installed ({BY_DEPLOY}), {RESTART}"),
    Signature(
        "cudart-not-found", "CUDA_HOME_NOT_EXPLICIT",
        "the JIT links against a CUDA home without the CUDA runtime",
        # SGLang's JIT links -L$CUDA_HOME/lib64 -lcudart (sglang/kernels/jit/utils/compile/
        # toolchain.py); its home guessed from an nvcc wrapper in /usr/local/bin is /usr/local.
        (r"cannot find -lcudart\b",),
        "The JIT links -L$CUDA_HOME/lib64 -lcudart and that directory has no libcudart.so: CUDA_HOME is unset "
        "and the CUDA home was guessed from the first nvcc on PATH (a wrapper such as /usr/local/bin/nvcc "
        "gives /usr/local), or CUDA_HOME names a directory that is not a toolkit.",
        f"set CUDA_HOME={{home}} explicitly: {SERVICE_TOOLKIT} ({BY_DEPLOY}), {RESTART}"),
    Signature(
        "libcuda-not-found", "TOOLKIT_MISSING",
        "the linker finds no libcuda.so",
        # FlashInfer links every JIT module with -L$CUDA_HOME/lib64/stubs -lcuda
        # (flashinfer/jit/cpp_ext.py); "-lcuda\b" leaves "-lcudart" to the signature above.
        (r"cannot find -lcuda\b(?!rt)",),
        "FlashInfer links every JIT module against libcuda: neither the driver's libcuda.so (the unversioned "
        "link, which a driver without its development files lacks) nor the toolkit's stub "
        "($CUDA_HOME/lib64/stubs/libcuda.so, package cuda-driver-dev-X-Y) is there.",
        "install cuda-driver-dev-{suffix}, the stub {home}/lib64/stubs/libcuda.so (deploy.py installs CUDA "
        f"{{cuda}} with it), {RESTART}"),
    Signature(
        "cuda-headers-other-release", "TOOLKIT_TORCH_MISMATCH",
        "nvcc compiled with another release's CUDA headers",
        # nvcc 13.0 with CUDA 12.8's include directory first: its generated stub calls
        # __cudaLaunch with the 13.0 arguments, 12.8's crt/host_runtime.h defines the old
        # macro (tests/fixtures/failures/nvcc-13.0-headers-12.8.log).
        (r"macro \"__cudaLaunch\" passed \d+ arguments, but takes just \d+",
         r"crt/host_runtime\.h:\d+: note: macro \"__cudaLaunch\" defined here"),
        "The compiler and the CUDA headers it found first are of different releases: another toolkit's "
        "include directory comes before the compiler's own (an -I flag, an extra include path), so its "
        "crt/host_runtime.h does not match the code nvcc generates.",
        "build with one toolkit: no other toolkit's include directory in the build's include flags, and "
        f"{SERVICE_TOOLKIT} ({BY_DEPLOY}), {RESTART}"),
    Signature(
        "cudart-other-release", "TOOLKIT_TORCH_MISMATCH",
        "a JIT module was linked against another CUDA release's runtime",
        # FlashInfer links -L$CUDA_HOME/lib64 -lcudart: CUDA_HOME at a 12.8 toolkit (nvcc from
        # FLASHINFER_NVCC) gives a module needing libcudart.so.12 in a CUDA 13 venv.
        (r"libcudart\.so\.\d+: cannot open shared object file",),
        "A JIT module was built against the CUDA runtime of another release than torch's: CUDA_HOME named "
        "another toolkit when it was linked (the compiler may have been the right one, through FLASHINFER_NVCC), "
        "and that runtime is not loadable in the service.",
        f"drop FLASHINFER_NVCC from {{env_file}} and {SERVICE_TOOLKIT} ({BY_DEPLOY}); the JIT relinks its "
        f"modules for the new CUDA home; {RESTART}"),
    # The driver layer. Nothing here could record these (no node of this project
    # has the hardware): each pattern is a text quoted from the public report cited beside it,
    # and its sample in tests/fixtures/failures/public-*.log says so in its header.
    Signature(
        "open-module-required", "DRIVER_OPEN_MODULE_REQUIRED",
        "the proprietary kernel module refused a GPU that needs the open modules",
        # The kernel log of a Blackwell GPU under the proprietary module (awslabs/amazon-eks-ami#2769,
        # NVIDIA/open-gpu-kernel-modules#862): "NVRM: installed in this system requires use of the
        # NVIDIA open kernel modules."
        (r"requires use of the NVIDIA open kernel modules",),
        "The GPU (Blackwell: compute capability 10.x or 12.x) runs only on NVIDIA's open kernel modules, and "
        "the proprietary module is loaded: it does not initialise the GPU, nvidia-smi says \"No devices were "
        "found\" and CUDA sees no device.",
        "switch to the open modules (NVIDIA's driver installation guide: Debian `apt-get install --autoremove "
        "--purge nvidia-open`, Ubuntu `apt-get install --autoremove --purge nvidia-open nvidia-driver-open`) and "
        f"reboot; validate.py reports DRIVER_OPEN_MODULE_REQUIRED with the branch, {RESTART}"),
    Signature(
        "rm-init-adapter-failed", "DRIVER_NOT_LOADED",
        "the kernel module failed to initialise a GPU",
        # "NVRM: GPU 0000:57:00.0: RmInitAdapter failed! (0x22:0x56:897)" (awslabs/amazon-eks-ami#2769;
        # NVIDIA/open-gpu-kernel-modules#326, #789 for other causes).
        (r"RmInitAdapter failed!",),
        "The NVIDIA module is loaded but could not bring the GPU up: nvidia-smi lists no device and CUDA cannot "
        "start. The line before it in the kernel log says why: the proprietary module on a GPU that needs the "
        "open ones (DRIVER_OPEN_MODULE_REQUIRED), or GSP firmware that did not boot (\"Cannot initialize GSP "
        "firmware RM\").",
        "read the kernel log around it (`journalctl -k -b | grep NVRM`); for the open-modules line switch to "
        "the open modules (`apt-get install --autoremove --purge nvidia-open`); otherwise reboot (a cold power cycle for firmware errors) and update the driver, "
        f"{RESTART}"),
    Signature(
        "nvml-library-mismatch", "DRIVER_LIBRARY_MISMATCH",
        "the user-space driver and the loaded kernel module are of different versions",
        # nvidia-smi after an unattended upgrade of the driver's user space
        # (NVIDIA/ubuntu-packaging-nvidia-driver#3; illinois-scicomp/machine-shop-maintenance#70).
        (r"Failed to initialize NVML: Driver/library version mismatch",),
        "The driver's libraries (libnvidia-ml, libcuda) were upgraded while the older kernel module stayed "
        "loaded: NVML and CUDA refuse a module of another version until the installed module is loaded.",
        "reboot; or, with nothing using the GPUs, `systemctl stop sglang nvidia-persistenced; modprobe -r "
        "nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia nvidia_uvm`; then `apt-mark hold` the "
        f"driver's packages (validate.py names them: DRIVER_NOT_HELD), {RESTART}"),
    Signature(
        "fabric-manager-version", "FABRIC_MANAGER_VERSION",
        "Fabric Manager is at another version than the driver",
        # nv-fabricmanager's refusal (NVIDIA/gpu-operator#544: "don't"; NVIDIA/nvtrust#55 quotes it
        # with a typographic apostrophe; later releases print "doesn't").
        (r"fabric manager NVIDIA GPU driver interface version \S+ do(?:n.t|esn.t) match with driver version",),
        "nvidia-fabricmanager refused to start: its version is not the loaded driver's. On an NVSwitch node the "
        "GPUs' fabric is then never set up and CUDA fails with \"Error 802: system not yet initialized\".",
        "install Fabric Manager at exactly the driver's version (`apt-get install 'nvidia-fabricmanager=<driver "
        "version>*'` and `apt-mark hold nvidia-fabricmanager`), `systemctl restart nvidia-fabricmanager`, "
        f"{RESTART}"),
    Signature(
        "cuda-system-not-initialized", "FABRIC_NOT_READY",
        "CUDA found the system not yet initialised (error 802)",
        # torch on an NVSwitch node whose Fabric Manager is not running (dstackai/dstack#2348).
        (r"Error 802: system not yet initialized",),
        "CUDA error 802 (cudaErrorSystemNotReady): on an NVSwitch node (HGX H100/H200/B200) the GPUs' fabric is "
        "not set up, because nvidia-fabricmanager is missing, inactive, or at another version than the driver "
        "(NVLink5 also needs NVLSM); nvidia-smi still lists the GPUs.",
        "`systemctl status nvidia-fabricmanager` and `journalctl -u nvidia-fabricmanager`; install or start it at "
        "the driver's version (validate.py reports FABRIC_MANAGER_*), wait for `nvidia-smi -q` to show Fabric "
        f"State: Completed on every GPU, {RESTART}"),
    Signature(
        "mig-device-ordinal", "MIG_ENABLED",
        "a rank asked for a CUDA device a MIG process cannot see",
        # pytorch/pytorch#130181 (two MIG slices, one process per rank): "device >= 0 && device <
        # num_gpus INTERNAL ASSERT FAILED".
        (r"device >= 0 && device < num_gpus INTERNAL ASSERT FAILED",),
        "With MIG on, a CUDA process enumerates one MIG device only: the ranks of a tensor- or data-parallel "
        "server ask for devices 1, 2, ... that do not exist for them. SGLang's NCCL needs whole GPUs.",
        "turn MIG off on the service's GPUs (`nvidia-smi -i <gpus> -mig 0`, then reset or reboot), or run the "
        f"server on one GPU or slice (no --tp-size/--dp-size above 1), {RESTART}"),
    Signature(
        "nccl-duplicate-gpu", "MIG_ENABLED",
        "NCCL found two ranks on one physical GPU",
        # NCCL's init (NVIDIA/nccl#1241, NVIDIA/Megatron-LM#661): "Duplicate GPU detected : rank 3 and
        # rank 0 both on CUDA device f000"; NCCL identifies a MIG slice by its parent GPU (NVIDIA/nccl#1716).
        (r"Duplicate GPU detected : rank \d+ and rank \d+ both on CUDA device",),
        "Two ranks of one communicator sit on the same physical GPU: MIG slices of one GPU (NCCL sees their "
        "parent device, and MIG has no P2P), or two ranks given the same device (CUDA_VISIBLE_DEVICES).",
        "give each rank a whole GPU of its own: turn MIG off (`nvidia-smi -i <gpus> -mig 0`) and check "
        f"CUDA_VISIBLE_DEVICES in the service's environment, {RESTART}"),
    Signature(
        "exec-bad-interpreter", "SERVICE_ENTRY_POINT_BROKEN",
        "systemd could not execute the unit's program (status=203/EXEC)",
        # systemd's journal for an ExecStart script whose "#!" names a missing interpreter, and
        # bash's own words for it (systemd/systemd#3038; a venv's script: astral-sh/uv#2744).
        (r"Failed at step EXEC spawning \S+: (?:No such file or directory|Permission denied)",
         r"status=203/EXEC\b", r": bad interpreter: "),
        "systemd starts the unit's ExecStart program with execve(); for a script the kernel starts the "
        "interpreter its #! line names and says \"No such file or directory\" both when the script is missing "
        "and when that interpreter is (systemd names the script; a shell says \"bad interpreter\", naming the "
        "interpreter). A venv copied from another path or node keeps the old path in its scripts' #! lines: "
        "its bin/python answers, its bin/sglang cannot start.",
        "read the script's first line (`head -n 1 <venv_path>/bin/sglang`): validate.py names the script and its "
        "interpreter (SERVICE_ENTRY_POINT_BROKEN); build the venv at its path on this node, or let deploy build a "
        f"managed venv (venv_managed: true), {RESTART}"),
    Signature(
        "no-accelerator", "CUDA_UNAVAILABLE",
        "SGLang found no usable GPU",
        # sglang/srt/utils/common.py get_device, from the unit's own start on a node whose
        # driver cannot be used (tests/fixtures/failures/service-start-no-gpu.log).
        (r"No accelerator \(CUDA[^)]*\) or platform plugin is available",),
        "torch in the service found no CUDA device it can use, whatever nvidia-smi lists: the driver is not "
        "loaded or cannot run torch's CUDA build, or the GPUs are hidden from the service (CUDA_VISIBLE_DEVICES, "
        "/dev/nvidia* permissions, a container without them).",
        "check what the service sees: `nvidia-smi`, then as the service user with its environment "
        "`python -c 'import torch; print(torch.cuda.is_available())'` in the venv; load or upgrade the driver "
        "(validate.py reports DRIVER_NOT_LOADED, DRIVER_TOO_OLD) or give the service the GPUs, "
        f"{RESTART}"),
)


@dataclass(frozen=True)
class Match:
    """A signature found in a log: the first line that matched (1-based ``line_number``)."""

    signature: Signature
    line_number: int
    line: str

    def fix(self, context=None):
        return self.signature.fix.format(**(context or DEFAULT_CONTEXT).values())


def unit_failing(unit):
    """Whether a ``service_unit`` fact (docs/facts.md) shows a failing unit: failed,
    waiting to restart after a failure, or restarted since it was last started by hand.

    >>> unit_failing({"active_state": "active", "sub_state": "running", "restarts": 0})
    False
    >>> unit_failing({"active_state": "active", "sub_state": "running", "restarts": 2})
    True
    """
    if not unit:
        return False
    return (unit.get("active_state") == "failed" or unit.get("sub_state") == "auto-restart"
            or (unit.get("restarts") or 0) > 0)


def unit_state_text(unit):
    """How a failing unit is, in words.

    >>> unit_state_text({"name": "sglang.service", "active_state": "failed", "sub_state": "failed",
    ...                  "result": "exit-code", "restarts": 0})
    'sglang.service failed (exit-code)'
    """
    name, restarts = unit.get("name", "the unit"), unit.get("restarts") or 0
    tries = f"{restarts} automatic restart(s)"
    if unit.get("active_state") == "failed":
        return f"{name} failed ({unit.get('result')}){f' after {tries}' if restarts else ''}"
    if unit.get("sub_state") == "auto-restart":
        return f"{name} failed ({unit.get('result')}) and waits to be restarted{f' ({tries} so far)' if restarts else ''}"
    return f"{name} keeps failing: {tries} since it was started, now {unit.get('active_state')} ({unit.get('sub_state')})"


def shorten(line, width=160):
    """A log line for a one-line message: at most ``width`` characters.

    >>> shorten("x" * 10, 6)
    'xxxxx…'
    """
    return line if len(line) <= width else line[:width - 1] + "…"


def clean_lines(text):
    """A log's text -> its lines, colour codes and carriage returns dropped.

    >>> clean_lines("\\x1b[31mERROR\\x1b[0m x\\r\\nnext")
    ['ERROR x', 'next']
    """
    return [redact.log_line(ANSI.sub("", line).rstrip("\r")) for line in text.splitlines()]


def xid_matches(lines):
    """The driver's Xid lines in ``lines`` as ``GPU_XID`` causes: one Match per GPU and Xid
    (its first line), in log order, at most ``xid.MAX_EVENTS``; the title names the Xid,
    the GPU and NVIDIA's action (``xid.describe``), the fix is that action's.

    >>> [m.signature.title for m in xid_matches(["NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."])]
    ["the driver logged Xid 79 on GPU 0000:3b:00.0: GPU has fallen off the bus; NVIDIA's action: reboot"]
    """
    found = {}
    for number, line in enumerate(lines, 1):
        event = xid.parse_xid_line(line) if "NVRM: Xid" in line[:xid.MAX_LINE] else None
        key = event and (event.bus_id, event.xid)
        if key in found:
            found[key][3] += 1
        elif event and len(found) < xid.MAX_EVENTS:
            found[key] = [number, line, event, 1]
    matches = []
    for number, line, event, count in found.values():
        row = xid.event_action(event)
        lines_seen = f" ({count} lines of it here)" if count > 1 else ""
        means = (f"The NVIDIA driver reported Xid {event.xid} ({row.name}) for the GPU at {event.bus_id}{lines_seen}. "
                 f"NVIDIA's Xid catalog gives the action {row.action} (severity here: {row.severity}).")
        # The fix is formatted with the Context's values: braces from the table stay braces.
        advice = row.advice.replace("<bus id>", event.bus_id).replace("{", "{{").replace("}", "}}")
        fix = f"{advice}; NVIDIA's Xid catalog: https://{xid.CATALOG.split(' ')[0]}"
        matches.append(Match(Signature(f"xid-{event.xid}", "GPU_XID", xid.describe(event), (), means, fix),
                             number, line.strip()))
    return matches


def explain(lines):
    """The known causes in ``lines`` (a log's lines): the driver's Xids (``xid_matches``),
    then one Match per signature found, in the table's order (causes before their
    consequences).

    >>> [m.signature.code for m in explain(["RuntimeError: FlashInfer requires GPUs with sm75 or higher"])]
    ['FLASHINFER_ARCH_TRAP']
    >>> explain(["ninja: build stopped: subcommand failed."])
    []
    """
    lines = [redact.log_line(ANSI.sub("", line)) for line in lines]
    matches = xid_matches(lines)
    for signature in SIGNATURES:
        # The signature's first pattern that matches is quoted: its patterns go from the
        # most telling line to the least (systemd's "Failed at step EXEC spawning <script>"
        # before its "status=203/EXEC"), and a log cut at its start may hold the latter first.
        found = next(([(number, line) for number, line in enumerate(lines, 1) if pattern.search(line)]
                      for pattern in signature.compiled if any(pattern.search(line) for line in lines)), [])
        if found:
            # A traceback quotes the raising source line, indented, before the message
            # itself: show the message.
            number, line = next((item for item in found if not item[1][:1].isspace()), found[0])
            matches.append(Match(signature, number, line.strip()))
    return matches


def render(matches, source, count, context=None):
    """The CLI's report of ``matches`` found in ``count`` lines of ``source``."""
    if not matches:
        return f"{source}: no known cause in {count} line(s)"
    out = [f"{source}: {len(matches)} known cause(s)"]
    for match in matches:
        signature = match.signature
        out += ["", f"{signature.code}: {signature.title} (line {match.line_number})",
                f"  log:   {match.line}", f"  means: {signature.means}", f"  fix:   {match.fix(context)}"]
    return "\n".join(out)


def read_log(path):
    """A log file's (or stdin's, for ``-``) text; bytes that are not UTF-8 are replaced."""
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", errors="replace")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bringup.explain", description=__doc__.split("\n\n")[0])
    parser.add_argument("log", help="the log file, or - for stdin (e.g. journalctl -u sglang -o cat)")
    parser.add_argument("--config", help="YAML settings (bringup.config) the fixes name; default: the defaults")
    args = parser.parse_args(argv)
    source = "stdin" if args.log == "-" else args.log
    try:
        settings = {}
        if args.config:
            with open(args.config, encoding="utf-8") as handle:
                settings = yamlload.load(handle) or {}  # an alias bomb is refused as it loads
            if not isinstance(settings, dict):
                raise ValueError(f"expected a mapping of settings, got {type(settings).__name__}")
        context = Context.from_config(Config.from_data(settings))
        lines = clean_lines(read_log(args.log))
    except OSError as error:
        print(f"error: {error.strerror}: {error.filename}", file=sys.stderr)
        return EXIT_ERROR
    except (yaml.YAMLError, ConfigError, ValueError) as error:
        print(f"error: {args.config}: {error}", file=sys.stderr)
        return EXIT_ERROR
    matches = explain(lines)
    print_out(render(matches, source, len(lines), context))
    return EXIT_FOUND if matches else EXIT_UNKNOWN


if __name__ == "__main__":
    sys.exit(main())
