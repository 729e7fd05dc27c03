#!/bin/bash
# Writes reward.json (Harbor's alternative to reward.txt).
python3 - <<'PY'
import json
want = {"a.txt": 6, "b.txt": 5}
try:
    got = json.load(open("/workdir/stats.json"))
except Exception:
    got = None
json.dump({"reward": 1.0 if got == want else 0.0, "details": {"got": str(got)}},
          open("/logs/verifier/reward.json", "w"))
PY
