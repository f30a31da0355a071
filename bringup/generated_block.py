"""A generated block of a hand-written page (a table between two marker lines), and the
page written whole: what the generators of docs/settings.md's table
(bringup/settings_page.py), of docs/locks.md's lock evidence (bringup/lock_evidence.py) and
of docs/facts.md's top-level table and the planner's facts schema
(facts/sections/generate.py) share.
"""

import os
import sys
import tempfile


def block_of(text, begin, end):
    """The text between ``begin`` and ``end``, or None when ``text`` has not both, in order.

    >>> block_of("a\\n<!-- b -->\\n| t |\\n<!-- e -->\\nz", "<!-- b -->", "<!-- e -->")
    '| t |'
    """
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        return None
    return text[start + len(begin):stop].strip("\n")


def with_block(text, begin, end, block):
    """``text`` with ``block`` between ``begin`` and ``end``, or None when it has not both,
    in order.

    >>> with_block("a\\n<!-- b -->\\nold\\n<!-- e -->\\nz", "<!-- b -->", "<!-- e -->", "new").splitlines()
    ['a', '<!-- b -->', 'new', '<!-- e -->', 'z']
    """
    if block_of(text, begin, end) is None:
        return None
    start, stop = text.find(begin) + len(begin), text.find(end)
    return f"{text[:start]}\n{block}\n{text[stop:]}"


def read_page(page, name):
    """The text of ``page``, or None after one line on stderr naming it and ``name`` (the
    page a generator wants: ``"the settings page, docs/settings.md"``).

    >>> read_page("/nonexistent/page.md", "the settings page, docs/settings.md") is None
    True
    """
    try:
        with open(page, encoding="utf-8") as stream:
            return stream.read()
    except OSError as error:
        print(f"{page}: cannot read it ({error.strerror}): name {name}", file=sys.stderr)
    except UnicodeDecodeError as error:
        print(f"{page}: cannot read it (not UTF-8: byte {error.start}): name {name}", file=sys.stderr)
    return None


def write_whole(path, text):
    """Write ``path`` whole: a new file of a name no one can foresee beside it (created,
    never followed through a link), renamed over it, with its mode (a new one's 0644); a
    write that fails leaves ``path`` as it was and no new file.

    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_whole(f"{folder}/page.md", "text")
    ...     open(f"{folder}/page.md").read(), os.listdir(folder)
    ('text', ['page.md'])
    """
    path = os.fspath(path)
    mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o644
    descriptor, staged = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(staged, mode)
        os.replace(staged, path)
    except BaseException:
        os.unlink(staged)
        raise


def check_or_write(page, text, begin, end, block, check, stale):
    """A generator's last step: 0 when ``page`` (its ``text``) already holds ``block``
    between the markers; with ``check``, 1 after printing ``stale`` (what to run);
    otherwise the page written whole with it, 0.

    >>> with tempfile.TemporaryDirectory() as folder:
    ...     page = f"{folder}/p.md"
    ...     write_whole(page, "<!-- b -->\\nold\\n<!-- e -->\\n")
    ...     text = open(page).read()
    ...     check_or_write(page, text, "<!-- b -->", "<!-- e -->", "new", False, "run it"), open(page).read()
    (0, '<!-- b -->\\nnew\\n<!-- e -->\\n')
    """
    if block_of(text, begin, end) == block:
        return 0
    if check:
        print(f"{page}: {stale}", file=sys.stderr)
        return 1
    write_whole(page, with_block(text, begin, end, block))
    return 0
