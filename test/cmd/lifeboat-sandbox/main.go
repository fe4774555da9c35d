// SPDX-License-Identifier: Apache-2.0

// Command lifeboat-sandbox runs Lifeboat's demo on the local sandbox: a real Kubernetes
// control plane with three kwok nodes backed by fake EC2 instances and a few workloads, the
// lifeboat agent for one node and the controller for the cluster, then a spot notice, an
// Auto Scaling terminate hook, and a notice about another cluster's instance. It prints each
// step, a summary, and writes a timeline picture; it exits 1 if any case was not handled as
// expected. With --hold everything keeps running after the summary until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"lifeboat.dev/lifeboat/test/demo"
)

func main() {
	hold := flag.Bool("hold", false, "keep the sandbox, agent and controller running after the summary until interrupted")
	out := flag.String("out", "_output/demo", "directory for the timeline, the summary and the agent and controller logs")
	bin := flag.String("lifeboat", "", "a built lifeboat binary to run (default: build one)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "lifeboat-sandbox: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	res, err := demo.Run(ctx, demo.Options{OutputDir: *out, Lifeboat: *bin, Hold: *hold})
	interrupted := ctx.Err() != nil
	stop()
	if err != nil && interrupted {
		fmt.Fprintln(os.Stderr, "lifeboat-sandbox: interrupted; everything it started is stopped")
		os.Exit(130)
	}
	if err == nil && res.Check() != nil {
		fmt.Fprintln(os.Stderr, "lifeboat-sandbox: not every case was handled as expected; the summary above lists why")
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lifeboat-sandbox:", err)
		os.Exit(1)
	}
}
