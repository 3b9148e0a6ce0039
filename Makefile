# hookwheel developer tasks. `make` lists them.
#
# test, bench and run need Postgres and Redis: DATABASE_URL / REDIS_URL when set, else the ones on
# 127.0.0.1:5432 / :6379 when they answer, else throwaway instances in .run/ (see deploy/dev/services.sh).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# A fresh machine may have Go in /usr/local/go without it being on PATH.
export PATH := $(PATH):/usr/local/go/bin

GO       ?= go
BIN      := bin/hookwheel
SERVICES := deploy/dev/services.sh
# Sets DATABASE_URL and REDIS_URL, and says which (passwords masked). Not `eval "$(...)"` nor `x=$(...) && eval`:
# with those, set -e would not stop the recipe when services.sh fails.
SERVICES_ENV := svc_env=$$($(SERVICES) env); eval "$$svc_env"; \
	echo "DATABASE_URL=$$DATABASE_URL REDIS_URL=$$REDIS_URL" | sed -E 's|//([^:/@]*):[^@/]*@|//\1:***@|g'


.PHONY: help build generate test fuzz bench bench-peers bench-nodes run stop services clean distclean

help: ## list the targets
	@echo 'make targets:'
	@grep -E '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  \1\t\2/' | expand -t 14

build: ## build bin/hookwheel
	$(GO) build -o $(BIN) ./cmd/hookwheel

generate: ## regenerate what the OpenAPI document makes: the server's code, the Go SDK's client, the TypeScript SDK's types
	$(GO) generate ./...
	$(GO) -C sdk/go generate ./...
	deploy/dev/web.sh ensure
	npm --prefix sdk/typescript run --silent generate

test: ## go vet, staticcheck and every test (-race, fuzz seed corpora included, the dashboard in Chromium), against Postgres and Redis
	@$(SERVICES) ensure-cc
	deploy/dev/web.sh ensure
	$(SERVICES_ENV)
	# Here a missing browser fails the dashboard's tests instead of skipping them.
	export HOOKWHEEL_REQUIRE_BROWSER=1
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	# bench/ and sdk/go are modules of their own, checked by the same staticcheck (the version go.mod pins).
	staticcheck=$$($(GO) tool -n staticcheck)
	# vet builds bench/ as make bench does: a go.mod there left behind by the server module's fails here.
	$(GO) -C bench vet ./...
	(cd bench && "$$staticcheck" ./...)
	$(GO) -C sdk/go vet ./...
	(cd sdk/go && "$$staticcheck" ./...)
	# The SDK's own tests; its tests against a live server run from the root suite (TestSDKGo).
	$(GO) -C sdk/go test -race -count=1 ./...
	# The Helm chart (lint, render, kubeconform) and the compose file: a module of its own, out of go.mod's way.
	$(GO) -C deploy/helm vet ./... && (cd deploy/helm && "$$staticcheck" ./...)
	$(GO) -C deploy/helm test -count=1 ./...
	# The end-to-end package runs alone, after the others: its chaos tests time the failover of three
	# nodes, and beside another package's tests on two cores the nodes were starved for seconds.
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/internal/e2e$$')
	$(GO) test -race -count=1 -timeout 20m ./cmd/hookwheel/internal/e2e

# How long `make fuzz` runs each fuzz target, e.g. FUZZTIME=5m.
FUZZTIME ?= 30s

# go test -fuzz takes one target of one package at a time: fuzz lists them all, then runs each.
fuzz: ## run every fuzz target for FUZZTIME (30s) in turn; a failing input is saved under the package's testdata/fuzz
	@targets=$$($(GO) test -list '^Fuzz' ./... | awk '/^Fuzz/ { names[n++] = $$1 } /^ok/ { for (i = 0; i < n; i++) print $$2 " " names[i]; n = 0 }')
	[[ -n $$targets ]] || { echo 'no fuzz targets found' >&2; exit 1; }
	while read -r pkg target; do
		echo "== $$target ($$pkg), $(FUZZTIME)"
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg"
	done <<< "$$targets"

# Extra flags for bench/cmd/hwbench, e.g. HWBENCH_FLAGS='-backlog 1000000,10000000' (see bench/README.md).
HWBENCH_FLAGS ?=

bench: ## timing-wheel and signing benchmarks, the end-to-end benchmark and the bench/ scenarios (short mode)
	@$(SERVICES_ENV)
	$(GO) test -run '^$$' -bench . -benchmem ./dispatcher/... ./internal/signing
	$(GO) test -run '^$$' -bench 'EndToEnd|NoisyNeighbour|TenantDeletion' -benchtime 1x -timeout 10m ./cmd/hookwheel/internal/e2e
	$(GO) build -o $(BIN) ./cmd/hookwheel
	$(GO) -C bench build -o bin/hwbench ./cmd/hwbench
	bench/bin/hwbench suite -hookwheel $(CURDIR)/$(BIN) -command 'make bench $(HWBENCH_FLAGS)' $(HWBENCH_FLAGS)

bench-peers: ## hookwheel vs River vs Asynq: fire precision at 1k/s and throughput (bench/)
	@$(SERVICES_ENV)
	$(GO) build -o $(BIN) ./cmd/hookwheel
	$(GO) -C bench build -o bin/hwbench ./cmd/hwbench
	bench/bin/hwbench peers -hookwheel $(CURDIR)/$(BIN) -command 'make bench-peers $(HWBENCH_FLAGS)' $(HWBENCH_FLAGS)

# Apart from bench: 5 and then 10 nodes take about 3 minutes, and 11 processes crowd a small machine.
bench-nodes: ## many nodes: idle Postgres cost per node; a node joining, leaving (SIGTERM) and killed under load (bench/)
	@$(SERVICES_ENV)
	$(GO) build -o $(BIN) ./cmd/hookwheel
	$(GO) -C bench build -o bin/hwbench ./cmd/hwbench
	bench/bin/hwbench nodes -hookwheel $(CURDIR)/$(BIN) -command 'make bench-nodes $(HWBENCH_FLAGS)' $(HWBENCH_FLAGS)

run: ## serve the API and dispatcher on :8080 with a demo tenant (Ctrl-C stops)
	@deploy/dev/run.sh

services: ## start (or find) Postgres and Redis and print their URLs
	@$(SERVICES) env

stop: ## stop the throwaway Postgres and Redis started in .run/
	@$(SERVICES) stop

clean: ## remove build and test outputs
	rm -rf bin
	rm -f *.test *.out *.prof

distclean: stop clean ## also delete .run/ (throwaway databases, admin token, demo tenant)
	# The throwaway cluster lives outside .run/ when the postgres OS user cannot reach the checkout.
	d=$$(cat .run/pg.datadir 2>/dev/null || true)
	if [[ -n $$d && $$d != "$(CURDIR)/.run/"* ]]; then rm -rf "$$d"; fi
	rm -rf .run
