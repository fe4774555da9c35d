// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/permissions"
	"lifeboat.dev/lifeboat/internal/source/imds"
)

// Status is a check's verdict. Warnings do not fail a preflight run.
type Status string

const (
	StatusOK   Status = "ok"
	StatusWarn Status = "warn"
	StatusFail Status = "fail"
)

// Row is one check's result; Fix says what to do when Status is not ok.
type Row struct {
	Check  string
	Status Status
	Detail string
	Fix    string
}

// Failed reports whether any row failed.
func Failed(rows []Row) bool {
	for _, r := range rows {
		if r.Status == StatusFail {
			return true
		}
	}
	return false
}

// CheckAPIServer asks the API server for its version: the cheapest proof that the address
// and credentials work.
func CheckAPIServer(ctx context.Context, client kubernetes.Interface) Row {
	row := Row{Check: "kubernetes api"}
	sv, err := serverVersion(ctx, client)
	if err != nil {
		row.Status, row.Detail = StatusFail, err.Error()
		row.Fix = "check KUBECONFIG (outside a pod) or the pod's service account and KUBERNETES_SERVICE_HOST / _PORT, and that the API server is reachable"
		return row
	}
	row.Status, row.Detail = StatusOK, "API server "+sv.GitVersion
	return row
}

// serverVersion is Discovery().ServerVersion bounded by ctx, which that method does not take.
func serverVersion(ctx context.Context, client kubernetes.Interface) (*version.Info, error) {
	rc := client.Discovery().RESTClient()
	if rc == nil {
		return client.Discovery().ServerVersion()
	}
	body, err := rc.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("API server /version: unexpected answer: %w", err)
	}
	return &info, nil
}

