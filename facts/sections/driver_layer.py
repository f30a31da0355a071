"""The ``driver_layer`` section: the driver layer's raw sections (``driver-*``, files/probe.d/
driver_layer.sh ``probe_driver_layer``) -> the facts document's ``driver_layer`` (docs/facts.md).

Pure functions over the texts NVIDIA's and the distribution's tools print (recorded
samples in tests/fixtures/driver, each with its source). A tool or file the node lacks is
a fact (null, false or []); a text these parsers do not recognise gives null fields,
never an error: the driver layer informs findings, it does not gate the probe.
"""

import re

from bringup.facts_kinds import BOOL, INT, OPT_STR, OPT_VERSION, STR, VERSION, Items, Optional, Values
from facts.probe_framing import Key, ProbeSection

# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ..." (open)
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Wed Jan 22 ..." (proprietary)
BANNER = re.compile(r"(?P<open>Open )?Kernel Module(?: for \S+)?\s+(?P<version>\d+(?:\.\d+)+)")
# modinfo's license: the open modules are "Dual MIT/GPL", the proprietary ones "NVIDIA".
LICENSE_FLAVOURS = {"Dual MIT/GPL": "open", "NVIDIA": "proprietary"}
NVML_LIBRARY = re.compile(r"libnvidia-ml\.so\.(?P<version>\d+(?:\.\d+)+)$")
# dkms 3: "nvidia/580.95.05, 6.1.0-26-amd64, x86_64: installed"; dkms 2: "nvidia, 535.104.05, 5.15.0-88-generic,
# x86_64: installed"; a module added but built for no kernel: "nvidia/580.95.05: added".
DKMS_LINE = re.compile(r"^(?P<module>[^,/:\s]+)(?:/|, )(?P<version>[^,:\s]+)"
                       r"(?:, (?P<kernel>[^,:\s]+)(?:, [^,:\s]+)?)?: (?P<status>.+)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TOPO_GPU = re.compile(r"^GPU(?P<index>\d+)$")
UNITS = ("nvidia-persistenced", "nvidia-fabricmanager", "nvlsm")
REDIRECTS = ("ReqRedir+", "CmpltRedir+")


def parse_module_banner(text):
    """``/proc/driver/nvidia/version`` -> (first line, version, flavour); Nones for nothing.

    >>> parse_module_banner("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build")[1:]
    ('565.57.01', 'open')
    >>> parse_module_banner("NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  Mon Sep 12 19:21:56 UTC 2022")[1:]
    ('515.76', 'proprietary')
    """
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return None, None, None
    match = BANNER.search(lines[0])
    if not match:
        return lines[0], None, None
    return lines[0], match["version"], "open" if match["open"] else "proprietary"


def loaded_module(proc_text, sys_text):
    """The loaded module from its banner (``/proc/driver/nvidia/version``), else from
    ``/sys/module/nvidia/version`` (version only); each argument None when absent.

    >>> loaded_module(None, "580.95.05\\n")
    {'loaded': True, 'version': '580.95.05', 'flavour': None, 'banner': None}
    >>> loaded_module(None, None)["loaded"]
    False
    """
    banner, version, flavour = parse_module_banner(proc_text)
    sys_version = (sys_text or "").strip() or None
    if sys_version and not re.fullmatch(r"\d+(?:\.\d+)+", sys_version):
        sys_version = None
    return {"loaded": proc_text is not None or sys_text is not None, "version": version or sys_version,
            "flavour": flavour, "banner": banner}


def parse_modinfo(text):
    """``modinfo nvidia`` (its version and license lines) -> the installed module, or None
    when modinfo names no module.

    >>> parse_modinfo("filename:       /lib/modules/6.1.0-26-amd64/updates/dkms/nvidia.ko\\n"
    ...               "version:        580.95.05\\nlicense:        Dual MIT/GPL")
    {'version': '580.95.05', 'license': 'Dual MIT/GPL', 'flavour': 'open'}
    """
    fields = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("filename", "version", "license") and key not in fields:
            fields[key] = value.strip()
    if not fields.get("filename") and not fields.get("version"):
        return None
    version = fields.get("version")
    if version and not re.fullmatch(r"\d+(?:\.\d+)+", version):
        version = None
    license_ = fields.get("license") or None
    return {"version": version, "license": license_, "flavour": LICENSE_FLAVOURS.get(license_)}


def nvml_versions(lines):
    """The versions in the names of ``libnvidia-ml.so.<version>`` files, sorted, once each.

    >>> nvml_versions(["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05"])
    ['580.95.05']
    """
    versions = {match["version"] for line in lines if (match := NVML_LIBRARY.search(line.strip()))}
    return sorted(versions, key=lambda version: [int(part) for part in version.split(".")])


# dpkg's package name grammar (deb-control(5): "Package").
PACKAGE_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")


def driver_packages(lines):
    """``dpkg-query`` lines (``status|name|version``) -> the installed packages, with
    whether dpkg holds them (selection ``hold``: the status's first letter ``h``).

    >>> driver_packages(["hi |nvidia-driver-580-open|580.95.05-0ubuntu1", "rc |nvidia-driver-570|570.86.15-1"])
    [{'name': 'nvidia-driver-580-open', 'version': '580.95.05-0ubuntu1', 'held': True}]

    A name dpkg's grammar refuses (lower case letters, digits, ``+ - .``) is not a package
    (plans write names into apt's configuration):

    >>> driver_packages(['ii |nvidia-x";};APT::X{"y|1-1'])
    []
    """
    packages = []
    for line in lines:
        fields = line.strip().split("|")
        if len(fields) == 3 and len(fields[0]) >= 2 and fields[0][1] == "i" and PACKAGE_NAME.fullmatch(fields[1]):
            packages.append({"name": fields[1], "version": fields[2], "held": fields[0][0] == "h"})
    return sorted(packages, key=lambda package: package["name"])


def nouveau_state(lines, cmdline_words):
    """The ``driver-nouveau`` lines and the kernel's blacklist arguments -> nouveau's state.

    >>> nouveau_state(["loaded=no", "blacklist=/etc/modprobe.d/blacklist-nouveau.conf"], [])
    {'loaded': False, 'blacklisted': True}
    >>> nouveau_state(["loaded=yes"], ["modprobe.blacklist=nouveau"])
    {'loaded': True, 'blacklisted': True}
    """
    blacklisted = any(line.startswith("blacklist=") for line in lines)
    for word in cmdline_words:
        key, _, value = word.partition("=")
        if key in ("modprobe.blacklist", "module_blacklist", "rd.driver.blacklist") and "nouveau" in value.split(","):
            blacklisted = True
    return {"loaded": "loaded=yes" in lines, "blacklisted": blacklisted}


def unit_states(text, names=UNITS):
    """``systemctl show -p Id -p LoadState -p ActiveState -p UnitFileState`` of the driver's
    daemons (``names``; the imex section's nvidia-imex too) -> {name: states}; a unit
    systemd does not report is ``not-found``.

    >>> unit_states("Id=nvlsm.service\\nLoadState=not-found\\nActiveState=inactive\\nUnitFileState=\\n")["nvlsm"]
    {'load_state': 'not-found', 'active_state': 'inactive', 'unit_file_state': ''}
    """
    units = {name: {"load_state": "not-found", "active_state": "inactive", "unit_file_state": ""} for name in names}
    for block in re.split(r"\n\s*\n", text or ""):
        values = dict(line.partition("=")[::2] for line in block.splitlines() if "=" in line)
        name = values.get("Id", "").removesuffix(".service")
        if name in units:
            units[name] = {"load_state": values.get("LoadState", "not-found"),
                           "active_state": values.get("ActiveState", "inactive"),
                           "unit_file_state": values.get("UnitFileState", "")}
    return units


def parse_smi_query(text):
    """``nvidia-smi -q`` (whole, or as the probe cuts it) -> one object per GPU, in the
    order it lists them (the index order): bus id, persistence mode, current MIG mode,
    fabric state and status; a field the driver does not print is None.

    >>> parse_smi_query("GPU 00000000:18:00.0\\n    Persistence Mode                      : Enabled\\n"
    ...                 "    MIG Mode\\n        Current                           : Disabled\\n")[0]["mig_mode"]
    'Disabled'
    """
    gpus, block = [], None
    for line in (text or "").splitlines():
        if line.startswith("GPU ") and not line.startswith("GPU  "):
            gpus.append({"index": len(gpus), "bus_id": line[4:].strip() or None, "persistence_mode": None,
                         "mig_mode": None, "fabric_state": None, "fabric_status": None})
            continue
        if not gpus or not line.startswith("    "):
            continue
        gpu = gpus[-1]
        key, sep, value = line.strip().partition(":")
        key, value = key.strip(), value.strip()
        if not line.startswith("        "):
            block = key
            if sep and key == "Persistence Mode":
                gpu["persistence_mode"] = value
        elif not line.startswith("         ") and sep:
            field = {("MIG Mode", "Current"): "mig_mode", ("Fabric", "State"): "fabric_state",
                     ("Fabric", "Status"): "fabric_status", ("PCI", "Bus Id"): "bus_id"}.get((block, key))
            if field:
                gpu[field] = value
    return gpus


def parse_topology(text):
    """``nvidia-smi topo -m`` -> the GPU pairs and their link (``NV18``, ``PIX``, ``PXB``,
    ``PHB``, ``NODE``, ``SYS``), each pair once (a < b); None when no matrix is there.
    The header is the first line that starts with ``GPU0`` and is no row (a row has ``X``
    on its diagonal); terminal escapes around it are dropped.

    >>> parse_topology("\\tGPU0\\tGPU1\\tCPU Affinity\\tNUMA Affinity\\nGPU0\\t X \\tNV3\\t0-47\\t\\tN/A\\n"
    ...                "GPU1\\tNV3\\t X \\t0-47\\t\\tN/A")
    [{'a': 0, 'b': 1, 'link': 'NV3'}]
    """
    rows = [ANSI.sub("", line).split() for line in (text or "").splitlines()]
    header = next((cells for cells in rows if cells[:1] == ["GPU0"] and "X" not in cells), None)
    if header is None:
        return None
    columns = []
    for cell in header:
        match = TOPO_GPU.match(cell)
        if not match:
            break
        columns.append(int(match["index"]))
    pairs = []
    for cells in rows:
        row = TOPO_GPU.match(cells[0]) if cells and cells is not header and "X" in cells else None
        if not row or len(cells) <= len(columns):
            continue
        a = int(row["index"])
        for b, link in zip(columns, cells[1:1 + len(columns)]):
            if a < b:
                pairs.append({"a": a, "b": b, "link": link})
    return sorted(pairs, key=lambda pair: (pair["a"], pair["b"]))


def acs_paths(path_lines, controls):
    """The bridges above each GPU (``gpu bridge...``, root port first) with their ACS
    control; ``ctl`` is "" where lspci shows none (no ACS capability, or not read as root).

    >>> acs_paths(["0000:18:00.0 0000:15:01.0 0000:17:00.0"], {"0000:17:00.0": "SrcValid+ ReqRedir+ CmpltRedir+"})[1]
    {'gpu_bus_id': '0000:18:00.0', 'bridge': '0000:17:00.0', 'ctl': 'SrcValid+ ReqRedir+ CmpltRedir+', 'redirect': True}
    """
    entries = []
    for line in path_lines:
        gpu, *bridges = line.split()
        for bridge in bridges:
            ctl = controls.get(bridge, "")
            entries.append({"gpu_bus_id": gpu, "bridge": bridge, "ctl": ctl,
                            "redirect": any(flag in ctl.split() for flag in REDIRECTS)})
    return entries


def parse_dkms_status(text):
    """``dkms status`` (dkms 2 and 3) -> [{"module", "version", "kernel", "status"}];
    ``kernel`` is "" for a module added but built for no kernel; other lines are skipped.

    >>> parse_dkms_status("nvidia/570.172.08, 6.12.10-76061203-generic, x86_64: installed")
    [{'module': 'nvidia', 'version': '570.172.08', 'kernel': '6.12.10-76061203-generic', 'status': 'installed'}]
    >>> parse_dkms_status("nvidia, 460.91.03, 5.11.0-36-generic, x86_64: installed")[0]["version"]
    '460.91.03'
    """
    entries = []
    for line in (text or "").splitlines():
        match = DKMS_LINE.match(line.strip())
        if match:
            entries.append({"module": match["module"], "version": match["version"], "kernel": match["kernel"] or "",
                            "status": match["status"].strip()})
    return entries


def installed_kernels(lines):
    """The ``installed=<release>|<headers yes/no>|<initramfs>`` lines of ``driver-kernel``
    -> [{"release", "headers", "initramfs"}], by release.

    >>> installed_kernels(["release=6.1.0-26-amd64", "installed=6.1.0-28-amd64|no|stale", "installed=x|yes"])
    [{'release': '6.1.0-28-amd64', 'headers': False, 'initramfs': 'stale'}]
    """
    kernels = []
    for line in lines:
        key, _, value = line.partition("=")
        fields = value.split("|")
        if key == "installed" and len(fields) == 3 and fields[0] and fields[2] in ("none", "current", "stale"):
            kernels.append({"release": fields[0], "headers": fields[1] == "yes", "initramfs": fields[2]})
    return sorted(kernels, key=lambda kernel: kernel["release"])


def _assignments(section):
    return dict(line.partition("=")[::2] for line in (section.lines if section else []) if "=" in line)


def _text_if(section, ok=(0,)):
    return section.text if section is not None and section.rc in ok else None


def driver_layer(by_name):
    """The ``driver-*`` sections (files/probe.d/driver_layer.sh probe_driver_layer) -> ``driver_layer``;
    None from a probe without them (an older release)."""
    if "driver-kernel" not in by_name:
        return None
    proc, sys_version = by_name.get("driver-proc-version"), by_name.get("driver-sys-version")
    modinfo = by_name.get("driver-modinfo")
    packages = by_name.get("driver-packages")
    units = by_name.get("driver-units")
    smi = by_name.get("driver-smi-q")
    topo = by_name.get("driver-topo")
    dkms = by_name.get("driver-dkms")
    kernel = _assignments(by_name["driver-kernel"])
    reboot = by_name.get("driver-reboot")
    reboot_lines = reboot.lines if reboot else []
    cmdline = [line.strip() for line in (by_name["driver-cmdline"].lines if "driver-cmdline" in by_name else [])
               if line.strip()]
    paths = [line for line in (by_name["driver-pci-paths"].lines if "driver-pci-paths" in by_name else [])
             if line.strip()]
    acs = by_name.get("driver-acs")
    switches = by_name.get("driver-nvswitch")
    return {
        "module": loaded_module(_text_if(proc), _text_if(sys_version)),
        "installed_module": parse_modinfo(modinfo.text) if modinfo is not None and modinfo.rc == 0 else None,
        "nvml_libraries": nvml_versions(by_name["driver-nvml"].lines if "driver-nvml" in by_name else []),
        "packages": driver_packages(packages.lines) if packages is not None and packages.rc == 0 else [],
        "nouveau": nouveau_state(by_name["driver-nouveau"].lines if "driver-nouveau" in by_name else [], cmdline),
        "nvswitch_count": int(switches.text) if switches is not None and switches.text.strip().isdigit() else 0,
        "units": unit_states(units.text if units is not None and units.rc == 0 else ""),
        "gpus": parse_smi_query(smi.text) if smi is not None and smi.rc == 0 else [],
        "kernel": {"release": kernel.get("release", ""), "headers": kernel.get("headers") == "yes",
                   "installed": installed_kernels(by_name["driver-kernel"].lines)},
        "dkms": parse_dkms_status(dkms.text) if dkms is not None and dkms.rc != 127 else None,
        "reboot_required": {"required": "required=yes" in reboot_lines,
                            "packages": [line.strip() for line in reboot_lines[1:] if line.strip()]},
        "iommu_args": [word for word in cmdline if "iommu" in word.partition("=")[0]],
        "acs": [] if not paths else None if acs is None or acs.rc == 127 else
        acs_paths(paths, {line.split(" ", 1)[0]: line.split(" ", 1)[1].strip() for line in acs.lines if " " in line}),
        "topology": parse_topology(topo.text) if topo is not None and topo.rc == 0 else None,
    }


SECTION = ProbeSection(
    name="driver_layer",
    group=5,
    raw=("driver-proc-version", "driver-sys-version", "driver-modinfo", "driver-nvml", "driver-packages",
         "driver-nouveau", "driver-nvswitch", "driver-units", "driver-smi-q", "driver-topo", "driver-kernel",
         "driver-dkms", "driver-reboot", "driver-cmdline", "driver-pci-paths", "driver-acs"),
    keys={
        # The contract the driver findings read: absent or null in an older report.
        "driver_layer": Key(
            parse=driver_layer,
            schema=Optional({
                "module": {"loaded": BOOL, "version": OPT_VERSION, "flavour": OPT_STR, "banner": OPT_STR},
                "installed_module": Optional({"version": OPT_VERSION, "license": OPT_STR, "flavour": OPT_STR}),
                "nvml_libraries": Items(VERSION),
                "packages": Items({"name": STR, "version": STR, "held": BOOL}),
                "nouveau": {"loaded": BOOL, "blacklisted": BOOL},
                "nvswitch_count": INT,
                "units": Values({"load_state": STR, "active_state": STR, "unit_file_state": STR}),
                "gpus": Items({
                    "index": INT,
                    "bus_id": OPT_STR,
                    "persistence_mode": OPT_STR,
                    "mig_mode": OPT_STR,
                    "fabric_state": OPT_STR,
                    "fabric_status": OPT_STR,
                }),
                "kernel": {
                    "release": STR,
                    "headers": BOOL,
                    "installed": Items({"release": STR, "headers": BOOL, "initramfs": STR}),
                },
                "dkms": Optional(Items({"module": STR, "version": STR, "kernel": STR, "status": STR})),
                "reboot_required": {"required": BOOL, "packages": Items(STR)},
                "iommu_args": Items(STR),
                "acs": Optional(Items({"gpu_bus_id": STR, "bridge": STR, "ctl": STR, "redirect": BOOL})),
                "topology": Optional(Items({"a": INT, "b": INT, "link": STR})),
            }),
            meaning=(
                "the layer below nvidia-smi: the loaded and the installed kernel module, the user space and driver "
                "packages, nouveau, NVSwitches and the driver's daemons, each GPU's persistence, MIG and fabric "
                "state, DKMS and headers, a pending reboot, the IOMMU arguments, the ACS control above each GPU and "
                "the GPUs' topology; null (or absent) from an older probe"
            ),
        ),
    },
)
