// SPDX-License-Identifier: Apache-2.0

// Command lifeboat drains Kubernetes nodes before AWS takes their instances away.
//
//	lifeboat agent       one node, notices from instance metadata (a DaemonSet)
//	lifeboat controller  every node, notices from an SQS queue (a Deployment)
//	lifeboat preflight   check permissions, the notice source and identity settings
//	lifeboat config      print the effective configuration and where each value came from
//	lifeboat status      the nodes in an interruption episode, and what holds each
//	lifeboat check       the workloads that could not leave a node within a Spot warning
//	lifeboat forget      remove what Lifeboat wrote on Nodes (a dry run unless --yes)
//	lifeboat version     print the build
//
// With no command it behaves like aws-node-termination-handler: controller mode when
// ENABLE_SQS_TERMINATION_DRAINING is true, agent mode otherwise. Installed as kubectl-lifeboat
// it is a kubectl plugin: `kubectl lifeboat status`; installed as kubectl_complete-lifeboat, it
// completes the plugin's arguments for kubectl.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit statuses. The daemon's commands keep DESIGN.md's: 0 ok, 1 runtime failure or missing
// permission, 2 bad configuration. The read-only commands (status, check, version) keep
// kubectl's custom: 0 clean, 1 findings (check), 2 usage, 3 runtime error; forget, which
// shares their flags and their plugin, keeps theirs too.
const (
	exitOK       = 0
	exitFailure  = 1 // the daemon: a runtime failure
	exitFindings = 1 // check: workloads that cannot leave in time
	exitUsage    = 2 // bad configuration or arguments; nothing was started
	exitRuntime  = 3 // a read-only command could not do its work (API unreachable, forbidden)
)

// Command groups in the help.
const (
	groupDaemon  = "daemon"
	groupRead    = "read"
	groupCleanup = "cleanup"
)

// pluginPrefix is how kubectl finds plugins on PATH.
const pluginPrefix = "kubectl-"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	handOver = true
	os.Exit(runAs(ctx, filepath.Base(os.Args[0]), os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// run runs the command line as the binary named lifeboat.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	return runAs(ctx, "lifeboat", args, lookupEnv, stdout, stderr)
}

// app is what every command reads: the process's environment and output, and the global flags.
type app struct {
	plugin    bool // run as kubectl-lifeboat
	lookupEnv func(string) (string, bool)
	stdout    io.Writer
	stderr    io.Writer
	kube      *kubeFlags
	output    string
	logLevel  string
}

// runAs runs the command line as the binary name (argv[0]'s base) and returns the exit status.
func runAs(ctx context.Context, name string, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	helper := name == completionHelper
	if helper {
		// kubectl shows the helper's stderr in the terminal, where cobra's notes do not belong.
		args, stderr = helperArgs(args), io.Discard
	}
	a := &app{plugin: helper || strings.HasPrefix(name, pluginPrefix), lookupEnv: lookupEnv, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	if found, _, err := root.Find(args); err == nil && found == root && !a.plugin && !asksForHelp(args) {
		if onWorkstation(root, args, lookupEnv) {
			return a.bareHelp(root)
		}
		// No command: the daemon, with NTH's settings, as NTH's image runs it.
		return a.runDaemon(ctx, "", args)
	}
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var e *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &e):
		if e.err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", root.DisplayName(), e.err)
		}
		return e.code
	default: // cobra's own: an unknown flag, a missing argument
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", root.DisplayName(), err, commandPath(root, args))
		return exitUsage
	}
}

// asksForHelp reports whether the arguments are a request for the commands' help.
func asksForHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help")
}

// commandPath is the display path of the command args name, for pointing at its help.
// CommandPath starts from the root's display name, kubectl lifeboat as a plugin.
func commandPath(root *cobra.Command, args []string) string {
	if c, _, err := root.Find(args); err == nil {
		return c.CommandPath()
	}
	return root.DisplayName()
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "lifeboat",
		Short: "Cordon and drain Kubernetes nodes before AWS interrupts, retires or scales in their EC2 instances",
		Long: `Lifeboat cordons and drains Kubernetes nodes before AWS interrupts, retires or scales in
their EC2 instances, then completes the Auto Scaling lifecycle action.

With no command it runs as aws-node-termination-handler does: controller mode when
ENABLE_SQS_TERMINATION_DRAINING=true, agent mode otherwise. 'lifeboat agent --help' lists the
daemon's settings. Installed on PATH as kubectl-lifeboat, it is a kubectl plugin.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	if a.plugin {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl lifeboat"}
		root.Long = `Lifeboat cordons and drains Kubernetes nodes before AWS interrupts, retires or scales in
their EC2 instances. As a kubectl plugin it offers Lifeboat's read-only commands, and forget.`
	}
	root.AddGroup(&cobra.Group{ID: groupRead, Title: "Read-only commands (kubectl's flags; exit 0 ok, 1 findings, 2 usage, 3 error):"},
		&cobra.Group{ID: groupCleanup, Title: "Clean-up (kubectl's flags; a dry run unless --yes; exit 0 ok, 2 usage, 3 error):"},
		&cobra.Group{ID: groupDaemon, Title: "The daemon (NTH's settings as environment variables or --setting=value):"})
	a.kube = newKubeFlags(a.lookupEnv)
	a.kube.bind(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&a.output, "output", "o", "", "Output format; each command lists the formats it offers")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "warn", "Log level of the read-only commands: debug, info, warn or error")
	registerCompletions(root, a.kube)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return err })
	if !a.plugin {
		root.AddCommand(a.daemonCommands()...)
	}
	root.AddCommand(a.statusCommand(), a.checkCommand(), (&forgetCommand{a: a}).command(), a.versionCommand())
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	// Known before Execute, so that "completion" and "help" are commands, not the daemon.
	root.InitDefaultHelpCmd()
	// As a plugin, kubectl's own completion script and the helper complete it.
	root.CompletionOptions.HiddenDefaultCmd = a.plugin
	root.InitDefaultCompletionCmd()
	return root
}

// exitError ends a command with an exit status, and a message unless err is nil.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// exitWith turns a status into what RunE returns.
func exitWith(code int) error {
	if code == exitOK {
		return nil
	}
	return &exitError{code: code}
}

// usageError is an error in the arguments or settings a read-only command was given.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// runtimeError is a read-only command that could not do its work.
func runtimeError(err error) error { return &exitError{code: exitRuntime, err: err} }
