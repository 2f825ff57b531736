# waitroom: `make run` starts everything locally, `make test` runs every test
# against real (private) Redis and PostgreSQL. Both need only Go and Debian.
GO      ?= go
export PATH := $(PATH):/usr/local/go/bin:$(shell $(GO) env GOPATH 2>/dev/null)/bin
BIN     := bin
PKGS    := ./...
TESTFLAGS ?= -race -count=1 -timeout 45m

.PHONY: run test bench build lint clean

build:
	$(GO) build -o $(BIN)/ ./cmd/...

run: build
	$(BIN)/devstack run

test: build
	$(GO) vet $(PKGS)
	$(BIN)/devstack test -- $(GO) test $(TESTFLAGS) $(PKGS)
	$(BIN)/devstack test -- $(GO) test -count=1 -run 'Allocations' ./internal/queue ./internal/gateway

bench: build
	$(BIN)/devstack test -- $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 60m $$($(GO) list $(PKGS) | grep -v /internal/loadtest)
	$(BIN)/devstack test -- $(GO) test -run '^$$' -bench . -benchtime=1x -count=1 -timeout 30m ./internal/loadtest

lint:
	@out=$$(gofmt -l cmd internal); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@if command -v staticcheck >/dev/null; then staticcheck $(PKGS); else echo "staticcheck not installed: go install honnef.co/go/tools/cmd/staticcheck@latest"; fi

clean:
	rm -rf $(BIN) .data
