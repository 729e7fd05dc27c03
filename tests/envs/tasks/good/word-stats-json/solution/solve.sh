#!/bin/bash
python3 -c '
import json, pathlib
stats = {p.name: len(p.read_text().split()) for p in sorted(pathlib.Path("corpus").glob("*.txt"))}
json.dump(stats, open("stats.json", "w"))
'
