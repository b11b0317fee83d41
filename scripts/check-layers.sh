#!/usr/bin/env bash
# Fails when an #include points up a layer.  The rooms, lowest first:
#
#   kernels  <  loader  <  engine, text  <  plan  <  api (+ include/sluice.h)  <  cli
#
# A file may include its own room and any room below it, never one above.  Within the middle layer
# the planner reads the model's shape (plan -> engine), the engine and the tokenizers know nothing
# of the planner or of each other.  tools/, tests/ and bench/ sit on top and may include anything.
# Run by CI through scripts/test.sh; prints every offending line and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

# Rank of a path (a source file or an include target); empty for paths outside the layered tree.
rank() {
  case "$1" in
    kernels/*)                     echo 0 ;;
    loader/*)                      echo 1 ;;
    runtime/engine/*|runtime/text/*) echo 2 ;;
    runtime/plan/*)                echo 3 ;;
    runtime/api/*|include/*)       echo 4 ;;
    runtime/cli/*)                 echo 5 ;;
    *)                             echo "" ;;
  esac
}

bad=0
checked=0
while IFS= read -r file; do
  from=$(rank "$file")
  [ -n "$from" ] || continue
  while IFS=: read -r line target; do
    to=$(rank "$target")
    [ -n "$to" ] || continue
    checked=$((checked + 1))
    # Siblings in the middle layer: engine and text do not include each other.
    sib=0
    case "$file:$target" in
      runtime/engine/*:runtime/text/*|runtime/text/*:runtime/engine/*) sib=1 ;;
    esac
    if [ "$to" -gt "$from" ] || [ "$sib" = 1 ]; then
      echo "check-layers: $file:$line includes $target (a room above or beside it)" >&2
      bad=1
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
           sed -E 's/^([0-9]+):[^"]*"([^"]+)".*/\1:\2/')
done < <(git ls-files --cached --others --exclude-standard 'kernels/*' 'loader/*' 'runtime/*' 'include/*' | grep -E '\.(c|h)$')

if [ "$bad" = 1 ]; then
  echo "check-layers: FAILED (rooms, lowest first: kernels < loader < engine, text < plan < api < cli)" >&2
  exit 1
fi
echo "check-layers: $checked includes checked, none points up a layer"
