"""Findings: the stable codes a plan reports, their severities and what each means.

docs/findings.md's table is this registry; tests check that every code used
here is documented there. A code may also name the cause of a failed start that
``python -m bringup.explain`` found in a log (bringup/explain.py): ``CUDA_UNAVAILABLE``
is only that, never a finding of its own; the planner reports a failing unit as
``SERVICE_FAILED``, naming the cause's code.
"""

from dataclasses import asdict, dataclass

BLOCKER, FIX, WARNING, INFO = "blocker", "fix", "warning", "info"
SEVERITIES = (BLOCKER, FIX, WARNING, INFO)

CODES = {
    "UNSUPPORTED_OS": "No NVIDIA CUDA repository serves this OS/architecture and no mirror distro is set.",
    "NO_GPU": "nvidia-smi lists no GPU (or is missing), the PCI bus shows no NVIDIA GPU and no target_sms are "
              "configured.",
    "DRIVER_NOT_LOADED": "nvidia-smi is installed but cannot talk to the driver, or lists no GPU while the PCI bus "
                         "shows NVIDIA GPUs (named, with their count and model).",
    "DRIVER_TOO_OLD": "The driver cannot run torch's CUDA build, or is below the GPU's floor.",
    "DRIVER_CUDA_BELOW_TOOLKIT": "The driver's newest CUDA is older than the toolkit (minor-version compatibility only).",
    "SM_UNKNOWN": "A GPU's compute capability is not in this release's tables.",
    "SM_NEEDS_NEWER_CUDA": "torch's CUDA build (and so the toolkit) cannot target a GPU's SM.",
    "TORCH_LACKS_SM": "torch carries no code that runs on a GPU's SM.",
    "MIXED_GPUS": "The node has GPUs of different SMs; every SM is built for.",
    "PYTHON_TOO_OLD": "The node's python3 is older than SGLang needs (3.11); deploy fixes it where the archive "
                      "has a newer CPython.",
    "PYTHON_UNUSABLE": "The only CPython >= 3.11 the distribution's archive has cannot run the stack (Ubuntu 22.04's "
                       "3.11.0rc1: torch._dynamo does not import).",
    "VENV_PYTHON_UNUSABLE": "venv_python names a CPython the venv cannot be built with: not there, changeable by a "
                            "user other than root (then never run), older than 3.11, a pre-release, or without venv "
                            "support.",
    "VENV_LOCK_MISMATCH": "The explicit venv lock is resolved for another CPython or CPU than the venv's.",
    "VENV_LOCK_MISSING": "No venv lock (or uv bootstrap lock) exists for the venv's CPython and the node's CPU.",
    "LOCK_OMITS_PACKAGE": "The venv lock leaves a package out (no wheel for this CPython); what needs it is "
                          "unavailable.",
    "REPO_UNVERIFIED": "No evidence that NVIDIA serves this distro/arch repository directory.",
    "TOOLKIT_UNLOCKED": "No toolkit lock for this platform (or it lacks a package): apt would pick the versions.",
    "LOCK_NOT_SERVED": "The node's apt lists of the CUDA repository do not serve a locked version deploy would "
                       "install.",
    "TOOLKIT_LOCK_DRIFT": "Installed toolkit packages differ from the toolkit lock's versions.",
    "TOOLKIT_MISSING": "The toolkit matching torch's CUDA build is not installed.",
    "TOOLKIT_TORCH_MISMATCH": "The service environment resolves a toolkit other than torch's CUDA build.",
    "CUDA_HOME_NOT_EXPLICIT": "The service environment does not set CUDA_HOME to the chosen toolkit.",
    "FLASHINFER_ARCH_TRAP": "FlashInfer would build no, or the wrong, target arch in the service environment.",
    "PATH_SHADOWS_CUDA_HOME": "A login shell's first nvcc is not the chosen toolkit's.",
    "CUDA_SYMLINK_DRIFT": "/usr/local/cuda points at another toolkit than the chosen one.",
    "VENV_STACK_DRIFT": "The venv's torch, FlashInfer or SGLang differs from the configured stack.",
    "VENV_BROKEN": "The venv exists but its torch cannot be imported.",
    "APT_LOCKED": "Another process holds apt's or dpkg's lock: deploy waits for it, at most "
                  "deploy_apt_lock_timeout seconds, before it changes anything.",
    "APT_SOURCE_CONFLICT": "Another apt source serves the CUDA repository: adopted when its key is the pinned one, else disabled.",
    "SERVICE_ENV_OVERRIDDEN": "The service env file sets a key the plan manages to another value; deploy resets it.",
    "VENV_UNREADABLE": "The service user cannot read the external venv (a directory on its way is closed to others).",
    "SERVICE_USER_FOREIGN": "service_user names an account deploy did not create (the SSH user, a system account) "
                            "or a home already there: deploy never takes one over.",
    "SERVICE_PATH_UNREACHABLE": "A directory on the way to the venv (its target, its interpreter) or the cache "
                                "directory keeps the service user out: a fix where deploy made it, else a blocker.",
    "UNSAFE_PATH": "A directory on the way to the managed venv or the env file can be changed by a non-root user.",
    "JIT_CACHE_COLD": "FlashInfer's JIT cache holds no modules for the planned arch list.",
    "DEEP_GEMM_PRECOMPILE": "prewarm_deep_gemm is set: deploy compiles DeepGEMM's kernels for service_model on the GPUs.",
    "DEEP_GEMM_NOT_PRECOMPILED": "prewarm_deep_gemm is set but cannot run here (no model, no GPU, or GPUs without DeepGEMM).",
    "TARGET_SMS_FROM_CONFIG": "No GPU on the node; the configured target_sms are built for.",
    "GPU_STANDIN": "gpu_standin is set: the node's GPU driver is the test bed's declared stand-in (no CUDA device).",
    "OTHER_TOOLKITS": "Other toolkits are installed; they stay, but no longer resolve.",
    "SERVICE_FAILED": "The SGLang unit failed or keeps restarting; its journal's known cause (bringup/explain.py) is named.",
    "SERVICE_OPEN": "The server listens beyond loopback (service_host) with no API key: anyone reaching the port "
                    "can use the GPUs.",
    "SERVICE_ENTRY_POINT_BROKEN": "The program the unit's ExecStart runs (the external venv's bin/sglang) cannot "
                                  "start: missing, or its #! names an interpreter that is missing, not executable, "
                                  "another venv's or another user's (a venv copied from another path).",
    "SERVICE_NOT_SERVING_READY": "No service_model: the unit is written but not enabled, so the node serves nothing "
                                 "after deploy.",
    "API_KEY_FILE_UNUSABLE": "The API key's source on the control machine (service_api_key_source) or its file on "
                             "the node (service_api_key_file) cannot be used: missing, a link, wrong owner or mode, "
                             "unreadable to the service user.",
    "API_KEY_FILE_UPLOAD": "Deploy uploads the API key file from service_api_key_source (root:<service group> 0640).",
    "SERVICE_ARGS_CONFLICT": "service_args has a --config of its own beside service_api_key_file; SGLang takes one.",
    # Where service_model comes from (bringup/plan/model_source.py).
    "MODEL_SOURCE": "Where service_model comes from: a local directory, the service's hub cache, or the hub.",
    "MODEL_OFFLINE": "The hub does not answer from the node and the service's hub cache holds the model: deploy "
                     "writes HF_HUB_OFFLINE=1.",
    "MODEL_MISSING": "service_model names a local path that is no directory with a config.json.",
    "MODEL_UNREADABLE": "The service user cannot read service_model's directory or its hub cache entry.",
    "MODEL_UNAVAILABLE": "service_model is a hub id neither in the service's hub cache nor given by the hub from the "
                         "node: SGLang would retry the hub and never serve.",
    "CUDA_UNAVAILABLE": "A failed start's log shows torch finding no usable GPU, whatever nvidia-smi lists (explain only).",
    # The driver layer (bringup/plan/driver.py).
    "DRIVER_OPEN_MODULE_REQUIRED": "A Blackwell GPU (compute capability 10.x or 12.x) with the proprietary kernel module "
                                   "loaded or installed: it runs only on NVIDIA's open kernel modules.",
    "DRIVER_PROPRIETARY_MODULE_REQUIRED": "driver_flavour: open on a GPU older than Turing (compute capability below "
                                          "7.5): NVIDIA's open kernel modules do not drive it.",
    "DRIVER_LIBRARY_MISMATCH": "The loaded kernel module's version differs from the user-space driver's (NVML): "
                               "NVML and CUDA refuse to start until a reboot or a module reload.",
    "FABRIC_MANAGER_MISSING": "An NVSwitch node without Fabric Manager: CUDA fails with Error 802 (system not yet "
                              "initialized).",
    "FABRIC_MANAGER_VERSION": "Fabric Manager's version differs from the loaded driver's: it refuses to start.",
    "FABRIC_MANAGER_INACTIVE": "Fabric Manager is installed on an NVSwitch node but its unit is not active.",
    "NVLSM_MISSING": "An NVLink5 node (NVSwitch, compute capability 10.x) without NVLSM.",
    "FABRIC_NOT_READY": "A GPU's NVSwitch fabric state is not Completed: CUDA cannot start on it yet.",
    "FABRIC_MANAGER_NOT_ON_GB200": "Fabric Manager is installed or enabled on a Grace-Blackwell compute tray (GB200, "
                                   "GB300), which needs IMEX instead.",
    "IMEX_MISSING": "A Grace-Blackwell compute tray (GB200, GB300) without NVIDIA IMEX (nvidia-imex).",
    "IMEX_VERSION": "nvidia-imex's version differs from the loaded driver's.",
    "IMEX_INACTIVE": "nvidia-imex is installed on a Grace-Blackwell compute tray but its unit is not active.",
    "IMEX_NO_CHANNEL": "No IMEX channel (/dev/nvidia-caps-imex-channels/channelN) on a Grace-Blackwell compute tray: "
                       "fabric-handle cuMemCreate fails with CUDA_ERROR_NOT_PERMITTED.",
    "IMEX_NODES_CONFIG_EMPTY": "/etc/nvidia-imex/nodes_config.cfg is missing or lists no address: the IMEX domain is "
                               "this tray alone.",
    "GPU_XID": "The driver logged an Xid on a GPU: \"the driver logged Xid N on GPU <bus id>: <NVIDIA's description>; "
               "NVIDIA's action: <action>\" (NVIDIA's Xid catalog, bringup/xid.py).",
    "NOUVEAU_LOADED": "The nouveau module is loaded and holds the GPUs.",
    "NOUVEAU_NOT_BLACKLISTED": "nouveau is not blacklisted: a boot that loads it leaves no GPU for the NVIDIA module.",
    "NOUVEAU_INITRAMFS_STALE": "A kernel's initramfs does not hold the nouveau blacklist: a boot of it loads nouveau.",
    "DRIVER_CANONICAL": "Canonical's NVIDIA driver (ubuntu-drivers) is installed: named with its branch, flavour "
                        "and module source, and what deploy does with it (adopt, replace, or nothing).",
    "DRIVER_NOT_HELD": "The driver's packages are not held: an unattended upgrade moves user space past the loaded "
                       "module.",
    "PERSISTENCE_OFF": "Persistence mode is off: every CUDA start pays the GPUs' initialisation.",
    "DKMS_NOT_BUILT": "DKMS has not built the NVIDIA module for the running kernel.",
    "KERNEL_HEADERS_MISSING": "No headers for the running kernel: DKMS cannot build the NVIDIA module.",
    "KERNEL_HEADERS_PENDING": "An installed kernel newer than the running one (the next boot's) has no headers: DKMS cannot build the NVIDIA "
                              "module for it.",
    "REBOOT_PENDING": "A reboot is pending for the driver's (or the kernel's) packages.",
    "P2P_ACS_REDIRECT": "ACS redirects P2P traffic between the GPUs of a multi-GPU PCIe node to the root complex.",
    "P2P_IOMMU": "The IOMMU translates the GPUs' P2P traffic on a multi-GPU PCIe node (no iommu=pt).",
    "MIG_ENABLED": "MIG is on for a GPU: SGLang's NCCL cannot use the slices.",
    # The GPUs' hardware health (bringup/plan/health.py): NVIDIA's action in each fix; a
    # blocker where that action is a GPU reset, a reboot or a replacement, unless the
    # operator accepts it (gpu_health_accept: then a warning naming the acceptance).
    "GPU_RESET_REQUIRED": "nvidia-smi answers \"[GPU requires reset]\" for a GPU: the driver refuses it until it is "
                          "reset (NVML_ERROR_RESET_REQUIRED).",
    "GPU_ECC_UNCORRECTABLE": "A GPU counted uncorrectable ECC errors since the driver loaded: NVIDIA's action is a "
                             "GPU reset.",
    "GPU_PAGE_RETIREMENT_PENDING": "A GPU (pre-Ampere) has memory pages pending retirement: they are retired at the "
                                   "next driver load (a GPU reset or a reboot).",
    "GPU_ROW_REMAP_PENDING": "A GPU has memory rows pending remapping: a GPU reset applies them.",
    "GPU_ROW_REMAP_FAILED": "A GPU's row remapping failed: NVIDIA's action is to drain the node and replace the board "
                            "(RMA).",
    "GPU_PCIE_LINK_DEGRADED": "A GPU's PCIe link trained narrower than its maximum width (or, while busy, at a lower "
                              "generation): reseat the board or check the riser and slot.",
    "GPU_SLOWDOWN": "A GPU's clocks are held down by a hardware, thermal or power-brake slowdown, or it runs at its "
                    "slowdown temperature.",
    "GPU_MISSING_FROM_DRIVER": "The PCI bus shows more NVIDIA GPUs than nvidia-smi lists: a GPU fell off the bus (Xid "
                               "79); reboot, and reseat it if it recurs.",
    "GPU_PASSED_THROUGH": "NVIDIA GPUs on the PCI bus are bound to vfio-pci (handed to virtual machines): not "
                          "counted among the host's GPUs.",
    "GPU_HEALTH_UNREAD": "The GPUs' health could not be read (nvidia-smi's health query failed or timed out, or the "
                         "kernel log could not be read): the health findings say nothing of what was not read.",
    # NVIDIA's diagnostic when the operator asks for it (gpu_diag; bringup/plan/diag.py).
    "GPU_DIAG_FAILED": "A test of NVIDIA's diagnostic (`dcgmi diag`, the gpu_diag setting) failed on a GPU: DCGM's "
                       "message and the action its severity asks (reset, isolate and contact support, fix the "
                       "configuration); a blocker unless accepted (gpu_health_accept) or only to be monitored.",
    "GPU_DIAG_WARNING": "NVIDIA's diagnostic passed a test on a GPU with a warning, or skipped it (a skipped test is "
                        "not a pass).",
    "GPU_DIAG_NOT_RUN": "gpu_diag asked for NVIDIA's diagnostic and it was not run: the service is active or a "
                        "process holds a GPU (it needs idle GPUs), or DCGM's dcgmi is not installed.",
    "GPU_DIAG_UNREAD": "NVIDIA's diagnostic ran but its answer could not be read (no JSON, a DCGM major version this "
                       "release does not parse, DCGM's own runtime error, or it ran past its time).",
    # The DCGM step (gpu_diag_install; bringup/plan/dcgm.py).
    "DCGM_LOCK_MISSING": "gpu_diag_install is set but there is no DCGM lock for the distro and CPU (or it cannot be "
                         "read, or lacks a package of files/locks/dcgm-4.in): nothing of DCGM is installed.",
    "DCGM_INSTALL": "gpu_diag_install: deploy installs NVIDIA's DCGM at its lock's versions, or enables, starts or "
                    "restarts nvidia-dcgm (stopped, disabled, or running packages dpkg has since replaced).",
    # The driver step (bringup/plan/driver_step.py).
    "DRIVER_REBOOT_NEEDED": "driver_manage installs a kernel module that loads only at the next boot: deploy "
                            "reboots the host (driver_reboot: if-needed) or leaves it `needs reboot`.",
    "DRIVER_LOCK_MISSING": "driver_manage is set but there is no driver lock for the branch, distro and CPU "
                           "(or it lacks the flavour).",
    # Serving groups (issue 38): a member's own (bringup/plan/serving_group.py), then the group's
    # preflight over every member's plan (bringup/group_preflight.py).
    "GROUP_NO_ROUTE": "The member does not resolve or route to the group's peer (the head), or that address is its "
                      "own.",
    "GROUP_INTERFACE_UNDECIDED": "The interface NCCL and Gloo should use could not be named from the route: they "
                                 "pick one themselves.",
    "GROUP_PEERMEM_MISSING": "RDMA ports are active and nvidia_peermem is not loaded: GPUDirect RDMA is off.",
    "GROUP_MEMBERS_MISSING": "The run plans only part of a serving group (--limit, unreachable or refused members).",
    "GROUP_STACK_DIFFERS": "The members of a serving group plan different stacks (locks, driver branch, CUDA).",
    "GROUP_MODEL_SOURCE_DIFFERS": "The members of a serving group take the model from different sources.",
    "GROUP_RENDEZVOUS_CLOSED": "A member does not reach the head's rendezvous port (SGLang's --dist-init-addr) "
                               "while the head listens on it.",
    "GROUP_RENDEZVOUS_UNCHECKED": "The head could not listen on its rendezvous port to let the members try it.",
    "GROUP_GPUS_MISMATCH": "GPUs per member times members do not match the parallelism service_args asks for.",
    "GROUP_RDMA_MIXED": "Some members of a serving group have active InfiniBand/RoCE ports and others none.",
}


# The health codes gpu_health_accept may name (bringup/settings.py).
HEALTH_CODES = ("GPU_RESET_REQUIRED", "GPU_ECC_UNCORRECTABLE", "GPU_PAGE_RETIREMENT_PENDING", "GPU_ROW_REMAP_PENDING", "GPU_ROW_REMAP_FAILED",
                "GPU_PCIE_LINK_DEGRADED", "GPU_SLOWDOWN", "GPU_MISSING_FROM_DRIVER", "GPU_XID",
                "GPU_DIAG_FAILED")


@dataclass(frozen=True)
class Finding:
    """One thing the plan found: a stable ``code``, a ``severity``, a ``message``
    naming what was seen and expected, and the ``fix``."""

    code: str
    severity: str
    message: str
    fix: str

    def __post_init__(self):
        if self.code not in CODES:
            raise ValueError(f"undocumented finding code {self.code}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity}")

    def as_dict(self):
        return asdict(self)
