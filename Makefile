# Lifeboat. `make demo` and `make test` are all a newcomer needs; both build what they use.
SHELL := /bin/bash
GO    ?= go

# Sandbox binaries (etcd, Kubernetes, kwok, IMDS mock, SQS server, helm), built once per pinned
# version into a cache outside the checkout by hack/tools.sh.
TOOLS_BIN := $(shell hack/tools.sh --dir)
export LIFEBOAT_TOOLS_BIN := $(TOOLS_BIN)
# Tests must never reach 169.254.169.254 through the AWS SDK's default credential chain.
export AWS_EC2_METADATA_DISABLED := true
export AWS_ACCESS_KEY_ID := AKIDSANDBOX
export AWS_SECRET_ACCESS_KEY := sandbox-secret

# Whole-suite limit, well inside CI's 90 minutes on 2 cores.
TEST_TIMEOUT ?= 25m
# Fuzzing runs a fixed number of inputs per parser: a time limit can end with the engine's own
# "context deadline exceeded" on a loaded machine, which is not a finding.
FUZZ_TIME    ?= 50000x
# make test's share: the engine keeps what it found interesting in the Go build cache, so each
# run on a machine goes on from the last one's corpus.
TEST_FUZZ_TIME ?= 20000x
# FUZZ_WORKERS: fuzzing processes per target (default: one per CPU)
FUZZ_WORKERS ?=
FUZZ          = $(GO) test -run '^$$' -fuzztime $(FUZZ_TIME) $(if $(FUZZ_WORKERS),-parallel $(FUZZ_WORKERS))
# TEST_PACKAGES: test binaries make test runs at once
TEST_PACKAGES ?= 4

# Build stamp: what `lifeboat version` prints. The commit's own time, not the build's, so two
# builds of one commit are the same binary. Without git (a source archive) the version reads
# "dev" and the commit and its time "unknown"; each can be given: make build VERSION=v1.2.3.
GIT         ?= git
git_read     = $(shell GIT_OPTIONAL_LOCKS=0 $(GIT) -C $(CURDIR) $(1) 2>/dev/null)
VERSION     ?= $(or $(call git_read,describe --tags --always --dirty),dev)
COMMIT      ?= $(call git_read,rev-parse HEAD)
COMMIT_TIME ?= $(call git_read,log -1 --format=%cI)
VERSION_PKG := lifeboat.dev/lifeboat/internal/version
# The one set of link flags for every Lifeboat binary (make build, the image, the CLI).
LDFLAGS     := -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT) -X $(VERSION_PKG).CommitTime=$(COMMIT_TIME)
# Static (no libc: runs in a distroless or scratch image) and without the build machine's paths.
GO_BUILD    := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
BIN         ?= bin

.PHONY: all build lifeboat image image-push release-tool release-dry-run release-artifacts release-verify sandbox vet test test-packages test-release fuzz-quick fuzz-memory test-long unit fuzz faults bench bench-scale docs demo manifests clean

all: build

build: lifeboat
	$(GO) build -o $(BIN)/lifeboat-sandbox ./test/cmd/lifeboat-sandbox

## lifeboat: only the Lifeboat binaries: $(BIN)/lifeboat, and beside it $(BIN)/lifeboat-agent,
## the agent's own binary, which `lifeboat agent` hands over to
lifeboat:
	$(GO_BUILD) -o $(BIN)/lifeboat ./cmd/lifeboat
	$(GO_BUILD) -o $(BIN)/lifeboat-agent ./cmd/lifeboat-agent

## image: the container image for linux/amd64 and linux/arm64 without a container engine: an OCI
## image layout holding one multi-platform index, in _output/image; two builds of one commit are
## byte-identical (hack/release, docs/install.md). The first build compiles every package for arm64.
IMAGE_DIR        ?= _output/image
IMAGE_PLATFORMS  ?= linux/amd64 linux/arm64
IMAGE_SOURCE     ?= https://github.com/lifeboat-dev/lifeboat
IMAGE_LICENSES   ?= Apache-2.0
# Where releases are pushed: the chart's default image.repository.
IMAGE_REPOSITORY ?= ghcr.io/lifeboat-dev/lifeboat
# The chart's default tag is its appVersion: the release without the leading v.
IMAGE_TAG        ?= $(patsubst v%,%,$(VERSION))
RELEASE_TOOL     := $(abspath $(BIN))/release

release-tool:
	cd hack/release && CGO_ENABLED=0 $(GO) build -trimpath -o $(RELEASE_TOOL) .

