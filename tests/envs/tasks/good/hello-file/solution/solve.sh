#!/bin/bash
echo "hello, world" > greeting.txt
