"""The sandbox's NVIDIA-style apt repository, used the way a node uses NVIDIA's.

A throwaway Debian 12 root (an overlay on sandbox.image.base_root(), which is
never modified) with /proc and /dev mounted, inside a private mount namespace
so nothing stays mounted if the test dies. It trusts the repository through a
deb822 source whose Signed-By keyring is made from the served .pub after its
fingerprint was checked, runs apt-get update with signature checking on and
installs NVIDIA's package names; nvcc 13.0 then compiles a curand kernel for
sm_120f and links a shared object against the libcuda stub. The repository
carries two CUDA 13.0 patch releases (the older set installs with =version,
then upgrades) and CUDA 12.8, whose ptxas is NVIDIA's and whose nvcc is the
version-reporting stand-in. A repository signed by another key must be refused.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.sandbox_fixtures import require_sandbox_host

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from sandbox import aptrepo  # noqa: E402
from sandbox.aptrepo.sign import GnuPG, show_fingerprints  # noqa: E402

pytestmark = pytest.mark.sandbox

CUDA_HOME = "/usr/local/cuda-13.0"
CUDA_12_8 = "/usr/local/cuda-12.8"
PACKAGES = ["cuda-nvcc-13-0", "cuda-cudart-dev-13-0", "libcurand-dev-13-0", "cuda-driver-dev-13-0"]
# The two CUDA 13.0 release sets of wheels.lock (cuda-toolkit 13.0.0 = GA, 13.0.2),
# without cuBLAS (the same 13.0.2.14 in both, and slow to install).
CUDA_13_0_GA = {"cuda-nvcc-13-0": "13.0.48-1", "cuda-crt-13-0": "13.0.48-1", "libnvvm-13-0": "13.0.48-1",
                "cuda-cccl-13-0": "13.0.50-1", "cuda-cudart-13-0": "13.0.48-1",
                "cuda-cudart-dev-13-0": "13.0.48-1", "cuda-driver-dev-13-0": "13.0.48-1",
                "cuda-toolkit-13-0-config-common": "13.0.48-1"}
CUDA_13_0_U2 = {"cuda-nvcc-13-0": "13.0.88-1", "cuda-crt-13-0": "13.0.88-1", "libnvvm-13-0": "13.0.88-1",
                "cuda-cccl-13-0": "13.0.85-1", "cuda-cudart-13-0": "13.0.96-1",
                "cuda-cudart-dev-13-0": "13.0.96-1", "cuda-driver-dev-13-0": "13.0.96-1",
                "cuda-toolkit-13-0-config-common": "13.0.96-1"}
CUDA_12_8_U1 = {"cuda-nvcc-12-8": "12.8.93-1", "cuda-crt-12-8": "12.8.93-1", "cuda-nvvm-12-8": "12.8.93-1",
                "cuda-cccl-12-8": "12.8.90-1", "cuda-cudart-12-8": "12.8.90-1",
                "cuda-cudart-dev-12-8": "12.8.90-1", "cuda-driver-dev-12-8": "12.8.90-1",
                "cuda-toolkit-12-8-config-common": "12.8.90-1"}
KEYRING = "/etc/apt/keyrings/cuda-sandbox.gpg"
# apt reads only this parts dir (and no sources.list), so the test needs
# nothing from Debian's mirrors and sees exactly the source under test.
SOURCE_PARTS = "/etc/apt/cuda-sandbox.sources.d"
APT_SOURCES = f"-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts={SOURCE_PARTS}"
APT = f"apt-get {APT_SOURCES} -o Acquire::Retries=0"

CU_SOURCE = r"""
#include <curand_kernel.h>

__global__ void fill_uniform(float *out, unsigned long long seed, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    curandStatePhilox4_32_10_t state;
    curand_init(seed, i, 0, &state);
    out[i] = curand_uniform(&state);
}

extern "C" int launch_fill(float *out, int n) {
    fill_uniform<<<(n + 127) / 128, 128>>>(out, 42ULL, n);
    return (int)cudaGetLastError();
}
"""

# No curand: the smallest kernel that still runs nvcc, cicc, ptxas and fatbinary.
SMALL_CU = "__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }\n"

# PTX that ptxas 12.8 takes for sm_120a (PTX ISA 8.7 is CUDA 12.8's).
SMALL_PTX = """.version 8.7
.target sm_120a
.address_size 64

