"""Issue 21 (apt), on one light sandbox node found with NVIDIA's cuda-keyring source
(state nvidia-repo): a found source is adopted only when its keyring holds the pinned
key alone and only root can change it (validate, read-only); a shared deb822 file with
two blank lines before the CUDA stanza is disabled by that stanza, and apt still reads
every source after the repository step (deploy_steps=repo). And make lock's check of the
Release signature passes on the sandbox repository's own signed indexes (no node)."""

import shutil

import pytest

from control import locks as lockgen
from sandbox import aptrepo
from sandbox.aptrepo import lock as aptrepo_lock
from sandbox import node as sandbox_nodes
from tests.sandbox_fixtures import REPO_ROOT, pyinfra_cli, run_ssh, validate

pytestmark = pytest.mark.sandbox

NAME = "hard-apt"
DATA = ("deploy_steps=repo",)
NVIDIA_LIST = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
NVIDIA_KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
MIXED = "/etc/apt/sources.list.d/mixed.sources"


@pytest.fixture(scope="module")
def node(sandbox_node):
    aptrepo.ensure_served()
    entry = dict(sandbox_node(NAME, "127.0.0.143", toolkit="none", states=("nvidia-repo",)), name=NAME)
    yield entry
    sandbox_nodes.down([NAME])


def conflicts(report):
    return [(f["severity"], f["message"]) for f in report["plan"]["findings"] if f["code"] == "APT_SOURCE_CONFLICT"]


def test_nvidias_keyring_root_alone_can_change_is_adopted(node):
    _, report = validate(NAME, data=DATA)
    assert [severity for severity, _ in conflicts(report)] == ["info"], conflicts(report)
    chain = report["facts"]["apt"]["keyring_paths"][NVIDIA_KEYRING]
    assert chain[0] == {"path": NVIDIA_KEYRING, "user": "root", "mode": "644", "kind": "regular file"}


@pytest.mark.parametrize("spoil,why", [
    (f"chmod 664 {NVIDIA_KEYRING}", f"{NVIDIA_KEYRING} is writable by its group (mode 664)"),
    (f"chown nobody {NVIDIA_KEYRING}", f"{NVIDIA_KEYRING} is owned by nobody, not root"),
    (f"cat /usr/share/keyrings/debian-archive-keyring.gpg >> {NVIDIA_KEYRING}",
     "which holds the pinned key and also "),
], ids=["group-writable", "not root's", "a second key"])
def test_a_keyring_others_could_change_is_not_adopted(node, spoil, why):
    run_ssh(node, f"cp -p {NVIDIA_KEYRING} /root/keyring.saved && {spoil}")
    try:
        _, report = validate(NAME, data=DATA)
    finally:
        run_ssh(node, f"mv -f /root/keyring.saved {NVIDIA_KEYRING} && chown root:root {NVIDIA_KEYRING} && "
                      f"chmod 644 {NVIDIA_KEYRING}")
    assert [severity for severity, _ in conflicts(report)] == ["fix"], conflicts(report)
    assert why in conflicts(report)[0][1] and NVIDIA_LIST in conflicts(report)[0][1], conflicts(report)
    assert report["plan"]["repo"]["adopt"] is False and report["plan"]["repo"]["disable"] == [NVIDIA_LIST]


def test_two_blank_lines_before_the_cuda_stanza_keep_apt_working(node):
    _, report = validate(NAME, data=DATA)
    url = report["plan"]["repo"]["url"]
    # One shared file: another directory of the sandbox repository (signed by its key,
    # kept), two blank lines, then the CUDA repository with a keyring of other keys.
    mixed = (f"Types: deb\nURIs: {url.replace('/debian12/', '/debian13/')}\nSuites: /\n"
             f"Signed-By: {NVIDIA_KEYRING}\n\n\n"
             f"Types: deb\nURIs: {url}\nSuites: /\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    run_ssh(node, f"rm -f {NVIDIA_LIST} && printf %s '{mixed}' > {MIXED}")
    _, before = validate(NAME, data=DATA)
    assert before["plan"]["repo"]["disable"] == [MIXED], conflicts(before)
    deployed = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA)
    assert deployed.returncode == 0, deployed.output[-4000:]
    text = run_ssh(node, f"cat {MIXED}").stdout
    assert text == mixed.replace("\n\n\nTypes: deb", "\n\n\n# Disabled by gpu-bringup (the repository's source is "
                                 "/etc/apt/sources.list.d/nvidia-cuda.sources)\nEnabled: no\nTypes: deb"), text
    out = run_ssh(node, "apt-get update 2>&1; echo update=$?", check=False).stdout
    assert out.rstrip().endswith("update=0") and "Malformed" not in out, out
    _, after = validate(NAME, data=DATA)
    assert not [c for c in conflicts(after) if c[0] == "fix"], conflicts(after)


def test_make_lock_reads_the_sandbox_repository_through_its_signature(tmp_path):
    """``make lock CUDA_REPO_URL=sandbox``'s path (python -m sandbox.aptrepo lock): a plain
    file:// URL and fingerprint for control.locks; InRelease verified against the sandbox's
    own key, Packages.gz against its sha256, and the pins are the committed lock's."""
    url, fingerprint = aptrepo_lock.lock_source()
    assert ("debian12", "x86_64") in aptrepo_lock.served_platforms(aptrepo_lock.REPOS_DIR)
    (tmp_path / "files" / "locks").mkdir(parents=True)
    shutil.copyfile(REPO_ROOT / "files" / "locks" / "cuda-13.0.in", tmp_path / "files" / "locks" / "cuda-13.0.in")
    assert lockgen.cuda(url, [("debian12", "x86_64")], root=tmp_path, fingerprint=fingerprint) == 1
    name = "files/locks/cuda-13.0-debian12-x86_64.txt"

    def pins(path):
        return [line for line in path.read_text().splitlines() if not line.startswith("#")]

    assert pins(tmp_path / name) == pins(REPO_ROOT / name)
