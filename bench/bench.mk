# make bench: the broker beside its baselines, measured in the same run
# (bench/run.py; the README's "Performance" section explains the figures).
# Included by the Makefile.
#
#   make bench                       everything (a few minutes)
#   make bench BENCH_ARGS=--quick    a smoke run with small counts
#   make bench BENCH_ARGS='--only auto,stream --repeats 5'

BENCH_AGENT  := $(BUILD)/bench/bench_agent
BENCH_POLICY := $(BUILD)/bench/bench_policy
BENCH_NODE   := bench/node/node_modules/.package-lock.json
# Debian's python3, where python3-msgpack installs (not a pyenv shim's).
BENCH_PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
# node and npm for the Node baseline, from Debian unless already there.
BENCH_PKGS   := python3-msgpack $(shell command -v npm >/dev/null 2>&1 || echo nodejs npm)
BENCH_ARGS   ?=

.PHONY: bench bench-run

bench:
	@$(MAKE) --no-print-directory deps EXTRA_PKGS="$(BENCH_PKGS)"
	@$(MAKE) --no-print-directory bench-run

bench-run: all $(BENCH_AGENT) $(BENCH_POLICY) $(BENCH_NODE)
	$(BENCH_PYTHON) bench/run.py --build $(BUILD) --nvim $(NVIM) $(BENCH_ARGS)

$(BENCH_AGENT): bench/bench_agent.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(PKG_LIBS)

$(BENCH_POLICY): bench/bench_policy.c $(BUILD)/libbroker.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Isrc $(ALL_LDFLAGS) -o $@ $< $(BUILD)/libbroker.a $(PKG_LIBS)

# The Node baseline's pinned packages (bench/node/package-lock.json).
$(BENCH_NODE): bench/node/package-lock.json bench/node/package.json
	npm ci --prefix bench/node --ignore-scripts --no-audit --no-fund
	@touch $@

# An agent's line on its way in (jsonrpc_parse and jsonrpc_msg_free), for
# callgrind: bench/bench_parse.c says how.
BENCH_PARSE  := $(BUILD)/bench/bench_parse

$(BENCH_PARSE): bench/bench_parse.c $(BUILD)/libbroker.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Isrc $(ALL_LDFLAGS) -o $@ $< $(BUILD)/libbroker.a $(PKG_LIBS)