// CheckPermissions is one row per permission, from SelfSubjectAccessReviews. A missing
// permission fails, but one for an extra left on by default only warns (Permission.Soft):
// Lifeboat starts without the extra.
func CheckPermissions(ctx context.Context, client kubernetes.Interface, perms []permissions.Permission, cfg *config.Config) []Row {
	answers, err := permissions.Review(ctx, client, perms)
	if err != nil {
		return []Row{{Check: "rbac", Status: StatusFail, Detail: err.Error(),
			Fix: "the API server must answer SelfSubjectAccessReviews (allowed to every authenticated user by the default system:basic-user role)"}}
	}
	rows := make([]Row, 0, len(answers))
	for _, a := range answers {
		row := Row{Check: "rbac: " + a.Permission.String(), Status: StatusOK, Detail: a.Why}
		if !a.Allowed {
			row.Status = StatusFail
			if a.Reason != "" {
				row.Detail += " (" + a.Reason + ")"
			}
			row.Fix = grantFix(a.Permission)
			if a.Permission.Soft(cfg) {
				row.Status = StatusWarn
				row.Detail += "; " + a.Permission.Extra + " is on by default: Lifeboat starts without it"
				row.Fix += ", or set " + a.Permission.Extra + "=false"
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// grantFix names the rule to add, and where.
func grantFix(p permissions.Permission) string {
	where := "Lifeboat's ClusterRole"
	if p.Namespace != "" {
		where = fmt.Sprintf("Lifeboat's Role in namespace %s", p.Namespace)
	}
	fix := fmt.Sprintf("add verb %q on %q (apiGroup %q", p.Verb, p.ResourceName(), p.Group)
	if p.Name != "" {
		fix += fmt.Sprintf(", resourceName %q", p.Name)
	}
	return fix + ") to " + where + ", bound to its service account"
}

// CheckIMDS reads the instance id through the metadata client (an IMDSv2 session token
// first, unless ALLOW_IMDSV1 permits going without). It returns the id, "" on failure.
func CheckIMDS(ctx context.Context, g imds.Getter, url string) (Row, string) {
	row := Row{Check: "instance metadata"}
	id, err := imds.InstanceID(ctx, g)
	if err != nil {
		row.Status, row.Detail = StatusFail, err.Error()
		row.Fix = fmt.Sprintf("INSTANCE_METADATA_URL=%s must answer: from a pod without host networking, IMDSv2 needs the instance's "+
			"metadata hop limit at 2 or more (aws ec2 modify-instance-metadata-options --http-put-response-hop-limit 2); "+
			"check that metadata access is enabled and no network policy blocks 169.254.169.254", url)
		return row, ""
	}
	row.Status, row.Detail = StatusOK, "instance "+id
	return row, id
}

// CheckNode checks that NODE_NAME's Node exists and, when it has a providerID and the
// instance id is known, that both name the same instance: the agent refuses to run otherwise.
func CheckNode(ctx context.Context, client kubernetes.Interface, nodeName, instanceID string) Row {
	row := Row{Check: "node NODE_NAME=" + nodeName}
	const wiring = "set NODE_NAME from the Downward API (fieldRef spec.nodeName) so it names the node the pod runs on"
	n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		row.Status, row.Detail, row.Fix = StatusFail, "no such Node", wiring
		return row
	case err != nil:
		row.Status, row.Detail = StatusFail, err.Error()
		row.Fix = "Lifeboat must be able to read its Node: see the rbac rows"
		return row
	}
	nodeInstance := ownership.InstanceIDFromProviderID(n.Spec.ProviderID)
	switch {
	case nodeInstance == "":
		row.Status = StatusWarn
		row.Detail = fmt.Sprintf("providerID %q names no EC2 instance, so it cannot be matched with instance metadata", n.Spec.ProviderID)
		row.Fix = "nodes on EC2 normally have providerID aws:///<zone>/<instance-id> (set by the AWS cloud provider); check the kubelet's --provider-id"
	case instanceID == "":
		row.Status = StatusWarn
		row.Detail = fmt.Sprintf("providerID %s; not compared: instance metadata did not answer", n.Spec.ProviderID)
		row.Fix = "fix instance metadata first (see its row)"
	case nodeInstance != instanceID:
		row.Status = StatusFail
		row.Detail = fmt.Sprintf("providerID %s names %s, but instance metadata says %s: the agent would refuse to run", n.Spec.ProviderID, nodeInstance, instanceID)
		row.Fix = wiring
	default:
		row.Status, row.Detail = StatusOK, "providerID "+n.Spec.ProviderID+" matches instance metadata"
	}
	return row
}

// CheckIdentity reviews the settings that decide which instances are this cluster's
// (controller mode; the agent only ever acts on NODE_NAME).
func CheckIdentity(cfg *config.Config) []Row {
	var rows []Row
	if name := strings.TrimSpace(cfg.ClusterName); name == "" {
		rows = append(rows, Row{Check: "identity: CLUSTER_NAME", Status: StatusWarn,
			Detail: "unset: instances are not checked for this cluster's tag, so a queue shared with another cluster can make Lifeboat act on a node of the same name",
			Fix:    "set CLUSTER_NAME to this cluster's name; its instances must carry the tag " + ownership.ClusterTagPrefix + "<name> = owned or shared"})
	} else {
		rows = append(rows, Row{Check: "identity: CLUSTER_NAME", Status: StatusOK,
			Detail: fmt.Sprintf("instances must carry the tag %s%s = owned or shared", ownership.ClusterTagPrefix, name)})
	}
	switch tag := strings.TrimSpace(cfg.ManagedTag); {
	case !cfg.CheckTagBeforeDraining:
		rows = append(rows, Row{Check: "identity: CHECK_TAG_BEFORE_DRAINING", Status: StatusWarn,
			Detail: "false: any instance with a matching node here is acted on, whatever its tags",
			Fix:    "set CHECK_TAG_BEFORE_DRAINING=true and tag the instances Lifeboat manages with MANAGED_TAG"})
	case tag == "":
		rows = append(rows, Row{Check: "identity: CHECK_TAG_BEFORE_DRAINING", Status: StatusFail,
			Detail: "true, but MANAGED_TAG is empty: no instance can pass",
			Fix:    "set MANAGED_TAG to the tag key of the instances Lifeboat manages, or CHECK_TAG_BEFORE_DRAINING=false"})
	default:
		rows = append(rows, Row{Check: "identity: CHECK_TAG_BEFORE_DRAINING", Status: StatusOK,
			Detail: fmt.Sprintf("instances must carry the tag %s (any value)", tag)})
	}
	if cfg.UseProviderID {
		rows = append(rows, Row{Check: "identity: USE_PROVIDER_ID", Status: StatusOK, Detail: "nodes are found by providerID only"})
	} else {
		rows = append(rows, Row{Check: "identity: USE_PROVIDER_ID", Status: StatusOK,
			Detail: "false: nodes are found by providerID, and a node without one by the instance's private DNS name (one more EC2 lookup)"})
	}
	return rows
}

// CheckNodeRestriction asks, by dry runs with the agent's own identity, whether its token is
// held to its own node: it cordons another node and deletes a pod there, each as a dry run
// (which admission policies see, and which changes nothing). Both refused: ok. Both allowed:
// a warning, since a stolen agent token could then cordon the cluster (the chart's node
// restriction needs Kubernetes 1.30 or later). The other node is found from a pod on it; with
// no such pod (a one-node cluster) it cannot tell, and says so.
func CheckNodeRestriction(ctx context.Context, client kubernetes.Interface, nodeName string) Row {
	row := Row{Check: "agent node restriction"}
	const fix = "install the chart's agent.nodeRestriction (a ValidatingAdmissionPolicy; Kubernetes 1.30 or later), or accept that any agent's token may write every Node"
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermNotEqualSelector("spec.nodeName", nodeName), fields.OneTermNotEqualSelector("spec.nodeName", "")).String(),
		Limit:         50,
	})
	if err != nil {
		row.Status, row.Detail, row.Fix = StatusWarn, "cannot look for a pod on another node: "+err.Error(), "see the rbac rows"
		return row
	}
	i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp == nil })
	if i < 0 {
		row.Status, row.Detail = StatusWarn, "not checked: no pod runs on another node"
		row.Fix = "run preflight again once other nodes run pods"
		return row
	}
	other := pods.Items[i]
	// Dry runs: admission decides them as it would a write, and nothing is stored, so no
	// resourceVersion precondition is needed.
	dryRun := []string{metav1.DryRunAll}
	_, nodeErr := client.CoreV1().Nodes().Patch(ctx, other.Spec.NodeName, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`),
		metav1.PatchOptions{DryRun: dryRun})
	podErr := client.CoreV1().Pods(other.Namespace).Delete(ctx, other.Name, metav1.DeleteOptions{DryRun: dryRun})
	switch {
	case apierrors.IsForbidden(nodeErr) && apierrors.IsForbidden(podErr):
		row.Status = StatusOK
		row.Detail = fmt.Sprintf("cordoning node %s and deleting pod %s/%s are refused (dry runs)", other.Spec.NodeName, other.Namespace, other.Name)
	case nodeErr == nil || podErr == nil:
		row.Status = StatusWarn
		row.Detail = fmt.Sprintf("this token may write node %s or delete pod %s/%s on it (dry runs allowed: node %v, pod %v)",
			other.Spec.NodeName, other.Namespace, other.Name, errOrOK(nodeErr), errOrOK(podErr))
		row.Fix = fix
	default:
		row.Status = StatusWarn
		row.Detail = fmt.Sprintf("dry runs against node %s failed otherwise: node %v, pod %v", other.Spec.NodeName, errOrOK(nodeErr), errOrOK(podErr))
		row.Fix = fix
	}
	return row
}

func errOrOK(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}
