# plimsoll: the two set-up commands are `make demo` and `make check` (see README.md).
# Meson does the building; this file installs what is missing and names the jobs.
# Paths below are the checkout's, so `make -f /path/to/Makefile check` works from any directory.
ROOT       := $(dir $(abspath $(lastword $(MAKEFILE_LIST))))
BUILD      ?= build
ASAN_BUILD ?= build-asan

PREFIX     ?= /usr/local
DESTDIR    ?=

.PHONY: all deps images build demo check fuzz bench clean install

all: build

deps:
	@$(ROOT)scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) --buildtype=debugoptimized -Dwerror=true

# dockerd (started when it does not answer), runsc and the docker provider's images.
images: deps
	@scripts/docker-setup.sh

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)
	ln -sf src/daemon/plimsolld $(BUILD)/plimsolld
	ln -sf src/cli/plimsoll $(BUILD)/plimsoll

demo: build
	scripts/demo.sh $(BUILD)

# Every test: release build, then the same tests under ASan+UBSan, then a short fuzz run.
check: deps
	$(ROOT)scripts/check.sh

bench: build
	scripts/bench.sh $(BUILD)

fuzz: deps
	scripts/fuzz-short.sh

# DESTDIR and PREFIX as usual; BINDIR, SBINDIR, LIBEXECDIR, MANDIR, SYSCONFDIR, UNITDIR ... too
# (scripts/install.sh; docs/operations.md).
install: build
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" scripts/install.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
