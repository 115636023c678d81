# acp-broker: the C core of the acp Neovim plugin.
#
#   make            build build/acp-broker and build/acp-demo-agent, and
#                   doc/tags (for :help acp) when an nvim is found
#   make deps       install missing Debian packages (sudo when not root)
#   make test       deps, build, unit + end-to-end tests (Neovim 0.7.2, 0.10.x and
#                   0.12.x, the newer two fetched into build/ by tests/fetch-nvim.sh),
#                   then the same under ASan+UBSan; ends with "N passed, N failed"
#   make demo       deps, build, open Neovim with the plugin and the demo agent
#   make asan       the tests under ASan+UBSan only
#   make valgrind   the unit tests under valgrind
#   make test-agents  real agents from npm, offline, through Neovim
#   make fuzz       every libFuzzer target for FUZZ_SECONDS (default 10), then
#                   the bash oracle for FUZZ_SECONDS
#   make oracle     the bash oracle (tests/oracle/) for ORACLE_SECONDS (default 60)
#   make fmt        clang-format the C sources; make fmt-check checks them

CC         ?= cc
PKG_CONFIG ?= pkg-config
BUILD      ?= build
NVIM       ?= nvim

DEB_PKGS   := libuv1-dev libmsgpack-dev libjansson-dev pkg-config neovim \
              python3-jsonschema strace tmux
FUZZ_PKGS  := clang libclang-rt-14-dev
FUZZ_SECONDS ?= 10
ORACLE_SECONDS ?= 60

# msgpack-c 6.x names its pkg-config module msgpack-c; 4.x (Debian 12) names it msgpack.
MSGPACK    := $(shell $(PKG_CONFIG) --exists msgpack-c 2>/dev/null && echo msgpack-c || echo msgpack)
PKGS       := libuv jansson $(MSGPACK)
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)

WERROR     ?= -Werror
WARN       := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
              -Wwrite-strings -Wpedantic -Wformat=2 -Wvla -Wcast-qual \
              -Wnull-dereference -Wundef $(WERROR)
OPT        ?= -O2
SAN_FLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=all \
              -fno-omit-frame-pointer
