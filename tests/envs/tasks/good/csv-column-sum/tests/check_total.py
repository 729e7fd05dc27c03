import csv
import os

col = os.environ.get("EXPECTED_COLUMN", "price")
rows = list(csv.DictReader(open("/srv/shop/data/sales.csv")))
expected = round(sum(float(r[col]) for r in rows), 2)
try:
    got = float(open("/srv/shop/total.txt").read().strip())
except (OSError, ValueError) as exc:
    print("no usable total.txt:", exc)
    got = None
score = 1.0 if got is not None and abs(got - expected) < 1e-6 else 0.0
print("expected", expected, "got", got)
open("/logs/verifier/reward.txt", "w").write(f"{score}\n")
