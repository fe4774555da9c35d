// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// parseFlags parses a sub-command's flags and refuses arguments after them.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s: %w\n%s", fs.Name(), err, usage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q\n%s", fs.Name(), fs.Arg(0), usage)
	}
	return nil
}

// runDigest prints the digest of the index a layout holds: the digest a push of it prints.
func runDigest(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("digest", flag.ContinueOnError)
	dir := fs.String("layout", "", "the OCI image layout `release image` wrote")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("digest: -layout is empty")
	}
	idx, err := readLayoutIndex(*dir)
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	d, err := idx.Digest()
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	fmt.Fprintln(stdout, d)
	return nil
}

func runChart(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	src := fs.String("src", "", "the chart's directory, e.g. deploy/chart/lifeboat")
	dir := fs.String("layout", "", "the OCI image layout whose index the chart names by digest")
	version := fs.String("version", "", "the chart's version and appVersion: the release without its v")
	helm := fs.String("helm", "helm", "the helm binary")
	out := fs.String("out", "", "the directory to write lifeboat-<version>.tgz into")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var errs []error
	for name, v := range map[string]string{"-src": *src, "-layout": *dir, "-version": *version, "-out": *out} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is empty", name))
		}
	}
	if len(*version) > 0 && (*version)[0] == 'v' {
		errs = append(errs, fmt.Errorf("-version %q: the chart's version has no leading v", *version))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	path, err := packageChart(ctx, *helm, *src, *dir, *version, *out)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	fmt.Fprintln(stdout, path)
	return nil
}

func runPlugin(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("plugin", flag.ContinueOnError)
	var binaries listFlag
	var s pluginSpec
	out := fs.String("out", "", "the directory to write the archives, their SBOMs and lifeboat.yaml into")
	fs.Var(&binaries, "binary", "os/arch=path of the Lifeboat binary for that platform; repeat for each")
	fs.StringVar(&s.completion, "completion", "", "the completion script, kubectl_complete-lifeboat")
	fs.StringVar(&s.template, "template", "", "the krew manifest's template")
	fs.StringVar(&s.image.version, "version", "", "the release's tag, v<version>")
	created := fs.String("created", "", "the commit's time, RFC 3339: every time in the archives and SBOMs")
	fs.StringVar(&s.image.source, "source", "", "the source repository's URL")
	fs.StringVar(&s.downloadURL, "download-url", "", "the URL the release's assets are downloaded from, without the file name")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("plugin: -out is empty")
	}
	var err error
	if s.image.created, s.image.binaries, err = parseStamp(*created, binaries); err != nil {
		return fmt.Errorf("plugin: %w", err)
	}
	if err := writePlugin(*out, s); err != nil {
		return fmt.Errorf("plugin: %w", err)
	}
	for _, b := range s.image.binaries {
		fmt.Fprintln(stdout, pluginArchive(b.platform))
	}
	return nil
}

func runChecksums(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("checksums", flag.ContinueOnError)
	dir := fs.String("dir", "", "the release directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("checksums: -dir is empty")
	}
	if err := writeChecksums(*dir); err != nil {
		return fmt.Errorf("checksums: %w", err)
	}
	fmt.Fprintln(stdout, checksumsFile)
	return nil
}

func runVerify(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	var imagePlatforms, pluginPlatforms listFlag
	var c releaseCheck
	fs.StringVar(&c.dir, "dir", "", "the release directory: image/, the chart, the plugin's archives, lifeboat.yaml, SHA256SUMS")
	fs.StringVar(&c.version, "version", "", "the release's tag, v<version>")
	fs.Var(&imagePlatforms, "image-platform", "os/arch the image must hold; repeat for each")
	fs.Var(&pluginPlatforms, "plugin-platform", "os/arch the plugin must be built for; repeat for each")
	fs.StringVar(&c.repository, "repository", "", "the chart's image.repository")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if c.dir == "" {
		return errors.New("verify: -dir is empty")
	}
	var errs []error
	for _, l := range []struct {
		in  listFlag
		out *[]v1.Platform
	}{{imagePlatforms, &c.imagePlatforms}, {pluginPlatforms, &c.pluginPlatforms}} {
		for _, s := range l.in {
			p, err := v1.ParsePlatform(s)
			if err != nil || p.OS == "" || p.Architecture == "" {
				errs = append(errs, fmt.Errorf("platform %q is not os/arch", s))
				continue
			}
			*l.out = append(*l.out, *p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	digest, err := verifyRelease(c)
	if err != nil {
		return fmt.Errorf("verify %s: %w", c.dir, err)
	}
	fmt.Fprintf(stdout, "%s: release %s, image index %s, chart, %d plugin archives with SBOMs, krew manifest and %s agree\n",
		c.dir, c.version, digest, len(c.pluginPlatforms), checksumsFile)
	return nil
}
