# waitroom: `make run` starts everything locally, `make test` runs every test
# against real (private) Redis and PostgreSQL. Both need only Go and Debian.
GO      ?= go
export PATH := $(PATH):/usr/local/go/bin:$(shell $(GO) env GOPATH 2>/dev/null)/bin
BIN     := bin
PKGS    := ./...
TESTFLAGS ?= -race -count=1 -timeout 45m
# The Dockerfile's build (static, trimmed, stripped): make build, go vet,
# the allocation budgets, the e2e stack (stack.Binaries) and
# TestDockerfileBuildsTheBinaries all compile this one way, so the
# dependencies are compiled once for them all (the race detector's build,
# which needs cgo, is the only other one).
RELEASE    := CGO_ENABLED=0
BUILDFLAGS := -trimpath -ldflags="-s -w"

# Every parser of outside input has a fuzz target (docs/RELIABILITY.md,
# "Fuzzing"), package:target. `make test` runs each a few seconds, `make
# fuzz` for FUZZTIME each; what a run finds is kept in the package's
# testdata/fuzz/<target>/ and replayed by every `go test`.
FUZZ_TARGETS := \
	./internal/queue:FuzzTicket \
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

.PHONY: run test bench build lint clean fuzz fuzz-each

build:
	$(RELEASE) $(GO) build $(BUILDFLAGS) -o $(BIN)/ ./cmd/...

run: build
	$(BIN)/devstack run

test: build
	$(RELEASE) $(GO) vet -trimpath $(PKGS)
	$(BIN)/devstack test -- $(GO) test $(TESTFLAGS) $(PKGS)
	$(BIN)/devstack test -- env $(RELEASE) $(GO) test -trimpath -count=1 -run 'Allocations' ./internal/queue ./internal/gateway
	$(BIN)/devstack test -- $(MAKE) --no-print-directory fuzz-each FUZZTIME=3s FUZZMINIMIZE=10x

fuzz: build
	$(BIN)/devstack test -- $(MAKE) --no-print-directory fuzz-each FUZZTIME=$(FUZZTIME) FUZZMINIMIZE=$(FUZZMINIMIZE)

# fuzz-each runs the targets one after the other (go test -fuzz takes one
# package and one target), inside devstack (the booking targets need its
# PostgreSQL).
fuzz-each:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $$t for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $${t%%:*}; \
	done

bench: build
	$(BIN)/devstack test -- $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 60m $$($(GO) list $(PKGS) | grep -v /internal/loadtest)
	$(BIN)/devstack test -- $(GO) test -run '^$$' -bench . -benchtime=1x -count=1 -timeout 30m ./internal/loadtest

lint:
	@out=$$(gofmt -l cmd internal); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@if command -v staticcheck >/dev/null; then staticcheck $(PKGS); else echo "staticcheck not installed: go install honnef.co/go/tools/cmd/staticcheck@latest"; fi

clean:
	rm -rf $(BIN) .data
