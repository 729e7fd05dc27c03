#!/bin/bash
# Recompute the expected total from the original data, compare with the agent's total.txt.
python3 /tests/check_total.py > /logs/verifier/check.log 2>&1