.visible .entry noop()
{
\tret;
}
"""
# What NVIDIA's ptxas 12.8.93 answers for the family target 12.9 introduced (exit 255).
PTXAS_12_8_SM_120F = "ptxas fatal   : Value 'sm_120f' is not defined for option 'gpu-name'\n"


def _host_ready() -> None:
    require_sandbox_host(("unshare", "mount", "chroot", "gpg", "gpgconf", "dpkg-deb", "gcc"))


def _base_root() -> Path:
    from sandbox import image
    return Path(image.base_root())


class OverlayNode:
    """A writable overlay on the cached base root; each run() mounts it privately."""

    def __init__(self, base: Path, tmp: Path):
        self.base = base
        self.upper = tmp / "upper"
        self.work = tmp / "work"
        self.merged = tmp / "merged"
        for d in (self.upper, self.work, self.merged):
            d.mkdir(parents=True)

    def put(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write a file into the node (through the upper layer)."""
        rel = Path(path.lstrip("/"))
        for part in reversed(rel.parents[:-1]):  # new upper dirs keep the lower dir's mode
            d = self.upper / part
            if not d.is_dir():
                d.mkdir()
                lower = self.base / part
                os.chmod(d, lower.stat().st_mode & 0o7777 if lower.is_dir() else 0o755)
        dest = self.upper / rel
        dest.write_bytes(data.encode() if isinstance(data, str) else data)
        os.chmod(dest, mode)

    def run(self, script: str, timeout: int = 900) -> subprocess.CompletedProcess:
        mount = (
            'set -e\n'
            'mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4"\n'
            'mount -t proc proc "$4/proc"\n'
            'mount --bind /dev "$4/dev"\n'
            'exec chroot "$4" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin '
            'HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive /bin/bash -c "$5"\n'
        )
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh",
               str(self.base), str(self.upper), str(self.work), str(self.merged), script]
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)


def _ok(proc: subprocess.CompletedProcess, what: str) -> str:
    assert proc.returncode == 0, f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}"
    return proc.stdout


def _fetch(url: str) -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as resp:
        return resp.read()


def _trusted_keyring(info: dict, tmp: Path) -> bytes:
    """Download the served .pub, check its fingerprint, return it dearmored."""
    asc = tmp / "key.asc"
    asc.write_bytes(_fetch(info["key_url"]))
    fprs = show_fingerprints(asc, tmp / "scratch-gnupg")
    assert fprs == [info["fingerprint"]], f"served key {fprs} is not the announced {info['fingerprint']}"
    assert aptrepo.FINGERPRINT_FILE.read_text().strip() == info["fingerprint"]
    out = tmp / "keyring.gpg"
    subprocess.run(["gpg", "--homedir", str(tmp / "scratch-gnupg"), "--batch", "--yes", "--dearmor",
                    "--output", str(out), str(asc)], check=True)
    return out.read_bytes()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _sources(url: str) -> str:
    # A flat repository: the suite is "/" and there are no components.
    return f"Types: deb\nURIs: {url}\nSuites: /\nSigned-By: {KEYRING}\n"


def _trust_and_update(node: "OverlayNode", served: dict, tmp: Path) -> None:
    node.put(KEYRING, _trusted_keyring(served, tmp))
    node.put(f"{SOURCE_PARTS}/cuda-sandbox.sources", _sources(served["repo_url"]))
    out = _ok(node.run(f"{APT} update"), "apt-get update")
    assert "W:" not in out and "E:" not in out, out


def _installed(node: "OverlayNode") -> dict[str, str]:
    out = _ok(node.run("dpkg-query -W -f '${Package} ${Version}\\n'"), "dpkg-query")
    return dict(line.split(" ", 1) for line in out.splitlines())


def _index() -> dict[str, list[str]]:
    """Package -> versions, as the served Packages index lists them."""
    versions: dict[str, list[str]] = {}
    for stanza in (aptrepo.REPO_DIR / "Packages").read_text().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if line[:1] != " " and ": " in line)
        versions.setdefault(fields["Package"], []).append(fields["Version"])
    return versions


@pytest.fixture(scope="module")
def served():
    _host_ready()
    was_running = aptrepo.running()
    info = aptrepo.ensure_served()
    yield info
    # Only the server this module started, and never under a parallel run: the other
    # worker's nodes may be installing from it.
    if not was_running and "PYTEST_XDIST_WORKER" not in os.environ:
        aptrepo.stop(pid=info["pid"])


