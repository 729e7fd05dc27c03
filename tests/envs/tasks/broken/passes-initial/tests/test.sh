#!/bin/bash
# Broken on purpose: checks that the file is absent-or-present, so the untouched workspace passes.
if [ -e /app/done.txt ] || [ ! -e /app/done.txt ]; then echo 1 > /logs/verifier/reward.txt; fi
