#!/bin/bash
echo $(( $(cat /opt/puzzle/secret.txt) * 3 )) > /app/answer.txt
