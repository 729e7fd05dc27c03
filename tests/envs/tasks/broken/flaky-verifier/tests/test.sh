#!/bin/bash
# Broken on purpose: even a correct solution passes only half the time (a coin flip from
# /dev/urandom), so repeated oracle runs of the validity gate disagree and the task is flagged.
coin=$(( $(od -An -N1 -tu1 /dev/urandom) % 2 ))
if [ "$(cat /app/ok.txt 2>/dev/null)" = "ok" ] && [ "$coin" = 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