@pytest.fixture
def node(tmp_path):
    _host_ready()
    return OverlayNode(_base_root(), tmp_path / "node")


def test_server_json_and_layout(served):
    assert served == aptrepo.running()
    assert served["url"] == f"http://127.0.0.1:{served['port']}/compute/cuda/repos/"
    fpr = served["fingerprint"]
    assert len(fpr) == 40 and fpr == fpr.upper() and int(fpr, 16) >= 0
    assert served["key_url"] == f"{served['url']}debian12/x86_64/{fpr[-8:].lower()}.pub"
    assert (aptrepo.GNUPGHOME.stat().st_mode & 0o777) == 0o700
    release = _fetch(served["url"] + "debian12/x86_64/Release").decode()
    assert "Origin: NVIDIA\n" in release and "Label: NVIDIA CUDA\n" in release
    for name in ("InRelease", "Release.gpg", "Packages", "Packages.gz", "cuda-keyring_1.1-1_all.deb"):
        assert (aptrepo.REPO_DIR / name).is_file(), name
    # A second serve is a no-op reporting the same server; a rebuild changes nothing.
    again, started = aptrepo.serve()
    assert not started and again["pid"] == served["pid"]
    before = {p.name: p.stat().st_mtime_ns for p in aptrepo.REPO_DIR.iterdir()}
    assert aptrepo.build(dirs=[aptrepo.HOME_DIR])["changed"] is False
    assert {p.name: p.stat().st_mtime_ns for p in aptrepo.REPO_DIR.iterdir()} == before


def test_install_toolkit_and_compile_sm120f(served, node, tmp_path):
    node.put(KEYRING, _trusted_keyring(served, tmp_path))
    node.put(f"{SOURCE_PARTS}/cuda-sandbox.sources", _sources(served["repo_url"]))

    out = _ok(node.run(f"{APT} update"), "apt-get update")
    assert "W:" not in out and "E:" not in out, out

    out = _ok(node.run(f"{APT} install -y --no-install-recommends {' '.join(PACKAGES)}"), "apt-get install")
    # A plain install takes the newest 13.0 patch release (cuda-toolkit 13.0.2's set).
    installed = _installed(node)
    expected = {**CUDA_13_0_U2, "libcurand-13-0": "10.4.0.35-1", "libcurand-dev-13-0": "10.4.0.35-1"}
    assert {p: installed.get(p) for p in expected} == expected, installed

    # config-common registered the alternatives NVIDIA's does.
    links = _ok(node.run("readlink -f /usr/local/cuda; readlink -f /usr/local/cuda-13"), "readlink")
    assert links.split() == [CUDA_HOME, CUDA_HOME]

    version = _ok(node.run(f"{CUDA_HOME}/bin/nvcc --version"), "nvcc --version")
    assert "release 13.0, V13.0.88\n" in version, version

    node.put("/root/t/sample.cu", CU_SOURCE)
    compiled = _ok(node.run(
        f"cd /root/t && mkdir -p keep && {CUDA_HOME}/bin/nvcc -gencode=arch=compute_120f,code=sm_120f "
        "-Xcompiler -fPIC -Xptxas -v --keep --keep-dir keep -c sample.cu -o sample.o 2>&1 && "
        "grep -m1 '^.target' keep/sample.ptx && strings -a sample.o | grep -e '-arch sm_'"), "nvcc -c")
    # 13.0 has no cuobjdump wheel on PyPI: check what ptxas compiled for, the PTX
    # target, and the ptxas options recorded in the cubin embedded in the object.
    assert "Compiling entry function '_Z12fill_uniformPfyi' for 'sm_120f'" in compiled, compiled
    assert ".target sm_120f\n" in compiled, compiled
    assert "-arch sm_120f " in compiled, compiled

    # Link a shared object the way FlashInfer's JIT does (-lcuda from lib64/stubs).
    linked = _ok(node.run(
        f"cd /root/t && {CUDA_HOME}/bin/nvcc -shared -o libsample.so sample.o "
        f"-lcuda -L{CUDA_HOME}/lib64/stubs -Xlinker --trace && test -s libsample.so && "
        f"readelf -d {CUDA_HOME}/lib64/stubs/libcuda.so"), "nvcc -shared -lcuda")
    assert f"{CUDA_HOME}/lib64/stubs/libcuda.so" in linked, linked
    assert "Library soname: [libcuda.so.1]" in linked, linked


