#!/bin/bash
# Broken on purpose: the reference solution is wrong.
echo 5 > /app/sum.txt
