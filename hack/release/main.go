// SPDX-License-Identifier: Apache-2.0

// Command release builds, checks and publishes what a Lifeboat release is made of: the
// container image (without a container engine), the packaged chart, the kubectl plugin's
// archives and krew manifest, SBOMs and checksums.
//
//	release image -out DIR -binary linux/amd64=PATH -binary linux/arm64=PATH -version V -revision SHA -created TIME [...]
//	release push -layout DIR -repository REGISTRY/PATH -tag TAG [-tag TAG ...]
//	release digest -layout DIR
//	release chart -src CHART -layout DIR -version V -helm PATH -out DIR
//	release plugin -out DIR -binary OS/ARCH=PATH... -completion FILE -template FILE -version V -created TIME -source URL -download-url URL
//	release checksums -dir DIR
//	release verify -dir DIR -version V -image-platform OS/ARCH... -plugin-platform OS/ARCH... [-repository REGISTRY/PATH]
//
// `image` writes an OCI image layout holding one multi-platform index: for each binary, an
// image with a single layer (the binary at /lifeboat, CA roots, an SPDX SBOM) on an empty
// base. The same inputs give byte-identical output: file times, config and history carry the
// commit's time, never the build's. `push` copies the layout's index to a registry, with the
// credentials of the Docker config file (~/.docker/config.json), and prints the pushed digest.
// `chart` packages the chart naming the layout's index by digest; `plugin` writes each
// platform's plugin archive with its SBOM, and the krew manifest; `checksums` lists every
// file of a release directory; `verify` checks all of them against each other.
//
// `make image` and the release workflow run it; the Makefile builds the binaries with its
// own flags, so the binaries in the image are those `make lifeboat` builds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

const usage = "usage: release image -out DIR -binary OS/ARCH=PATH... -agent-binary OS/ARCH=PATH... -version V -revision SHA -created RFC3339 [-source URL] [-licenses SPDX] [-tag TAG]\n" +
	"       release push -layout DIR -repository REGISTRY/PATH -tag TAG...\n" +
	"       release digest -layout DIR\n" +
	"       release chart -src CHART -layout DIR -version V -helm PATH -out DIR\n" +
	"       release plugin -out DIR -binary OS/ARCH=PATH... -completion FILE -template FILE -version V -created RFC3339 -source URL -download-url URL\n" +
	"       release checksums -dir DIR\n" +
	"       release verify -dir DIR -version V -image-platform OS/ARCH... -plugin-platform OS/ARCH... [-repository REGISTRY/PATH]"

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "image":
		return runImage(args[1:], stdout)
	case "push":
		return runPush(ctx, args[1:], stdout)
	case "digest":
		return runDigest(args[1:], stdout)
	case "chart":
		return runChart(ctx, args[1:], stdout)
	case "plugin":
		return runPlugin(args[1:], stdout)
	case "checksums":
		return runChecksums(args[1:], stdout)
	case "verify":
		return runVerify(args[1:], stdout)
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}

// parseStamp reads -created and each -binary.
func parseStamp(created string, binaries []string) (time.Time, []platformBinary, error) {
	var errs []error
	var t time.Time
	if created != "" {
		var err error
		if t, err = time.Parse(time.RFC3339, created); err != nil {
			errs = append(errs, fmt.Errorf("-created %q is not an RFC 3339 time", created))
		}
	}
	var out []platformBinary
	for _, b := range binaries {
		pb, err := parsePlatformBinary(b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, pb)
	}
	return t, out, errors.Join(errs...)
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func runImage(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var binaries listFlag
	out := fs.String("out", "", "directory of the OCI image layout to write (replaced if it holds one)")
	fs.Var(&binaries, "binary", "os/arch=path of a static Lifeboat binary; repeat for each platform")
	var agents listFlag
	fs.Var(&agents, "agent-binary", "os/arch=path of the static lifeboat-agent binary; one for each -binary's platform")
	version := fs.String("version", "", "the release, as the binary is stamped (git describe)")
	revision := fs.String("revision", "", "the commit built")
	created := fs.String("created", "", "the commit's time, RFC 3339: every time in the image")
	source := fs.String("source", "", "the source repository's URL")
	licenses := fs.String("licenses", "", "SPDX license expression")
	tag := fs.String("tag", "", "the index's name in the layout (org.opencontainers.image.ref.name)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("image: %w\n%s", err, usage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("image: unexpected argument %q\n%s", fs.Arg(0), usage)
	}
	if *out == "" {
		return errors.New("image: -out is empty: the directory of the OCI layout to write")
	}
	spec := imageSpec{version: *version, revision: *revision, source: *source, licenses: *licenses, tag: *tag}
	var err error
	if spec.created, spec.binaries, err = parseStamp(*created, binaries); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	for _, a := range agents {
		pb, err := parseFlagBinary("agent-binary", a)
		if err != nil {
			return fmt.Errorf("image: %w", err)
		}
		spec.agents = append(spec.agents, pb)
	}
	if err := checkOut(*out); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	idx, err := buildIndex(spec)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if err := writeLayout(*out, idx, spec.tag); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s\n", *out, digest)
	return nil
}

func runPush(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var tags listFlag
	dir := fs.String("layout", "", "the OCI image layout `release image` wrote")
	repository := fs.String("repository", "", "where to push, e.g. ghcr.io/lifeboat-dev/lifeboat")
	fs.Var(&tags, "tag", "a tag to push the index as; repeat for several")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("push: %w\n%s", err, usage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("push: unexpected argument %q\n%s", fs.Arg(0), usage)
	}
	switch {
	case *dir == "":
		return errors.New("push: -layout is empty: the OCI layout to push")
	case *repository == "":
		return errors.New("push: -repository is empty")
	case len(tags) == 0:
		return errors.New("push: no -tag given")
	}
	ref, err := push(ctx, *dir, *repository, tags)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	fmt.Fprintln(stdout, ref)
	return nil
}