def test_index_lists_both_13_0_releases_and_12_8(served):
    index = _index()
    for release in (CUDA_13_0_GA, CUDA_13_0_U2, CUDA_12_8_U1):
        for pkg, version in release.items():
            assert version in index.get(pkg, []), f"{pkg} {version} not in Packages: {index.get(pkg)}"
    assert sorted(index["cuda-nvcc-13-0"]) == ["13.0.48-1", "13.0.88-1"]
    # One cuBLAS and one cuRAND serve both 13.0 sets.
    assert index["libcublas-13-0"] == ["13.0.2.14-1"] and index["libcurand-13-0"] == ["10.4.0.35-1"]


def test_older_13_0_release_pinned_then_upgraded(served, node, tmp_path):
    _trust_and_update(node, served, tmp_path)
    policy = _ok(node.run(f"apt-cache {APT_SOURCES} policy cuda-nvcc-13-0"), "apt-cache policy")
    assert "Candidate: 13.0.88-1\n" in policy and " 13.0.48-1 500\n" in policy, policy

    # The whole GA set, each package at its =version: its (>= ...) Depends hold.
    pins = " ".join(f"{p}={v}" for p, v in CUDA_13_0_GA.items())
    _ok(node.run(f"{APT} install -y --no-install-recommends {pins}"), "apt-get install 13.0 GA set")
    installed = _installed(node)
    assert {p: installed.get(p) for p in CUDA_13_0_GA} == CUDA_13_0_GA, installed
    version = _ok(node.run(f"{CUDA_HOME}/bin/nvcc --version"), "nvcc --version")
    assert "release 13.0, V13.0.48\n" in version, version
    # nvcc 13.0.48 finds cicc (bin/cicc in that nvvm wheel) where nvcc.profile looks: nvvm/bin.
    node.put("/root/t/twice.cu", SMALL_CU)
    compiled = _ok(node.run(f"cd /root/t && {CUDA_HOME}/bin/nvcc -gencode=arch=compute_120f,code=sm_120f "
                            "-Xptxas -v -c twice.cu -o twice.o 2>&1"), "nvcc 13.0.48 -c")
    assert "Compiling entry function '_Z5twicePf' for 'sm_120f'" in compiled, compiled

    # A plain install upgrades nvcc, and its (>= 13.0.88) Depends pull crt and nvvm along.
    out = _ok(node.run(f"{APT} install -y --no-install-recommends cuda-nvcc-13-0"), "apt-get install upgrade")
    assert "3 upgraded, 0 newly installed" in out, out
    installed = _installed(node)
    assert [installed[p] for p in ("cuda-nvcc-13-0", "cuda-crt-13-0", "libnvvm-13-0")] == ["13.0.88-1"] * 3
    assert installed["cuda-cudart-13-0"] == "13.0.48-1"  # not asked for, not needed: left alone
    version = _ok(node.run(f"{CUDA_HOME}/bin/nvcc --version"), "nvcc --version")
    assert "release 13.0, V13.0.88\n" in version, version