ALL_CFLAGS  = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE $(WARN) -g \
              $(OPT) $(if $(SAN),$(SAN_FLAGS)) -MMD -MP $(PKG_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(if $(SAN),$(SAN_FLAGS)) $(LDFLAGS)

VERSION    := 0.1.0
# src/ by layer (make layers checks that includes only go downwards):
#   base/ codec/ io/ acp/ policy/ (policy/shell/) broker/, then main.c cli.c.
SRC_ALL    := $(wildcard src/*.c src/*/*.c src/*/*/*.c)
LIB_SRC    := $(filter-out src/main.c src/demo/%,$(SRC_ALL))
LIB_OBJ    := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

C_FILES    := $(wildcard src/*.[ch] src/*/*.[ch] src/*/*/*.[ch])

BROKER     := $(BUILD)/acp-broker
DEMO       := $(BUILD)/acp-demo-agent

.PHONY: all deps check-deps test test-run unit e2e asan asan-run valgrind \
        demo fmt fmt-check clean nvim010 nvim012 nvims test-agents fuzz bench \
        oracle layers

all: doc/tags check-deps $(BROKER) $(DEMO)

check-deps:
	@$(PKG_CONFIG) --exists $(PKGS) 2>/dev/null || { \
	  echo "acp-broker: missing build dependencies ($(PKGS))."; \
	  echo "Run 'make deps' (installs: $(DEB_PKGS))."; exit 1; }

deps:
	@missing=""; for p in $(DEB_PKGS) $(EXTRA_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" \
	    || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

$(BUILD)/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Isrc -DACP_VERSION='"$(VERSION)"' -c $< -o $@

$(BUILD)/libbroker.a: $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $(LIB_OBJ)

$(BROKER): $(BUILD)/obj/main.o $(BUILD)/libbroker.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/obj/demo/%.o: src/demo/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Isrc -c $< -o $@

# The demo shares base helpers with the broker where it would copy them.
DEMO_BASE  := $(BUILD)/obj/base/signame.o

$(DEMO): $(BUILD)/obj/demo/demo_agent.o $(DEMO_BASE)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/tests/%: tests/unit/%.c tests/unit/check.h tests/unit/uvtest.h $(BUILD)/libbroker.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Isrc $(ALL_LDFLAGS) -o $@ $< $(BUILD)/libbroker.a $(PKG_LIBS)

# The shell analyser's atoms as JSON, for the bash oracle (tests/oracle/).
$(BUILD)/oracle-atoms: tests/oracle/atoms.c $(BUILD)/libbroker.a
	$(CC) $(ALL_CFLAGS) -Isrc $(ALL_LDFLAGS) -o $@ $< $(BUILD)/libbroker.a $(PKG_LIBS)

# Includes only go down the layers of src/ (tests/layers.sh says which).
layers:
	@tests/layers.sh >/dev/null || { tests/layers.sh | grep '^not ok'; exit 1; }
	@tests/layers.sh --self-test >/dev/null
	@echo "layers: every include goes down"

unit: all $(UNIT_BIN)
	@tests/run.sh unit $(UNIT_BIN)

# :help acp needs doc/tags (not committed). Plugin managers run `make`, so it
# is built here with whichever nvim there is ($(NVIM)), and skipped, with a
# message, when there is none. An error (a duplicate tag) fails the build.
doc/tags: $(wildcard doc/*.txt)
	@if command -v $(NVIM) >/dev/null 2>&1; then \
	  env -u VIMRUNTIME $(NVIM) -u NONE -i NONE -n -es \
	    -c 'try | helptags doc | catch | verbose echo v:exception | cquit | endtry' \
	    -c 'qa!' && echo "doc/tags: generated" || \
	    { echo >&2; echo "doc/tags: :helptags doc failed" >&2; rm -f $@; exit 1; }; \
	else echo "doc/tags: skipped, no '$(NVIM)' found (run :helptags doc/ in Neovim)"; fi

# Neovim 0.10.x (Debian trixie) and 0.12.x (Debian sid) for the e2e suite.
# Always run: the script returns at once when build/nvim-0.1x works, and
# refetches when it does not (its loader path is absolute, so a moved
# checkout needs a new one).
nvims: nvim010 nvim012

nvim010:
	@tests/fetch-nvim.sh 0.10 $(abspath $(BUILD)/nvim-0.10)

nvim012:
	@tests/fetch-nvim.sh 0.12 $(abspath $(BUILD)/nvim-0.12)

e2e: all
	@tests/run.sh e2e $(NVIM) $(BROKER) $(DEMO)

# The whole suite. Everything runs even when something fails; tests/run.sh
# prints the final "N passed, N failed" and fails when N failed > 0.
test: deps
	@$(MAKE) --no-print-directory test-run

test-run: layers all $(UNIT_BIN) $(BUILD)/oracle-atoms nvims
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan SAN=1 OPT=-O1 \
	  $(BUILD)/asan/acp-broker $(BUILD)/asan/acp-demo-agent asan-unit-bins
	@tests/run.sh all $(BUILD)

asan-unit-bins: $(UNIT_BIN)

asan: deps
	@$(MAKE) --no-print-directory BUILD=build/asan SAN=1 OPT=-O1 \
	  build/asan/acp-broker build/asan/acp-demo-agent asan-unit-bins
	@tests/run.sh asan build

valgrind: all $(UNIT_BIN)
	@tests/run.sh valgrind $(UNIT_BIN)

# Real agents (Gemini CLI, claude-agent-acp, codex-acp; pinned in
# tests/agents/package-lock.json) against a fake LLM server, offline in a
# network namespace, driven through Neovim and the broker.
test-agents: deps
	@$(MAKE) --no-print-directory all
	npm ci --prefix tests/agents --ignore-scripts --no-audit --no-fund
	tests/agents/run-nvim-matrix.sh $(NVIM)

# libFuzzer targets (tests/fuzz/), each run for FUZZ_SECONDS on a copy of
# its seed corpus; needs clang, which this installs.
fuzz:
	@$(MAKE) --no-print-directory deps EXTRA_PKGS="$(FUZZ_PKGS)"
	@$(MAKE) --no-print-directory $(BUILD)/oracle-atoms
	tests/fuzz/run.sh $(FUZZ_SECONDS); rc=$$?; \
	  BUILD=$(BUILD) tests/oracle/run.sh $(FUZZ_SECONDS) || rc=1; exit $$rc

# The bash oracle: random command lines run in real bash in a sandbox
# (root: namespaces) and compared with the analyser's atoms.
oracle: deps
	@$(MAKE) --no-print-directory $(BUILD)/oracle-atoms
	BUILD=$(BUILD) tests/oracle/run.sh $(ORACLE_SECONDS) $(ORACLE_SEED)

demo: deps
	@$(MAKE) --no-print-directory all
	@tests/demo.sh $(NVIM)

fmt:
	clang-format -i $(C_FILES) tests/unit/*.c tests/unit/*.h tests/oracle/*.c bench/*.c

fmt-check:
	clang-format --dry-run -Werror $(C_FILES) tests/unit/*.c tests/unit/*.h tests/oracle/*.c bench/*.c

clean:
	rm -rf $(BUILD)/obj $(BUILD)/asan $(BUILD)/tests $(BUILD)/libbroker.a \
	  $(BROKER) $(DEMO) $(BUILD)/oracle-atoms doc/tags

include bench/bench.mk

-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/main.d $(BUILD)/obj/demo/demo_agent.d
