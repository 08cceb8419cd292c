#!/usr/bin/env bash
# Fails when a switch under src/ has a `default:` label (STYLE.md: a missing case must be a
# compile error under -Werror=switch). A switch that handles one family of ops takes the other
# ops from src/ops/OpCasesOutside.inc (Note [Family switches]); one that handles a few ops of
# many is a table. Files still allowed a `default:` are listed in default_labels_allowed.txt.
# Usage: no_default_labels.sh <repository root>
set -u
root=${1:?usage: no_default_labels.sh <repository root>}
allowed_file="$(dirname "$0")/default_labels_allowed.txt"
mapfile -t allowed < <(grep -v '^\s*#' "$allowed_file" | grep -v '^\s*$')

bad=0
# a label at the start of a line or after `;`, `{` or `:`; comments are not labels
while IFS= read -r hit; do
    file=${hit%%:*}
    rel=${file#"$root"/}
    skip=0
    for a in "${allowed[@]}"; do [[ $rel == "$a" ]] && skip=1; done
    ((skip)) && continue
    echo "default label: ${hit#"$root"/}"
    bad=1
done < <(grep -rnE --include='*.cpp' --include='*.h' --include='*.inc' \
             '(^|[;{:])[[:space:]]*default[[:space:]]*:' "$root/src" | grep -vE ':[0-9]+:[[:space:]]*//')

if ((bad)); then
    echo "no_default_labels: FAILED (list the other cases or use a table; see tests/lint/$(basename "$0"))"
    exit 1
fi
echo "no_default_labels: OK"
