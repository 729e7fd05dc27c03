"""Does the host see a sandbox's SKILL.md opens on this machine? (inotify through a bubblewrap bind mount)

The reads of an episode are what the environment observes (skillgate_core/envs/skill_opens.py). Run on a
machine before training there: it opens one skill's SKILL.md inside bwrap, lists the folder, runs another
skill's script, and prints what the watch saw (expected: read exactly ['a'], consulted ['a', 'b']: running a
script is consultation, not a read). Needs only bwrap and the standard library.

    python3 benchmarks/gpu/check_skill_opens.py [BWRAP]
"""

import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("skill_opens", ROOT / "skillgate_core" / "envs" / "skill_opens.py")
skill_opens = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = skill_opens  # its dataclasses look their module up there
spec.loader.exec_module(skill_opens)

bwrap = sys.argv[1] if len(sys.argv) > 1 else "bwrap"
skills = Path(tempfile.mkdtemp()) / "skills"
for name in ("a", "b"):
    (skills / name / "scripts").mkdir(parents=True)
    (skills / name / "SKILL.md").write_text(f"---\nname: {name}\n---\n")
    (skills / name / "scripts" / "run.sh").write_text("echo ran\n")
watch = skill_opens.SkillOpenWatch(skills)
command = "cat /skills/a/SKILL.md >/dev/null; ls -R /skills >/dev/null; sh /skills/b/scripts/run.sh"
done = subprocess.run([bwrap, "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                       "--symlink", "usr/lib64", "/lib64", "--ro-bind", str(skills), "/skills", "--dev", "/dev",
                       "--proc", "/proc", "--unshare-all", "--die-with-parent", "sh", "-c", command],
                      capture_output=True, text=True, timeout=60)
seen = watch.drain()
watch.close()
print(json.dumps({"bwrap_rc": done.returncode, "stdout": done.stdout.strip(), "stderr": done.stderr.strip()[-300:],
                  "read": list(seen.read), "consulted": list(seen.consulted),
                  "ok": seen.read == ("a",) and seen.consulted == ("a", "b")}))
