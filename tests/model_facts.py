"""The probe's ``model`` fact as the model-source tests need it (docs/facts.md ``model``):
a hub id's fact, a snapshot judged whole, a config file root owns. Test data, not the
product's: bringup/plan/model_source.py decides on what the probe reports, and its
examples build the few keys they read inline (no product module imports tests/).
"""

ROOT_FILE = {"user": "root", "mode": "644", "kind": "regular file"}
# A snapshot the planner judges whole (bringup/plan/model_source.py entry_partial): the
# fetch's record matching it, or (an entry the operator planted, no record) weights in it
# and no blob still downloading.
WHOLE = {"files": 3, "weights": 1, "incomplete": 0, "shards_missing": 0, "fetching": False, "record": "none", "record_repo": None,
         "record_revision": None, "record_files": 0, "record_missing": 0}


def hub_fact(**changes):
    """A hub id's ``model`` fact (a cache miss, the hub unreachable), for the tests."""
    return {"model": "Qwen/Qwen3-0.6B", "kind": "hub", "path": None, "dir": None,
            "cache": "/var/cache/sglang/xdg/huggingface/hub", "cache_via": "XDG_CACHE_HOME",
            "entry": "/var/cache/sglang/xdg/huggingface/hub/models--Qwen--Qwen3-0.6B", "revision": None, "refs_main": None,
            "snapshot": None, "config": None, "readable": None, "chain": [], "endpoint": "https://huggingface.co",
            "offline": None, "offline_by": None,
            "token": False, "hub": {"status": None, "error": "[Errno -2] Name or service not known"}, **changes}