def test_cuda_12_8_real_ptxas_and_standin_nvcc(served, node, tmp_path):
    _trust_and_update(node, served, tmp_path)
    _ok(node.run(f"{APT} install -y --no-install-recommends cuda-nvcc-12-8 cuda-cudart-dev-12-8"),
        "apt-get install 12.8")
    installed = _installed(node)
    assert {p: installed.get(p) for p in CUDA_12_8_U1} == CUDA_12_8_U1, installed

    # bin/nvcc is the stand-in (12.8's wheels have no nvcc driver) ...
    nvcc = _ok(node.run(f"head -2 {CUDA_12_8}/bin/nvcc; {CUDA_12_8}/bin/nvcc --version"), "nvcc --version")
    assert "# SANDBOX STAND-IN -- NOT NVIDIA's nvcc.\n" in nvcc, nvcc
    assert "release 12.8, V12.8.93\n" in nvcc, nvcc
    # ... ptxas, libNVVM, libdevice and the crt headers are NVIDIA's.
    ptxas = _ok(node.run(f"{CUDA_12_8}/bin/ptxas --version"), "ptxas --version")
    assert ptxas.startswith("ptxas: NVIDIA (R) Ptx optimizing assembler\n"), ptxas
    assert "release 12.8, V12.8.93\n" in ptxas, ptxas
    _ok(node.run(f"cd {CUDA_12_8} && test -f nvvm/libdevice/libdevice.10.bc && test -f include/crt/host_config.h "
                 "&& readelf -d nvvm/lib64/libnvvm.so | grep -F '[libnvvm.so.4]' && test -f include/cuda_runtime.h "
                 "&& test -f include/thrust/version.h && test -f lib64/stubs/libcuda.so"), "12.8 layout")

    node.put("/root/p/small.ptx", SMALL_PTX)
    refused = node.run(f"cd /root/p && {CUDA_12_8}/bin/ptxas -arch=sm_120f small.ptx -o f.cubin")
    assert (refused.returncode, refused.stdout) == (255, PTXAS_12_8_SM_120F), refused
    taken = _ok(node.run(f"cd /root/p && {CUDA_12_8}/bin/ptxas -v -arch=sm_120a small.ptx -o a.cubin && "
                         "readelf -h a.cubin"), "ptxas -arch=sm_120a")
    assert "Compiling entry function 'noop' for 'sm_120a'" in taken, taken
    assert "NVIDIA CUDA architecture" in taken, taken

    # config-common registers /usr/local/cuda at 128: a 13.0 toolkit (130) takes it over.
    links = "readlink -f /usr/local/cuda /usr/local/cuda-12"
    assert _ok(node.run(links), "readlink").split() == [CUDA_12_8, CUDA_12_8]
    _ok(node.run(f"{APT} install -y cuda-toolkit-13-0-config-common"), "install 13.0 config-common")
    assert _ok(node.run(links), "readlink").split() == [CUDA_HOME, CUDA_12_8]


def test_cuda_keyring_package_sets_up_the_source(served, node, tmp_path):
    """The NVIDIA way: install cuda-keyring, then apt-get update with its source."""
    node.put(KEYRING, _trusted_keyring(served, tmp_path))
    node.put(f"{SOURCE_PARTS}/cuda-sandbox.sources", _sources(served["repo_url"]))
    _ok(node.run(f"{APT} update && {APT} install -y cuda-keyring"), "install cuda-keyring")
    listed = _ok(node.run("cat /etc/apt/sources.list.d/cuda-debian12-x86_64.list"), "cat list")
    assert listed == (f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
                      f"{served['repo_url']} /\n")
    fprs = _ok(node.run("gpg --batch --with-colons --show-keys /usr/share/keyrings/cuda-archive-keyring.gpg"
                        " 2>/dev/null | grep ^fpr"), "gpg --show-keys")
    assert served["fingerprint"] in fprs.upper(), fprs
    # An origin pin, as a deploy would write one against same-named distro packages.
    node.put("/etc/apt/preferences.d/cuda-repository-pin-600",
             "Package: *\nPin: release o=NVIDIA,l=NVIDIA CUDA\nPin-Priority: 600\n")
    # Only the keyring's own source now (no sources.list, no test source).
    out = _ok(node.run("apt-get -o Dir::Etc::SourceList=/dev/null -o Acquire::Retries=0 update && "
                       "apt-cache -o Dir::Etc::SourceList=/dev/null policy cuda-nvcc-13-0"),
              "apt-get update via cuda-keyring")
    assert "W:" not in out, out
    assert "Candidate: 13.0.88-1" in out and "13.0.88-1 600" in out, out


def test_repo_signed_by_another_key_is_refused(served, node, tmp_path):
    # The real repository's indexes, re-signed with a key apt was never told about.
    forged = tmp_path / "forged"
    repo = forged / "compute/cuda/repos/debian12/x86_64"
    repo.mkdir(parents=True)
    for name in ("Packages", "Packages.gz", "Release"):
        shutil.copy2(aptrepo.REPO_DIR / name, repo / name)
    other = GnuPG(tmp_path / "other-gnupg")
    other_fpr = other.ensure_key("someone else <intruder@localhost>")
    other.sign_release(repo, other_fpr)
    assert other_fpr != served["fingerprint"]

    handler = functools.partial(_QuietHandler, directory=str(forged))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/compute/cuda/repos/debian12/x86_64/"
        node.put(KEYRING, _trusted_keyring(served, tmp_path))
        node.put(f"{SOURCE_PARTS}/forged.sources", _sources(url))
        proc = node.run(f"{APT} update")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert proc.returncode != 0, proc.stdout
    assert f"NO_PUBKEY {other_fpr[-16:]}" in proc.stdout, proc.stdout
    assert "is not signed" in proc.stdout, proc.stdout
