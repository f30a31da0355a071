# The prewarm section: writes prewarm; facts/sections/prewarm.py parses them
# (the document's keys: none of its own; facts/sections/jit_cache.py reads it into `jit_cache`).
probe_prewarm() {
    # The pre-warm manifest and whether ninja has work for any module it lists.
    if [ ! -r "$PROBE_MANIFEST" ] || [ ! -x /usr/bin/python3 ]; then
        emit prewarm 127 ""
        return
    fi
    # ninja runs in the cache's module directories: as the cache's owner (or ninja's).
    # The system's python, isolated (-I: no user site, no PYTHON* variables).
    runner=$(unprivileged_owner "$PROBE_CACHE_DIR" "$PROBE_VENV" "$PROBE_VENV/bin")
    # venv/bin/ninja is a script of the venv's python: judged with the interpreter's prefix.
    [ -n "$runner" ] || { runner=$(root_may_run "$PROBE_VENV/bin/ninja"); runner=${runner%%" "*}; }
    capture prewarm "${runner:+user=$runner}" as_user "$runner" /usr/bin/python3 -I -c '
import json, os, subprocess, sys
manifest = json.load(open(sys.argv[1]))
stale = []
for module in manifest.get("modules", []):
    if module.get("kind") == "sglang":
        # Content-addressed: a changed input is another directory, not work for ninja.
        if not os.path.exists(module.get("library", "")):
            stale.append(module.get("request"))
        continue
    try:
        run = subprocess.run([sys.argv[2], "-n", "-C", module["dir"]], capture_output=True, text=True)
        fresh = run.returncode == 0 and "no work to do" in run.stdout
    except OSError:
        fresh = False
    if not fresh:
        stale.append(module.get("request", module.get("name")))
print(json.dumps({"manifest": manifest, "stale": stale}))
' "$PROBE_MANIFEST" "$PROBE_VENV/bin/ninja"
}
