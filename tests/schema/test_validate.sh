#!/bin/sh
# shellcheck disable=SC2086 # $PY is split into words on purpose
# tests/schema/test_validate.sh — tests of tests/schema/validate.py itself.
#
# Feeds it crafted demo-agent transcripts: each invalid one must be rejected
# (exit 1) with a "not ok" naming exactly the line of the bad message, and
# each valid one accepted (exit 0). Prints TAP lines; exits 1 on a failure.
# $PYTHON (default python3; split into words, e.g. "python3 -X dev") runs the
# validator. Without python3-jsonschema it reports one "ok ... # SKIP".
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
VALIDATE=$HERE/validate.py
PY=${PYTHON:-python3}
W=$(mktemp -d "${TMPDIR:-/tmp}/acp-schema-test.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
FAILED=0
N=0

$PY "$VALIDATE" --help >/dev/null 2>&1
case $? in
0) ;;
77)
	echo "ok - validate.py # SKIP python3-jsonschema >= 4 not installed (make deps)"
	exit 0
	;;
*)
	echo "not ok - $PY $VALIDATE --help does not run"
	exit 1
	;;
esac

# A valid start: initialize (id 0), session/new, session/prompt, and the
# agent's permission request with id 0 (the same value as initialize's id).
PREFIX='{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false},"clientInfo":{"name":"acp-broker","title":"acp-broker (Neovim)","version":"0.1.0"}}}}
{"dir":"out","msg":{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false},"authMethods":[]}}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p","mcpServers":[]}}}
{"dir":"out","msg":{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}}
{"dir":"out","msg":{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}}'
PREFIX_LINES=6

ok() {
	N=$((N + 1))
	echo "ok - $1"
}
not_ok() {
	N=$((N + 1))
	FAILED=$((FAILED + 1))
	echo "not ok - $1"
	sed 's/^/#   /' "$W/out"
}

# reject NAME [LINE]: stdin (appended to PREFIX) must be rejected, and the
# failure must be at LINE (default: the first line after PREFIX) and only there.
reject() {
	name=$1 line=${2:-$((PREFIX_LINES + 1))}
	f=$W/t.jsonl
	{
		printf '%s\n' "$PREFIX"
		cat
	} >"$f"
	$PY "$VALIDATE" "$f" >"$W/out" 2>&1
	rc=$?
	if [ $rc != 1 ]; then
		not_ok "rejects $name (exit $rc, expected 1)"
	elif ! grep -q "^not ok - $f:$line: " "$W/out"; then
		not_ok "rejects $name (no failure at line $line)"
	elif [ "$(grep -c '^not ok' "$W/out")" != 1 ]; then
		not_ok "rejects $name (more than one failure)"
	else
		ok "rejects $name"
	fi
}

# accept NAME [FILE]: stdin (appended to PREFIX) must be accepted.
accept() {
	name=$1
	f=$W/t.jsonl
	{
		printf '%s\n' "$PREFIX"
		cat
	} >"$f"
	$PY "$VALIDATE" "$f" >"$W/out" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q "^ok - $f: " "$W/out"; then
		ok "accepts $name"
	else
		not_ok "accepts $name (exit $rc)"
	fi
}

# --- permission responses ---------------------------------------------------

accept 'a selected option' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}}
EOF

accept 'session/cancel then the cancelled outcome' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}}
{"dir":"out","msg":{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}}
EOF

reject 'a flat {"outcome":"cancelled"}' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":"cancelled"}}}
EOF

reject 'a flat {"outcome":"selected","optionId":...}' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":"selected","optionId":"allow"}}}
EOF

reject 'selected without optionId' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected"}}}}
EOF

reject 'an optionId that is not a string' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":1}}}}
EOF

reject 'an unknown outcome' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"allowed","optionId":"allow"}}}}
EOF

reject 'a result without outcome' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{}}}
EOF

reject 'an answer with the id as a string when the agent sent an integer' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":"0","result":{"outcome":{"outcome":"cancelled"}}}}
EOF

reject 'a second answer to the same request' 8 <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}}
EOF

accept 'answers to ids 0 and "0" (two requests) in either order' <<'EOF'
{"dir":"out","msg":{"jsonrpc":"2.0","id":"0","method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t2"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":"0","result":{"outcome":{"outcome":"selected","optionId":"allow"}}}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}}
EOF

reject 'a result and an error together' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}},"error":{"code":-32603,"message":"x"}}}
EOF

# --- error responses ---------------------------------------------------------

accept 'error -32601 to fs/read_text_file and terminal/create' <<'EOF'
{"dir":"out","msg":{"jsonrpc":"2.0","id":5,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"/etc/passwd"}}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"Method not found"}}}
{"dir":"out","msg":{"jsonrpc":"2.0","id":"t","method":"terminal/create","params":{"sessionId":"s1","command":"ls"}}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":"t","error":{"code":-32601,"message":"Method not found","data":{"method":"terminal/create"}}}}
EOF

accept 'an error with id null that answers nothing' <<'EOF'
{"dir":"out","msg":"{not json"}
{"dir":"in","msg":{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}}
EOF

reject 'an error whose code is a string' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"error":{"code":"-32603","message":"Internal error"}}}
EOF

reject 'an error whose code is not an integer' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"error":{"code":-32603.5,"message":"Internal error"}}}
EOF

reject 'an error without message' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"error":{"code":-32603}}}
EOF

reject 'an error that is a string' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"error":"Internal error"}}
EOF

reject 'an error to an id the agent never sent' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}}
EOF

