"""Ubuntu's apt sources as its releases ship them (the sandbox's Ubuntu roots write the
same text: sandbox/image.py), through the product's parser and editor: 24.04's deb822
ubuntu.sources (two stanzas, several suites each), 22.04's one-line sources.list, and a
CUDA stanza an operator appended to ubuntu.sources disabled without touching Ubuntu's."""

from bringup.apt_sources import source_entries, source_problems
from bringup.apt_source_edit import disabled
from sandbox.image import OSES, apt_sources

CUDA = "http://127.0.0.1:8913/compute/cuda/repos/ubuntu2404/x86_64/"


def test_noble_deb822_sources_read_as_apt_does():
    path, text = apt_sources(OSES["ubuntu2404"])
    assert path == "etc/apt/sources.list.d/ubuntu.sources"
    full = "/" + path
    assert source_problems(full, text) == []
    entries = source_entries({full: text})
    assert [(e["uris"], e["suites"], e["signed_by"]) for e in entries] == [
        (["http://archive.ubuntu.com/ubuntu"], ["noble", "noble-updates", "noble-backports"],
         "/usr/share/keyrings/ubuntu-archive-keyring.gpg"),
        (["http://security.ubuntu.com/ubuntu"], ["noble-security"], "/usr/share/keyrings/ubuntu-archive-keyring.gpg")]


def test_jammy_one_line_sources_read_as_apt_does():
    path, text = apt_sources(OSES["ubuntu2204"])
    assert path == "etc/apt/sources.list"
    entries = source_entries({"/" + path: text})
    assert [e["suites"] for e in entries] == [["jammy"], ["jammy-updates"], ["jammy-backports"], ["jammy-security"]]


def test_a_cuda_stanza_in_ubuntu_sources_is_disabled_alone():
    path, text = apt_sources(OSES["ubuntu2404"])
    full = "/" + path
    shared = text + f"\nTypes: deb\nURIs: {CUDA}\nSuites: /\nSigned-By: /usr/share/keyrings/cuda-archive-keyring.gpg\n"
    action, new_text = disabled(full, shared, CUDA, "the repository's source is nvidia-cuda.sources")
    assert action == "rewrite"
    assert new_text.startswith(text) and "Enabled: no" in new_text.split("\n\n")[-1]
    assert source_entries({full: new_text}) == source_entries({full: text})
