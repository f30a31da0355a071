"""docs/settings.md's table, made of the settings' declarations (bringup/settings.py).

``python -m bringup.settings_page --write docs/settings.md`` writes it between the page's
markers (the page whole: a new file renamed over it, its mode kept); ``--check`` exits 1
when the page's table is another (tests/unit/test_settings.py fails then too).
"""

import argparse
import sys

from bringup.generated_block import block_of, check_or_write, read_page
from bringup.settings import SETTINGS

BEGIN = "<!-- settings table: generated from bringup/settings.py by python -m bringup.settings_page -->"
END = "<!-- end of the settings table -->"


def markdown_table(declared=None):
    """docs/settings.md's table of ``declared`` (default: every setting), with its header."""
    rows = [item.row() for item in (SETTINGS if declared is None else declared).values()]
    return "\n".join(["| setting | default | meaning |", "| --- | --- | --- |", *rows])


def docs_block(text):
    """The text between the page's markers, or None when it has not both, in order.

    >>> docs_block(f"a\\n{BEGIN}\\n| t |\\n{END}\\nb")
    '| t |'
    """
    return block_of(text, BEGIN, END)


def main(argv=None):
    """``--check PAGE``: exit 1 when the page's table is not the declarations';
    ``--write PAGE``: write it (the page whole: a new file renamed over it, its mode kept)."""
    parser = argparse.ArgumentParser(prog="python -m bringup.settings_page", description=main.__doc__)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", metavar="PAGE")
    action.add_argument("--write", metavar="PAGE")
    args = parser.parse_args(argv)
    page = args.check or args.write
    text = read_page(page, "the settings page, docs/settings.md")
    if text is None:
        return 2
    if docs_block(text) is None:
        print(f"{page}: no settings table markers ({BEGIN} ... {END}): put them around the table", file=sys.stderr)
        return 2
    return check_or_write(page, text, BEGIN, END, markdown_table(), args.check,
                          f"its settings table is not bringup/settings.py's: python -m bringup.settings_page --write {page}")


if __name__ == "__main__":
    sys.exit(main())
