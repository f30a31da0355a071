"""The ``service`` section: the service's environment and the CUDA FlashInfer resolves in it -> ``resolution``, ``service_env``.

Its shell fragment is files/probe.d/service.sh (``probe_service``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import BOOL, OPT_STR, OPT_VERSION, STR, Optional, Values
from bringup.layout import toolkit_home
from bringup.planned_env import OWNED_ENV_KEYS
from facts.probe_framing import Key, ProbeSection, parse_assignments, parse_nvcc_release
from facts.sections.venv import venv_stack


def resolution(by_name, torch):
    """What FlashInfer resolves in the service environment (files/probe.d/service.sh probe_service)."""
    service = by_name.get("service-env")
    values = parse_assignments(service.text) if service else {}
    home, via = values.get("home"), values.get("via") or "none"
    nvcc = by_name.get("resolved-nvcc")
    version = parse_nvcc_release(nvcc.text) if nvcc and nvcc.rc == 0 else None
    result = {
        "cuda_home": home,
        "version": version,
        "via": via,
        "nvcc_ok": version is not None,
        "env_file": values.get("env_file") == "present",
        "env_file_refused": values.get("env_file") == "refused",
        "path": values.get("PATH"),
        "arch_list_env": values.get("FLASHINFER_CUDA_ARCH_LIST"),
        "workspace_base": values.get("FLASHINFER_WORKSPACE_BASE"),
    }
    if version is None and torch and torch.get("cuda"):
        # get_cuda_version() falls back to torch.version.cuda when nvcc cannot run.
        result["version"] = torch["cuda"]
        result["via"] = f"{via}+torch-fallback"
    return result


def service_env_values(section):
    """The asked-for keys' values as the service's env file sets them (absent keys omitted).

    >>> from facts.probe_framing import Section
    >>> service_env_values(Section("service-env", 0, (), ["home=/x", "env.CUDA_HOME=/opt/cuda-12.8"]))
    {'CUDA_HOME': '/opt/cuda-12.8'}
    """
    return _prefixed(section, "env.")


def _prefixed(section, prefix, keep=None):
    """The section's ``<prefix>KEY=value`` lines as {KEY: value}, only ``keep``'s keys when given."""
    if section is None:
        return {}
    return {key[len(prefix):]: value or "" for key, value in parse_assignments(section.text).items()
            if key.startswith(prefix) and (keep is None or key[len(prefix):] in keep)}


def service_env_owned(section):
    """The keys deploy's record says it wrote for a reason of its own (``<env file>.deploy-owned``)
    whose value the env file still holds, with that value (absent keys omitted).

    >>> from facts.probe_framing import Section
    >>> service_env_owned(Section("service-env", 0, (), ["env.PATH=/usr/bin", "owned.GLOO_SOCKET_IFNAME=eth0",
    ...                                                   "owned.HF_TOKEN=hf_x"]))
    {'GLOO_SOCKET_IFNAME': 'eth0'}
    """
    # Only the keys deploy ever records: nothing else of the env file reaches a report.
    return _prefixed(section, "owned.", OWNED_ENV_KEYS)


SECTION = ProbeSection(
    name="service",
    group=3,
    raw=("service-env", "resolved-nvcc"),
    keys={
        "resolution": Key(
            parse=lambda by_name: resolution(by_name, venv_stack(by_name.get("venv"))[0]),
            schema={
                "cuda_home": OPT_STR,
                "version": OPT_VERSION,
                "via": STR,
                "nvcc_ok": BOOL,
                "env_file": BOOL,
                "arch_list_env": OPT_STR,
            },
            meaning="what FlashInfer/SGLang resolve in the service's environment",
            partial=True,
        ),
        "service_env": Key(
            parse=lambda by_name: service_env_values(by_name.get("service-env")),
            schema=Optional(Values(OPT_STR)),
            meaning=(
                "the values the service env file gives the keys the plan manages (`PROBE_ENV_KEYS`, which the "
                "command always sets, so the remote session's environment cannot name more; the operator's own keys "
                "are never read out); null only in an older or hand-edited report"
            ),
            example={"CUDA_HOME": toolkit_home("12.8")},
        ),
        "service_env_owned": Key(
            parse=lambda by_name: service_env_owned(by_name.get("service-env")),
            schema=Optional(Values(OPT_STR)),
            meaning=(
                "the env file keys deploy wrote for a reason of its own (its record `<env file>.deploy-owned`, "
                "root's alone) whose value the file still holds: deploy takes them back once the reason is gone "
                "(a serving group's NCCL/Gloo keys after the host left its group); null only in an older report"
            ),
            example={"GLOO_SOCKET_IFNAME": "ens1f0np0"},
        ),
    },
    reads={"resolution": ("service", "venv")},
)
