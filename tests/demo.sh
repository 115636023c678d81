#!/bin/sh
# tests/demo.sh [NVIM] — what `make demo` runs.
#
# Opens Neovim with only this plugin (no user config, no other plugins) in a
# scratch project under build/demo-project, starts the bundled demo agent and
# sends it a prompt, so the person sees the permission prompt at once.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
NVIM=${1:-nvim}

command -v "$NVIM" >/dev/null 2>&1 || {
	echo "demo: Neovim '$NVIM' not found" >&2
	exit 1
}
for bin in acp-broker acp-demo-agent; do
	[ -x "$ROOT/build/$bin" ] || {
		echo "demo: build/$bin is missing; run 'make' first" >&2
		exit 1
	}
done

PROJECT=$ROOT/build/demo-project
# .acp makes the demo project its own project root (not the repository
# around it), so its settings and rules are its own.
mkdir -p "$PROJECT/.acp"
rm -f "$PROJECT/hello.txt" "$PROJECT/.acp/settings.json" # fresh each time
cd "$PROJECT"

cat <<'EOF'
acp demo: Neovim opens with the demo agent, which will ask to create hello.txt, then to list it.
Answer each prompt with its digit (or a = allow once, r = reject); q hides the prompt, :AcpPending brings it back.
:AcpStop ends the agent; :qa quits. (Press Enter to start.)
EOF
# Wait for Enter only when someone is there to press it.
if [ -t 0 ]; then
	read -r _
fi

# The rtp entry is a Vim string; a repo path with a quote or space would break it.
case $ROOT in *[\'\ \"\|]*)
	echo "demo: the repository path must not contain spaces or quotes: $ROOT" >&2
	exit 1
	;;
esac

exec env -u VIMRUNTIME "$NVIM" --clean \
	--cmd "set rtp^=$ROOT" \
	-c "runtime plugin/acp.lua" \
	-c "lua require('acp').start('demo', {cwd = vim.fn.getcwd()})" \
	-c "AcpPrompt Please create hello.txt and then list it." \
	-c "AcpChat"
