#!/bin/bash
echo ok > /app/ok.txt
