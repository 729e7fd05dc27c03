#!/bin/bash
# Score 1 when /app/greeting.txt holds exactly "hello, world".
mkdir -p /logs/verifier
if [ "$(cat /app/greeting.txt 2>/dev/null)" = "hello, world" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
