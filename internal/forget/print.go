// SPDX-License-Identifier: Apache-2.0

package forget

import (
	"fmt"
	"io"
	"text/tabwriter"

	"lifeboat.dev/lifeboat/internal/output"
)

// Kind is the kind of a Report in JSON and YAML.
const Kind = "ForgetReport"

// Report is what forget prints as JSON or YAML.
type Report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// DryRun says nothing was removed: the nodes' Remove lists are what would be.
	DryRun bool   `json:"dryRun"`
	Nodes  []Node `json:"nodes"`
}

// Formats are the -o values forget offers.
var Formats = []string{output.Table, output.Name, output.JSON, output.YAML, output.JSONPath}

// ApplyFlag is the flag that makes forget remove what it finds; the closing line of a dry run
// names it.
const ApplyFlag = "--yes"

// PrintFormat writes the nodes as a table (one row per item: removed, to remove or kept, and
// a closing count), as the names of the nodes with something to remove (node/NAME), or as
// JSON, YAML or JSONPath over a Report.
func PrintFormat(w io.Writer, found []Node, dryRun bool, f output.Format) error {
	switch {
	case f.Structured():
		if found == nil {
			found = []Node{}
		}
		return output.Write(w, Report{APIVersion: output.APIVersion, Kind: Kind, DryRun: dryRun, Nodes: found}, f)
	case f.Name == output.Name:
		for _, n := range found {
			if len(n.Remove) > 0 {
				fmt.Fprintln(w, "node/"+n.Name)
			}
		}
		return nil
	}
	removing, kept, nodes := 0, 0, 0
	header := false
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range found {
		if !header && len(n.Remove)+len(n.Keep) > 0 {
			fmt.Fprintln(tw, "NODE\tACTION\tWHAT")
			header = true
		}
		name := n.Name
		row := func(action string, i Item) {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", name, action, i)
			name = "" // grouped under the node's first row
		}
		for _, i := range n.Remove {
			row(removeAction(dryRun, n), i)
		}
		for _, i := range n.Keep {
			row("keep", i)
		}
		if n.Error != "" {
			fmt.Fprintf(tw, "%s\terror\t%s\n", name, n.Error)
		}
		removing += len(n.Remove)
		kept += len(n.Keep)
		if len(n.Remove) > 0 {
			nodes++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, closing(dryRun, removing, nodes, kept))
	return err
}

// removeAction is the table's word for a node's items to remove.
func removeAction(dryRun bool, n Node) string {
	switch {
	case dryRun:
		return "remove"
	case n.Removed:
		return "removed"
	}
	return "not removed"
}

// closing is the table's last line: what was (or would be) removed, and how to go on.
func closing(dryRun bool, items, nodes, kept int) string {
	keptNote := ""
	if kept > 0 {
		keptNote = fmt.Sprintf("; %d kept (not Lifeboat's)", kept)
	}
	switch {
	case items == 0:
		return "Nothing of Lifeboat's on the selected nodes" + keptNote + "."
	case dryRun:
		return fmt.Sprintf("Dry run: %d items of Lifeboat's on %d nodes would be removed%s. Run again with %s to remove them.",
			items, nodes, keptNote, ApplyFlag)
	}
	return fmt.Sprintf("Removed %d items of Lifeboat's from %d nodes%s.", items, nodes, keptNote)
}
