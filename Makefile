# writ — build, test and demo targets. `make test` is what CI runs.
GO        ?= go
BIN       := bin
PKGS      := ./...
RACE      ?= -race
# The per-package timeout is a hang guard, not a speed check: a loaded
# 2-core machine (load ~30) ran conformance 2.3x and all of make test 3.6x
# slower than an idle one, past 20m for one package.
TESTFLAGS ?= -timeout 45m
# LEASES is the second example domain (a lease/lock service).
LEASES    := examples/leases
export PATH := $(PATH):$(shell $(GO) env GOPATH)/bin
# Version stamping (see package version); override VERSION for a release.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE      ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
VPKG      := github.com/writ-dev/writ/version
LDFLAGS   := -X $(VPKG).version=$(VERSION) -X $(VPKG).commit=$(COMMIT) -X $(VPKG).date=$(DATE)

.PHONY: all build demo test unit verify fmt vet staticcheck tidy-check gen gen-check bench bench-vs-etcd soak robustness release clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/... ./examples/jobs/cmd/writ-jobs
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/writ-leases ./examples/leases/cmd/writ-leases

demo: build
	KEEP=$(KEEP) BIN=$(BIN) ./scripts/demo.sh

test: verify unit

unit:
	$(GO) test $(RACE) $(TESTFLAGS) $(PKGS)

verify: fmt vet staticcheck tidy-check gen-check

fmt:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	@command -v staticcheck >/dev/null || { echo "staticcheck not found: go install honnef.co/go/tools/cmd/staticcheck@v0.8.2"; exit 1; }
	staticcheck $(PKGS)

tidy-check:
	@cp go.mod /tmp/writ-go.mod.bak; cp go.sum /tmp/writ-go.sum.bak; \
	$(GO) mod tidy; \
	if ! git diff --quiet -- go.mod go.sum; then echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit"; git --no-pager diff -- go.mod go.sum | head -40; cp /tmp/writ-go.mod.bak go.mod; cp /tmp/writ-go.sum.bak go.sum; exit 1; fi

gen:
	$(GO) run ./cmd/writ gen
	$(GO) run ./cmd/writ gen --schema $(LEASES)/schema --out $(LEASES)/leasesgen
	$(GO) run ./cmd/writ gen --schema internal/cyclic/schema --out internal/cyclic/cyclicgen

gen-check:
	$(GO) run ./cmd/writ gen --check
	$(GO) run ./cmd/writ gen --check --schema $(LEASES)/schema --out $(LEASES)/leasesgen
	$(GO) run ./cmd/writ gen --check --schema internal/cyclic/schema --out internal/cyclic/cyclicgen

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# writ side by side with etcd v3.6 on this machine (not part of `make test`):
# fresh 3-node clusters, interleaved rounds; docs/performance.md.
# ROUNDS=1 for a quick run; OUT=dir for the table and plot.
bench-vs-etcd:
	GO=$(GO) BIN=$(BIN) ./scripts/bench-vs-etcd.sh

soak:
	$(GO) test $(RACE) -timeout 60m -tags soak $(PKGS)

# The robustness suite's CI tier alone (it also runs in `make test`; the
# longer tier runs in `make soak`). WRIT_ROBUSTNESS_SEED=N reruns a seed;
# see docs/robustness.md.
robustness:
	$(GO) test -count=1 -timeout 20m -run 'TestRobustness' -v ./robustness/

# Versioned archives for linux/amd64 and linux/arm64 and their checksums in
# dist/ (scripts/release.sh; docs/deploy.md).
release:
	GO=$(GO) VERSION=$(VERSION) COMMIT=$(COMMIT) DATE=$(DATE) ./scripts/release.sh

clean:
	rm -rf $(BIN) dist
