#!/bin/sh
# A failed job's reason on the console, not only in its log: the log's last line (a heads command's one-line
# error) and where the rest is. Every rule runs `COMMAND > LOG 2>&1 || sh workflow/scripts/say_why.sh LOG`.
printf '%s (log: %s)\n' "$(tail -n 1 "$1")" "$1" >&2
exit 1
