"""Where the managed venv's packages come from: the installer's package-index options.

pip and uv take the same options (``--index-url``, ``--extra-index-url``,
``--find-links``, ``--no-index``), so one list serves both.
"""


def index_options(index_url, extra_index_urls, find_links, no_index):
    """pip/uv options for the configured package sources.

    >>> index_options("", (), ("http://127.0.0.1:8914/",), True)
    ['--find-links', 'http://127.0.0.1:8914/', '--no-index']
    """
    options = ["--index-url", index_url] if index_url else []
    for url in extra_index_urls:
        options += ["--extra-index-url", url]
    for url in find_links:
        options += ["--find-links", url]
    return options + (["--no-index"] if no_index else [])
