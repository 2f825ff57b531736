# waitroom: `make run` starts everything locally, `make test` runs every test
# against real (private) Redis and PostgreSQL. Both need only Go and Debian.
GO      ?= go
export PATH := $(PATH):/usr/local/go/bin:$(shell $(GO) env GOPATH 2>/dev/null)/bin
BIN     := bin
PKGS    := ./...
# -trimpath: what is compiled does not depend on the checkout's folder, so a
# fresh clone finds in the build cache what another checkout compiled.
# The tests run as two go test commands at once. The race detector's: every
# package whose tests run the product's code in their own process, the
# longest first (go test starts their binaries in the order given, two at a
# time, one a core, so that the others run beside the longest rather than
# after it). And OUTSIDE's, the packages that test the product from
# outside, built as the release build is (RELEASE, -trimpath): the
# end-to-end scenarios and the load proof drive the release binaries as
# processes (the race detector there watched only the test's own client
# code), the rest check documents (the OpenAPI document and its clients'
# validator, dashboards, alert rules, the Dockerfile). Apart, the end-to-end
# package no longer holds one of go test's two slots for its whole run
# (about 10 minutes, most of it waiting) while every other package's
# compile and run queued for the other; its dependencies are mostly the
# release build's, compiled once for both; and the OpenAPI libraries, the
# heaviest compile of the tree (about 350 CPU-seconds with the race
# detector), are compiled once, without it. (Three packages at a time in
# one go test was tried, and failed load-bound checks on a loaded machine.)
TESTFLAGS    ?= -race -trimpath -count=1 -timeout 45m
OUTSIDEFLAGS ?= -trimpath -count=1 -timeout 45m
OUTSIDE      := ./internal/e2e ./internal/loadtest ./internal/testsupport/apicheck \
	./internal/testsupport/opscheck ./internal/gateway/openapi
RACEFIRST    := ./internal/queue ./internal/booking
# racepkgs: every package but OUTSIDE's (a shell expression).
racepkgs      = $$($(GO) list $(PKGS) | grep -vxF "$$($(GO) list $(OUTSIDE))")
# The Dockerfile's build (static, trimmed, stripped): make build, the
# allocation budgets, the e2e stack (stack.Binaries), OUTSIDE's tests and
# TestDockerfileBuildsTheBinaries all compile this one way, so the
# dependencies are compiled once for them all. The race detector's build,
# which needs cgo, is the only other one. go vet checks each group with its
# tests' flags, so that it reads what they compiled, compiled once, not
# twice.
RELEASE    := CGO_ENABLED=0
BUILDFLAGS := -trimpath -ldflags="-s -w"

# Every parser of outside input has a fuzz target (docs/RELIABILITY.md,
# "Fuzzing"), package:target. `make test` runs each for 1,000 inputs, a
# count: a duration (3 s, as before) races Go's fuzzing coordinator at its
# deadline, which then fails the target with "context deadline exceeded"
# and no input found (it did so twice here on 2026-12-04, for
# ./internal/pass and ./internal/config); `make fuzz` runs each for
# FUZZTIME. What a run finds is kept in the package's
# testdata/fuzz/<target>/ and replayed by every `go test`.
FUZZ_TARGETS := \
	./internal/line:FuzzTicket \
	./internal/proof:FuzzVerify \
	./internal/account:FuzzVerify \
	./internal/pass:FuzzVerify \
	./internal/booking:FuzzHold \
	./internal/booking:FuzzCheckout \
	./internal/booking:FuzzCredit \
	./internal/gateway:FuzzJoin \
	./internal/gateway:FuzzAway \
	./internal/gateway:FuzzAdminPatch \
	./internal/gateway:FuzzForwardedHeaders \
	./internal/gateway:FuzzForwardAuth \
	./internal/config:FuzzParse
FUZZTIME     ?= 2m
FUZZMINIMIZE ?= 5s

.PHONY: run test test-packages bench build lint clean fuzz fuzz-build fuzz-each openapi-baseline

build:
	$(RELEASE) $(GO) build $(BUILDFLAGS) -o $(BIN)/ ./cmd/...

run: build
	$(BIN)/devstack run

