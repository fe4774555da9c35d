// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/record"
)

// memory writes what node repair remembers of a node beyond its episodes
// (record.AnnotationRepair): a handful of writes per repair, none for a healthy node.
type memory struct {
	writer *nodes.Writer // nil: nothing is remembered on the Nodes (tests)
	log    *slog.Logger
}

// edit changes the node's repair memory, from the informer's copy (a first attempt's hint);
// a failed write is logged and returned: what it remembers then lives in the process only.
func (m memory) edit(ctx context.Context, node *corev1.Node, what string, change func(*record.Repair)) error {
	if m.writer == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	_, err := m.writer.Apply(ctx, node.Name, node, what, record.RepairEdit(change))
	if err != nil {
		m.log.Warn("cannot write the node's repair memory", "node", node.Name, "what", what, "err", err)
	}
	return err
}

// unreadableMemories says once per content that a node's repair memory does not read. A
// Node's annotations are input: any holder of the node's credential writes them.
type unreadableMemories struct {
	said   map[string]string // node name -> the content last said unreadable
	report Reporter
}

func (u unreadableMemories) tell(node *corev1.Node) {
	raw := node.Annotations[record.AnnotationRepair]
	_, err := record.ReadRepair(node)
	switch {
	case err == nil:
		delete(u.said, node.Name)
	case u.said[node.Name] != raw:
		u.said[node.Name] = raw
		u.report.Unreadable(node, err)
	}
}