reject 'a result to a method the schema does not give the client' 8 <<'EOF'
{"dir":"out","msg":{"jsonrpc":"2.0","id":9,"method":"nonsense/method","params":{}}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":9,"result":{}}}
EOF

reject 'null as the result of fs/write_text_file' 8 <<'EOF'
{"dir":"out","msg":{"jsonrpc":"2.0","id":9,"method":"fs/write_text_file","params":{"sessionId":"s1","path":"/p/a","content":"x"}}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":9,"result":null}}
EOF

# --- the client's requests and notifications --------------------------------

# The cases below replace a line of PREFIX.
replace_reject() { # NAME LINE REPLACEMENT: PREFIX with line LINE replaced
	name=$1 line=$2 repl=$3
	f=$W/t.jsonl
	printf '%s\n' "$PREFIX" | awk -v n="$line" -v r="$repl" 'NR == n { print r; next } { print }' >"$f"
	$PY "$VALIDATE" "$f" >"$W/out" 2>&1
	rc=$?
	if [ $rc = 1 ] && grep -q "^not ok - $f:$line: " "$W/out" && [ "$(grep -c '^not ok' "$W/out")" = 1 ]; then
		ok "rejects $name"
	else
		not_ok "rejects $name (exit $rc; expected one failure at line $line)"
	fi
}

replace_reject 'session/new without mcpServers' 3 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p"}}}'
replace_reject 'session/new without cwd' 3 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"mcpServers":[]}}}'
replace_reject 'session/new with mcpServers not an array' 3 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p","mcpServers":{}}}}'
replace_reject 'session/new without params' 3 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":1,"method":"session/new"}}'
replace_reject 'initialize with protocolVersion as a string' 1 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"1"}}}'
replace_reject 'initialize with terminal not a boolean' 1 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"terminal":"no"}}}}'
replace_reject 'initialize with fs.writeTextFile not a boolean' 1 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"writeTextFile":0}}}}}'
replace_reject 'session/prompt with an unknown content block type' 5 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"txt","text":"hi"}]}}}'
replace_reject 'session/prompt without sessionId' 5 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"hi"}]}}}'
replace_reject 'a request of a method the schema does not define' 5 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":2,"method":"nonsense/method","params":{"a":1}}}'
replace_reject 'a request of a method the agent calls on the client' 5 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"/p/a"}}}'
replace_reject 'a request id that is an object' 5 \
	'{"dir":"in","msg":{"jsonrpc":"2.0","id":{},"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}}'
replace_reject 'a message without "jsonrpc"' 5 \
	'{"dir":"in","msg":{"id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}}'
replace_reject 'a message with "jsonrpc": "1.0"' 5 \
	'{"dir":"in","msg":{"jsonrpc":"1.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}}'
replace_reject 'a line that was not JSON' 5 \
	'{"dir":"in","msg":"{\"jsonrpc\":\"2.0\",\"id\":2,"}'
replace_reject 'a JSON array (a batch)' 5 \
	'{"dir":"in","msg":[{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}]}'

reject 'session/cancel without sessionId' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","method":"session/cancel","params":{}}}
EOF

reject 'session/cancel with an id (a request)' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":3,"method":"session/cancel","params":{"sessionId":"s1"}}}
EOF

reject 'an unknown notification' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","method":"session/stop","params":{"sessionId":"s1"}}}
EOF

# An invalid request whose id is readable (method not a string) is answered
# with an error, as JSON-RPC says; a result would be a selection.
accept 'an error answering an invalid request with a readable id' <<'EOF'
{"dir":"out","msg":{"jsonrpc":"2.0","id":"nm","method":17}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":"nm","error":{"code":-32600,"message":"method is not a string"}}}
EOF
reject 'a result answering an invalid request' 8 <<'EOF'
{"dir":"out","msg":{"jsonrpc":"2.0","id":"nm","method":17}}
{"dir":"in","msg":{"jsonrpc":"2.0","id":"nm","result":{}}}
EOF

accept 'an extension request and $/cancel_request' <<'EOF'
{"dir":"in","msg":{"jsonrpc":"2.0","id":3,"method":"_acp_broker/ping","params":{}}}
{"dir":"in","msg":{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}}
EOF

f=$W/t.jsonl
{
	printf '%s\n' "$PREFIX"
	printf '%s\n' '{"event":"wrote","path":"/p/a","via":"local"}' '{"event":"exit","code":0}'
	printf '%s' '{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outco'
} >"$f"
$PY "$VALIDATE" "$f" >"$W/out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q 'unterminated last line skipped' "$W/out"; then
	ok "accepts event lines and skips an unterminated last line"
else
	not_ok "accepts event lines and skips an unterminated last line (exit $rc)"
fi

# --- directories -------------------------------------------------------------

mkdir -p "$W/d/sub"
printf '%s\n' "$PREFIX" >"$W/d/sub/transcript-1.jsonl"
printf '%s\n' '{"dir":"in","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":"cancelled"}}}' \
	>>"$W/d/sub/transcript-1.jsonl"
printf '%s\n' '{"ts":"x","decision":"allow","tool":"edit"}' >"$W/d/audit.jsonl"
printf '%s\n' '{"steps":[]}' >"$W/d/scenario.json"
$PY "$VALIDATE" "$W/d" >"$W/out" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "^not ok - $W/d/sub/transcript-1.jsonl:7: " "$W/out" &&
	grep -q '^# schema: 4 client messages in 1 transcripts' "$W/out"; then
	ok "a directory: finds the transcript in a subdirectory, skips other files"
else
	not_ok "a directory: finds the transcript in a subdirectory, skips other files (exit $rc)"
fi
rm "$W/d/sub/transcript-1.jsonl"
$PY "$VALIDATE" "$W/d" >"$W/out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q '^# schema: 0 client messages in 0 transcripts' "$W/out"; then
	ok "a directory without transcripts passes"
else
	not_ok "a directory without transcripts passes (exit $rc)"
fi

echo "1..$N"
[ $FAILED = 0 ]
