// SPDX-License-Identifier: Apache-2.0

// Package faults is Lifeboat's scripted fault suite. Its tests run the real lifeboat binary
// against the sandbox (kube-apiserver with an audit log, kwok, the instance-metadata mock,
// goaws and the fake EC2 / Auto Scaling endpoint) and break things on purpose: SIGKILL in the
// middle of a drain, an API server restart, AWS and instance-metadata outages, a storm of
// duplicate queue messages. Then they check, from the API server's audit log and the fake's
// record of AWS calls, that every notice completed, no pod was evicted twice, every lifecycle
// action was completed once and no queue message was lost or deleted early.
//
// `make test` runs a short version of each scenario. `make faults` sets LIFEBOAT_FAULTS_FULL=1
// for the full-length runs reported in docs/reliability.md; LIFEBOAT_FAULTS_SEED replays the
// random kill points of a run, and LIFEBOAT_FAULTS_REPORT names a file that receives one
// Markdown table row per scenario.
//
// The non-test code here reads the evidence: audit events, SQS request bodies, metrics text.
package faults
