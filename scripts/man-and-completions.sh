#!/usr/bin/env bash
# Regenerates the shipped manual page, the command reference (docs/commands.md) and shell completions from the command definitions
# (ManAndCompletionTests fails when they are out of date).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build >&2  # stepgate and stepgate-full
stepgate=.build/debug/stepgate
mkdir -p docs/man completions
"$stepgate" help --man > docs/man/stepgate.1
"$stepgate" help --markdown > docs/commands.md
"$stepgate" completions bash > completions/stepgate.bash
"$stepgate" completions zsh > completions/_stepgate
"$stepgate" completions fish > completions/stepgate.fish
echo "wrote docs/man/stepgate.1, docs/commands.md, completions/stepgate.bash, completions/_stepgate, completions/stepgate.fish" >&2
