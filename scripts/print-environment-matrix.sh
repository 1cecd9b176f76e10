#!/bin/sh
# Prints the environment matrix (issue 27) that EnvironmentMatrixTests wrote: one line per cell,
#   CELL: passed | CELL: failed fast (0.03 s): MESSAGE | CELL: skipped: REASON | CELL: FAILED: WHAT
# from $KEYSTONE_MATRIX_FILE, else .build/environment-matrix.txt. Run the tests first:
#   swift test --skip-build --traits NIO --filter 'EnvironmentMatrixTests|HeadlessRecipesTests'
# Exit status: 0 when every cell passed, failed fast with its fix or was skipped with its reason; 1 when a cell FAILED
# or the file is missing (the matrix did not run).
set -eu
cd "$(dirname "$0")/.."
file="${KEYSTONE_MATRIX_FILE:-.build/environment-matrix.txt}"
if [ ! -s "$file" ]; then
    echo "environment matrix: $file is missing: run swift test --filter EnvironmentMatrixTests first" >&2
    exit 1
fi
echo "Environment matrix ($file):"
sed 's/^/  /' "$file"
passed=$(grep -c ': passed$' "$file" || true)
fast=$(grep -c ': failed fast (' "$file" || true)
skipped=$(grep -c ': skipped: ' "$file" || true)
failed=$(grep -c ': FAILED: ' "$file" || true)
echo "cells: $passed passed, $fast failed fast with the fix, $skipped skipped, $failed FAILED"
[ "$failed" -eq 0 ]