# test runs its phases one after the other and says how long each took
# (go test adds each package's time), and the whole at the end. go vet
# comes after the tests: with the tests' flags it finds everything compiled
# (a few seconds), where before the tests it held the end-to-end package,
# the longest, back by the whole compile (394 s of a cold-cache run here).
# go test compiles the first package's dependencies first. The fuzz
# targets' test binaries are built beside the tests, at the idle priority
# (SCHED_IDLE: only on a core the tests leave free, as the end-to-end
# tests' waits do), so that the fuzz phase mostly fuzzes. (Running the
# allocation budgets and the fuzzing itself there too was tried: on a
# loaded machine a fuzz target at the idle priority did not finish
# gathering its corpus within its time.)
test:
	@set -e; start=$$(date +%s); took=""; \
	phase() { name=$$1; shift; t0=$$(date +%s); \
		if "$$@"; then :; else rc=$$?; echo "make test: $$name FAILED after $$(( $$(date +%s) - t0 ))s"; exit $$rc; fi; \
		t=$$(( $$(date +%s) - t0 )); echo "make test: $$name took $${t}s"; took="$$took $$name $${t}s,"; }; \
	phase build $(MAKE) --no-print-directory build; \
	fuzzbin=$$(mktemp -d); \
	chrt --idle 0 setsid -w $(MAKE) --no-print-directory fuzz-build FUZZBIN="$$fuzzbin/bin" >"$$fuzzbin/log" 2>&1 & fuzzbuild=$$!; \
	trap 'rc=$$?; kill -- -$$fuzzbuild 2>/dev/null || :; rm -rf "$$fuzzbin"; exit $$rc' EXIT; \
	phase tests $(BIN)/devstack test -- $(MAKE) --no-print-directory test-packages; \
	phase vet sh -c '$(GO) vet -race -trimpath $(racepkgs) && env $(RELEASE) $(GO) vet -trimpath $(OUTSIDE)'; \
	phase allocations $(BIN)/devstack test -- env $(RELEASE) $(GO) test -trimpath -count=1 -run 'Allocations|MemoryPerWaitingFan' ./internal/queue ./internal/gateway; \
	fuzz() { built=0; wait $$fuzzbuild || built=$$?; cat "$$fuzzbin/log"; [ $$built -eq 0 ] && \
		$(BIN)/devstack test -- $(MAKE) --no-print-directory fuzz-each FUZZTIME=1000x FUZZMINIMIZE=10x FUZZBIN="$$fuzzbin/bin"; }; \
	phase fuzz fuzz; \
	echo "make test: passed in $$(( $$(date +%s) - start ))s:$${took%,}"

# test-packages runs the two go test commands at once (see TESTFLAGS): the
# race detector's prints as it goes, OUTSIDE's when both are done.
test-packages:
	@out=$$(mktemp); trap 'rm -f "$$out"' EXIT; \
	env $(RELEASE) $(GO) test $(OUTSIDEFLAGS) $(OUTSIDE) >"$$out" 2>&1 & outside=$$!; \
	race=0; $(GO) test $(TESTFLAGS) $(RACEFIRST) $(racepkgs) || race=$$?; \
	rc=0; wait $$outside || rc=$$?; cat "$$out"; \
	[ $$race -eq 0 ] && [ $$rc -eq 0 ]

fuzz: build
	$(BIN)/devstack test -- $(MAKE) --no-print-directory fuzz-each FUZZTIME=$(FUZZTIME) FUZZMINIMIZE=$(FUZZMINIMIZE)

# fuzz-each runs the targets one after the other, inside devstack (the
# booking targets need its PostgreSQL). go test -fuzz takes one package and
# one target, and links the package's test binary for each: so each
# package's binary is built once (fuzz-build, into FUZZBIN; make test builds
# them beforehand), instrumented for fuzzing as go test -fuzz builds it, and
# run in the package's folder for each of its targets, with go test's corpus
# cache (what it finds still goes to testdata/fuzz/).
FUZZ_PKGS := $(sort $(foreach t,$(FUZZ_TARGETS),$(firstword $(subst :, ,$(t)))))
FUZZBIN   ?=
fuzzbin    = $(FUZZBIN)/$(subst /,_,$(subst .,_,$(1))).test

fuzz-build:
	@set -e; [ -n "$(FUZZBIN)" ] || { echo "fuzz-build: FUZZBIN not set"; exit 2; }; mkdir -p "$(FUZZBIN)"; t0=$$(date +%s); \
	$(foreach pkg,$(FUZZ_PKGS),$(GO) test -c -fuzz=. -trimpath -o "$(call fuzzbin,$(pkg))" "$(pkg)";) \
	echo "fuzz-build: $(words $(FUZZ_PKGS)) test binaries built in $$(( $$(date +%s) - t0 ))s"

fuzz-each:
	@set -e; bin="$(FUZZBIN)"; if [ -z "$$bin" ]; then dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; bin="$$dir"; \
		$(MAKE) --no-print-directory fuzz-build FUZZBIN="$$bin"; fi; \
	cache=$$($(GO) env GOCACHE)/fuzz; \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; exe="$$bin/$$(echo "$$pkg" | tr ./ __).test"; \
		echo "fuzz $$t for $(FUZZTIME)"; \
		ipath=$$($(GO) list "$$pkg"); (cd "$$pkg" && "$$exe" -test.run '^$$' -test.fuzz "^$${t#*:}\$$" -test.fuzztime $(FUZZTIME) \
			-test.fuzzminimizetime $(FUZZMINIMIZE) -test.fuzzcachedir "$$cache/$$ipath"); \
	done

bench: build
	$(BIN)/devstack test -- $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 60m $$($(GO) list $(PKGS) | grep -v /internal/loadtest)
	$(BIN)/devstack test -- $(GO) test -run '^$$' -bench . -benchtime=1x -count=1 -timeout 30m ./internal/loadtest

# openapi-baseline makes the OpenAPI document (internal/gateway/openapi/
# openapi.yaml) the baseline its breaking changes are checked against
# (TestNoBreakingChange, in make test): run it for a change that is meant to
# break clients, and commit baseline.json with the change.
openapi-baseline:
	$(GO) test ./internal/gateway/openapi -run '^TestNoBreakingChange$$' -count=1 -args -update-baseline

lint:
	@out=$$(gofmt -l cmd internal); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@if command -v staticcheck >/dev/null; then staticcheck $(PKGS); else echo "staticcheck not installed: go install honnef.co/go/tools/cmd/staticcheck@latest"; fi

clean:
	rm -rf $(BIN) .data
