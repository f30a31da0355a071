"""The node_exporter textfile is written whole (control/metrics.py write_host_metrics):
a temp file beside it renamed over it, so node_exporter never reads half of one, and a
link at its name is replaced, never written through (review: whole writes)."""

import os
import stat

from control.metrics import host_metrics, textfile_name, write_host_metrics


def test_the_textfile_replaces_a_link_and_the_old_file_whole(tmp_path):
    directory, elsewhere = tmp_path / "textfile", tmp_path / "elsewhere.prom"
    directory.mkdir()
    elsewhere.write_text("kept\n")
    target = directory / textfile_name("n1")
    target.symlink_to(elsewhere)
    text = host_metrics("n1", "validate", "ready", when=1.0)
    assert write_host_metrics(directory, "n1", text) == target
    assert elsewhere.read_text() == "kept\n", "written through the link"
    assert stat.S_ISREG(target.lstat().st_mode) and target.read_text() == text
    reader = open(target)  # node_exporter in the middle of a read keeps the old file
    inode = os.fstat(reader.fileno()).st_ino
    write_host_metrics(directory, "n1", host_metrics("n1", "validate", "blocked", when=2.0))
    assert reader.read() == text and os.stat(target).st_ino != inode, "rewritten in place"
    reader.close()
    assert sorted(path.name for path in directory.iterdir()) == [target.name], "a temp file left"


def test_a_missing_textfile_directory_is_made_readable_whatever_the_umask(tmp_path):
    """node_exporter runs as its own user: a directory made 0700 under root's umask 077
    (or 0750 under 027) would hide every textfile from it (review: modes from a umask)."""
    directory = tmp_path / "node-exporter" / "textfile"
    saved = os.umask(0o077)
    try:
        target = write_host_metrics(directory, "n1", host_metrics("n1", "validate", "ready", when=1.0))
    finally:
        os.umask(saved)
    for made in (directory.parent, directory):
        assert stat.S_IMODE(made.stat().st_mode) == 0o755, made
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
