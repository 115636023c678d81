#!/bin/sh
# The layers check run on a copy of src/ with upward includes planted.
exec "$(dirname "$0")/layers.sh" --self-test