image: release-tool
	@set -e; binaries=; for p in $(IMAGE_PLATFORMS); do \
		out=$(BIN)/image/$${p//\//_}/lifeboat; \
		echo "GOOS=$${p%%/*} GOARCH=$${p#*/} go build -o $$out ./cmd/lifeboat"; \
		GOOS=$${p%%/*} GOARCH=$${p#*/} $(GO_BUILD) -o $$out ./cmd/lifeboat; \
		echo "GOOS=$${p%%/*} GOARCH=$${p#*/} go build -o $$out-agent ./cmd/lifeboat-agent"; \
		GOOS=$${p%%/*} GOARCH=$${p#*/} $(GO_BUILD) -o $$out-agent ./cmd/lifeboat-agent; \
		binaries="$$binaries -binary $$p=$$out -agent-binary $$p=$$out-agent"; \
	done; \
	$(RELEASE_TOOL) image -out $(IMAGE_DIR) $$binaries -version '$(VERSION)' -revision '$(COMMIT)' \
		-created '$(COMMIT_TIME)' -source '$(IMAGE_SOURCE)' -licenses '$(IMAGE_LICENSES)' -tag '$(IMAGE_TAG)'

## image-push: push the index make image wrote to IMAGE_REPOSITORY as IMAGE_TAG (and IMAGE_EXTRA_TAGS),
## with the Docker config file's credentials; prints repository@digest
IMAGE_EXTRA_TAGS ?=
image-push: release-tool
	$(RELEASE_TOOL) push -layout $(IMAGE_DIR) -repository $(IMAGE_REPOSITORY) $(addprefix -tag ,$(IMAGE_TAG) $(IMAGE_EXTRA_TAGS))

## release-dry-run: what a tag publishes, built here without publishing anything, into RELEASE_DIR:
## the image layout (IMAGE_PLATFORMS), the chart naming its index by digest, the kubectl plugin's
## archives (PLUGIN_PLATFORMS) with their SBOMs, the krew manifest and SHA256SUMS; then hack/release
## checks each against the others, and that two image builds are byte-identical on every platform.
## RELEASE_VERSION, the tag, defaults to the chart's version. Needs helm (make sandbox, or HELM=).
## Cold, it compiles every package once per platform: make test builds only the host's image.
RELEASE_DIR          ?= _output/release
CHART_DIR            := deploy/chart/lifeboat
CHART_VERSION        := $(shell sed -n 's/^version: *//p' $(CHART_DIR)/Chart.yaml)
RELEASE_VERSION      ?= v$(CHART_VERSION)
PLUGIN_PLATFORMS     ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# Where the plugin's archives are downloaded from: the GitHub release of the tag.
RELEASE_DOWNLOAD_URL ?= $(IMAGE_SOURCE)/releases/download/$(VERSION)
HELM                 ?= $(TOOLS_BIN)/helm

# The binary's stamp is fixed when the Makefile is read, so the release's version is given to
# a make of its own.
release-dry-run:
	@test -x '$(HELM)' || { echo "no helm at $(HELM): make sandbox builds it, or give HELM=path" >&2; exit 1; }
	@$(MAKE) --no-print-directory release-artifacts release-verify VERSION=$(RELEASE_VERSION)
	cd hack/release && LIFEBOAT_IMAGE_PLATFORMS='$(IMAGE_PLATFORMS)' $(GO) test -count=1 -run '^TestMakeImage$$' .

# release-artifacts: the release directory, at VERSION. Files a previous run left are removed
# by name, so that a wrong RELEASE_DIR loses nothing else.
release-artifacts: IMAGE_DIR = $(RELEASE_DIR)/image
release-artifacts: image
	@rm -f $(RELEASE_DIR)/lifeboat-*.tgz $(RELEASE_DIR)/kubectl-lifeboat_*.tar.gz $(RELEASE_DIR)/kubectl-lifeboat_*.spdx.json \
		$(RELEASE_DIR)/lifeboat.yaml $(RELEASE_DIR)/SHA256SUMS
	@set -e; binaries=; for p in $(PLUGIN_PLATFORMS); do \
		out=$(BIN)/plugin/$${p//\//_}/kubectl-lifeboat; \
		echo "GOOS=$${p%%/*} GOARCH=$${p#*/} go build -o $$out ./cmd/lifeboat"; \
		GOOS=$${p%%/*} GOARCH=$${p#*/} $(GO_BUILD) -o $$out ./cmd/lifeboat; \
		binaries="$$binaries -binary $$p=$$out"; \
	done; \
	$(RELEASE_TOOL) plugin -out $(RELEASE_DIR) $$binaries -completion deploy/krew/kubectl_complete-lifeboat \
		-template deploy/krew/lifeboat.yaml.tmpl -version '$(VERSION)' -created '$(COMMIT_TIME)' \
		-source '$(IMAGE_SOURCE)' -download-url '$(RELEASE_DOWNLOAD_URL)'
	$(RELEASE_TOOL) chart -src $(CHART_DIR) -layout $(IMAGE_DIR) -version '$(patsubst v%,%,$(VERSION))' -helm '$(HELM)' -out $(RELEASE_DIR)
	$(RELEASE_TOOL) checksums -dir $(RELEASE_DIR)

release-verify: release-tool
	$(RELEASE_TOOL) verify -dir $(RELEASE_DIR) -version '$(VERSION)' $(addprefix -image-platform ,$(IMAGE_PLATFORMS)) \
		$(addprefix -plugin-platform ,$(PLUGIN_PLATFORMS)) -repository $(IMAGE_REPOSITORY)

## sandbox: build the pinned sandbox tools (cold: 15-25 min on 2 cores; warm: nothing to do)
sandbox:
	@hack/tools.sh >/dev/null

vet:
	@out=$$(gofmt -l cmd internal test deploy hack); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd hack/release && $(GO) vet ./...

## test: vet, then side by side: unit and integration tests with the race detector, the image for the
## host's platform, the release tool and workflow (hack/release, its own module; make release-dry-run
## builds every platform), and a short fuzz of each parser (one worker, TEST_FUZZ_TIME inputs each)
# Sandbox tests mostly wait on Leases, hooks and polls, so TEST_PACKAGES test binaries run at once
# and the fuzzing takes the CPU they leave; each part's output is printed when it ends.
# hack/release runs without the race detector: it starts no goroutines of its own, and the
# instrumented gzip compression of its layers would dominate its run.
# FuzzTemplateMemory runs after the rest: its seeds build bodies up to the limit and take
# seconds each, and Go's fuzzing engine ends a worker that spends 10 s on one input as
# deadlocked, which a worker starved beside the tests did.
test: sandbox vet
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-packages test-release fuzz-quick FUZZ_WORKERS=1 FUZZ_TIME=$(TEST_FUZZ_TIME)
	@$(MAKE) --no-print-directory fuzz-memory FUZZ_TIME=$(TEST_FUZZ_TIME)

# The longest packages are named first, so that they start first rather than end the run.
test-packages:
	LIFEBOAT_REQUIRE_SANDBOX=1 $(GO) test -race -count=1 -p $(TEST_PACKAGES) -timeout $(TEST_TIMEOUT) \
		./test/faults ./internal/controller ./deploy ./cmd/lifeboat ./internal/drain ./...

test-release:
	cd hack/release && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## test-long: the agent scenarios at full length (ASG Terminated for 2 minutes, IMDS failing for a minute each way),
## and a controller restarted with 500 scheduled episodes pending on their Nodes (make test: 30)
test-long: sandbox
	LIFEBOAT_REQUIRE_SANDBOX=1 LIFEBOAT_LONG=1 $(GO) test -race -count=1 -timeout 30m -run TestAgentEndToEnd ./internal/agent
	LIFEBOAT_REQUIRE_SANDBOX=1 LIFEBOAT_PENDING_EPISODES=500 $(GO) test -race -count=1 -timeout 30m -run TestRestartResumesPendingEpisodes -v ./internal/controller

## unit: tests that need no sandbox (under -short every test that would start a sandbox process skips)
unit:
	$(GO) test -race -count=1 -short ./...
	cd hack/release && $(GO) test -count=1 -short ./...

## fuzz: a fixed number of inputs (FUZZ_TIME) for each parser and the webhook's template evaluator
fuzz: fuzz-quick fuzz-memory

# fuzz-quick: every target whose inputs take milliseconds
fuzz-quick:
	$(FUZZ) -fuzz '^FuzzLoadEnv$$' ./internal/config
	$(FUZZ) -fuzz '^FuzzLabelValue$$' ./internal/nodes
	$(FUZZ) -fuzz '^FuzzParsers$$' ./internal/source/imds
	$(FUZZ) -fuzz '^FuzzParse$$' ./internal/source/sqs/messages
	$(FUZZ) -fuzz '^FuzzInstanceIDFromProviderID$$' ./internal/ownership
	$(FUZZ) -fuzz '^FuzzReadRecord$$' ./internal/record
	$(FUZZ) -fuzz '^FuzzNoteOf$$' ./internal/ownership
	$(FUZZ) -fuzz '^FuzzClip$$' ./internal/text
	$(FUZZ) -fuzz '^FuzzTemplate$$' ./internal/webhook
	$(FUZZ) -fuzz '^FuzzEvaluatorMatchesTextTemplate$$' ./internal/webhook
	$(FUZZ) -fuzz '^FuzzPrintfLength$$' ./internal/webhook

# fuzz-memory: the template evaluator's memory bounds, whose seeds take seconds each
fuzz-memory:
	$(FUZZ) -fuzz '^FuzzTemplateMemory$$' ./internal/webhook

## faults: the fault suite at full length (24 crash trials, API server down up to 30 s, 60 s AWS
## and IMDS outages, two 10,000-message storms, the regression scenarios); prints the table behind
## docs/reliability.md and writes it to _output/faults/results.md. About 15 minutes.
FAULTS_OUT ?= _output/faults
faults: sandbox
	@mkdir -p $(FAULTS_OUT); rm -f $(FAULTS_OUT)/results.md
	@status=0; set -o pipefail; \
	LIFEBOAT_REQUIRE_SANDBOX=1 LIFEBOAT_FAULTS_FULL=1 LIFEBOAT_FAULTS_REPORT=$(CURDIR)/$(FAULTS_OUT)/results.md \
		$(GO) test -count=1 -timeout 60m ./test/faults 2>&1 | tee $(FAULTS_OUT)/raw.txt || status=$$?; \
	echo; echo "| fault | mode | trials | survived | notices lost | notes | reproduce |"; echo "| --- | --- | --- | --- | --- | --- | --- |"; \
	cat $(FAULTS_OUT)/results.md 2>/dev/null; exit $$status

## bench: benchmarks against the sandbox (numbers are printed, never asserted); prints one
## table and writes _output/bench/{raw.txt,results.json,results.svg}. Several minutes.
BENCH_OUT  ?= _output/bench
BENCHTIME  ?= 3x
BENCH      ?= .
# BenchmarkAZReclaim is make bench-scale's alone.
BENCH_SKIP ?= ^BenchmarkAZReclaim$$
bench: sandbox
	@mkdir -p $(BENCH_OUT)
	@status=0; set -o pipefail; \
	$(GO) test -run '^$$' -bench '$(BENCH)' -skip '$(BENCH_SKIP)' -benchtime $(BENCHTIME) -timeout 30m ./internal/... 2>&1 | tee $(BENCH_OUT)/raw.txt || status=$$?; \
	echo; $(GO) run ./test/cmd/lifeboat-benchreport -in $(BENCH_OUT)/raw.txt -json $(BENCH_OUT)/results.json -svg $(BENCH_OUT)/results.svg || status=$$?; \
	exit $$status

## bench-scale: an Availability Zone reclaimed at once: 2000 kwok nodes, Spot warnings for 1000 of them with 20
## ReplicaSet pods each, after calibrating the API server's patch and eviction rates in the same run (and a long
## eviction step again after the burst: the goal's yardstick is the mean of the two); prints a
## report (times, requests and 429s, AWS calls, memory, CPU, rates against the calibrated ones). About 25 minutes (two runs)
## on 2 cores. Smaller: LIFEBOAT_SCALE_NODES, LIFEBOAT_SCALE_NOTICES, LIFEBOAT_SCALE_PODS, LIFEBOAT_SCALE_CALIBRATION,
## LIFEBOAT_SCALE_CALIBRATION_PODS, LIFEBOAT_SCALE_CALIBRATION_SECONDS, LIFEBOAT_SCALE_CALIBRATION_LONG_SECONDS. Two runs, each in its own world with a warm
## standby waiting (LIFEBOAT_SCALE_STANDBY=killed: only in the second): no-kill, and leader-killed (the leader is killed
## once LIFEBOAT_SCALE_KILL_AT percent of the evictions were accepted, default 25; the report gives the stall and the
## last eviction beside the run without a kill);
## LIFEBOAT_SCALE_KILL=off or only runs one of them; LIFEBOAT_SCALE_LEASE=15s/10s/2s sets the Lease's timings.
## LIFEBOAT_SCALE_HEAP_PROFILE=file writes a heap profile at the peak live heap (go tool pprof file), and file.goroutines
## the goroutines at their peak, grouped by stack. LIFEBOAT_SCALE_CPU_PROFILE=file writes a CPU profile of 15 s of the
## burst: its first (the cordons and the first evictions), or from LIFEBOAT_SCALE_CPU_PROFILE_FROM, a time after the
## sending (30s) or kill (the new leader's work). LIFEBOAT_SCALE_EVENTS=false runs it without Events and
## node conditions, for their cost. kwok runs at niceness LIFEBOAT_SCALE_KWOK_NICE (default -10, as root; 0: the usual
## priority): it stands in for every kubelet, and on shared cores its one watch of every pod fell behind the burst.
## LIFEBOAT_SCALE_PACING_START (an experiment, not a setting): the request budget's start, the least a queue lowers it to.
## LIFEBOAT_SCALE_SERVER_PROFILE=prefix runs the API server with profiling and writes its CPU profiles of 15 s to
## prefix.long (the middle of the calibration's long step) and prefix.burst (from where LIFEBOAT_SCALE_CPU_PROFILE_FROM says),
## .killed before them in the killed run: go tool pprof -top -diff_base prefix.long prefix.burst.
BENCH_SCALE_OUT ?= _output/bench-scale
bench-scale: sandbox
	@mkdir -p $(BENCH_SCALE_OUT)
	@set -o pipefail; LIFEBOAT_REQUIRE_SANDBOX=1 \
	LIFEBOAT_SCALE_NODES=$(LIFEBOAT_SCALE_NODES) LIFEBOAT_SCALE_NOTICES=$(LIFEBOAT_SCALE_NOTICES) \
	LIFEBOAT_SCALE_PODS=$(LIFEBOAT_SCALE_PODS) LIFEBOAT_SCALE_CALIBRATION=$(LIFEBOAT_SCALE_CALIBRATION) \
	LIFEBOAT_SCALE_CALIBRATION_PODS=$(LIFEBOAT_SCALE_CALIBRATION_PODS) LIFEBOAT_SCALE_CALIBRATION_SECONDS=$(LIFEBOAT_SCALE_CALIBRATION_SECONDS) \
	LIFEBOAT_SCALE_CALIBRATION_LONG_SECONDS=$(LIFEBOAT_SCALE_CALIBRATION_LONG_SECONDS) \
	LIFEBOAT_SCALE_HEAP_PROFILE=$(LIFEBOAT_SCALE_HEAP_PROFILE) LIFEBOAT_SCALE_CPU_PROFILE=$(LIFEBOAT_SCALE_CPU_PROFILE) \
	LIFEBOAT_SCALE_CPU_PROFILE_FROM=$(LIFEBOAT_SCALE_CPU_PROFILE_FROM) LIFEBOAT_SCALE_EVENTS=$(LIFEBOAT_SCALE_EVENTS) \
	LIFEBOAT_SCALE_KILL=$(LIFEBOAT_SCALE_KILL) LIFEBOAT_SCALE_KILL_AT=$(LIFEBOAT_SCALE_KILL_AT) LIFEBOAT_SCALE_LEASE=$(LIFEBOAT_SCALE_LEASE) \
	LIFEBOAT_SCALE_KWOK_NICE=$(LIFEBOAT_SCALE_KWOK_NICE) LIFEBOAT_SCALE_PACING_START=$(LIFEBOAT_SCALE_PACING_START) \
	LIFEBOAT_SCALE_SERVER_PROFILE=$(LIFEBOAT_SCALE_SERVER_PROFILE) \
	$(GO) test -run '^$$' -bench '^BenchmarkAZReclaim$$' -benchtime 1x -v -timeout 60m ./internal/controller 2>&1 | tee $(BENCH_SCALE_OUT)/raw.txt

## docs: regenerate docs/configuration.md from the settings table and docs/reference/metrics.md from the
## metrics registry (a test fails when either is stale)
docs:
	$(GO) generate ./internal/config ./internal/metrics ./internal/notice ./deploy

## demo: on the local sandbox, the agent and the controller handle a spot notice, an ASG terminate hook and
## another cluster's notice; prints each step and a summary, draws _output/demo/timeline.svg. DEMO_ARGS=--hold
## keeps everything running afterwards.
DEMO_ARGS ?=
demo: sandbox
	$(GO) run ./test/cmd/lifeboat-sandbox $(DEMO_ARGS)

## manifests: the chart's values.schema.json, then deploy/manifests/ rendered from the chart (tests fail when
## either is stale)
manifests: sandbox
	$(GO) run ./deploy/chartschema/cmd/chart-schema
	deploy/render-manifests.sh

clean:
	rm -rf bin
