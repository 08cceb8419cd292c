#!/usr/bin/env bash
# Runs the `// RUN:` lines of one text pass test (tests/filecheck/*.sjir, docs/ir.md): `sj-opt`,
# `FileCheck` and `%s` (the test file) are replaced by the programs' paths and the file's, and
# each line runs with pipefail. Usage: run.sh SJ_OPT FILECHECK FILE (FILECHECK empty: skipped).
set -uo pipefail
sj_opt=$1 filecheck=$2 file=$3
if [ -z "$filecheck" ]; then
  echo "filecheck: skipped: FileCheck not found (Debian: apt-get install llvm-19-tools)"
  exit 77
fi
# `not CMD`: succeeds when CMD fails (LLVM's lit spelling)
not() { ! "$@"; }
export -f not
n=0
while IFS= read -r line; do
  cmd=$(sed -e "s#\bsj-opt\b#$sj_opt#g" -e "s#\bFileCheck\b#$filecheck#g" <<<"${line#// RUN: }")
  cmd=${cmd//%s/$file}
  echo "RUN: $cmd"
  if ! bash -o pipefail -c "$cmd"; then
    echo "filecheck: FAILED: $line"
    exit 1
  fi
  n=$((n + 1))
done < <(grep '^// RUN: ' "$file")
if [ "$n" = 0 ]; then
  echo "filecheck: FAILED: no '// RUN:' line in $file"
  exit 1
fi
echo "filecheck: OK ($n runs)"
