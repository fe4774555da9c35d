// Command lifeboat-sandbox starts Lifeboat's local sandbox: a real Kubernetes control plane
// with kwok nodes backed by fake EC2 instances, an instance-metadata mock per node, an SQS
// queue, and the fake EC2 / Auto Scaling endpoint in front of it. It prints how to reach each
// part. With --hold it keeps running until interrupted, so you can point kubectl or Lifeboat
// at it; without, it checks that everything answers and stops.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/sandbox"
	"lifeboat.dev/lifeboat/internal/sandbox/fakeaws"
)

func main() {
	hold := flag.Bool("hold", false, "keep the sandbox running until interrupted")
	nodes := flag.Int("nodes", 3, "number of kwok nodes")
	full := flag.Bool("full", false, "also run kube-controller-manager and kube-scheduler")
	flag.Parse()
	if err := run(*hold, *nodes, *full); err != nil {
		fmt.Fprintln(os.Stderr, "lifeboat-sandbox:", err)
		os.Exit(1)
	}
}

func run(hold bool, nodeCount int, full bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tools, err := sandbox.FindTools()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "lifeboat-sandbox-")
	if err != nil {
		return err
	}
	if !hold {
		defer os.RemoveAll(dir)
	}
	start := time.Now()
	cluster, err := sandbox.StartCluster(ctx, tools, sandbox.ClusterOptions{Dir: dir, AuditLog: true, ControllerManager: full, Scheduler: full})
	if err != nil {
		return err
	}
	defer cluster.Stop()

	specs := make([]sandbox.NodeSpec, nodeCount)
	for i := range specs {
		specs[i] = sandbox.NodeSpec{Index: i + 1, Zone: []string{"us-east-1a", "us-east-1b", "us-east-1c"}[i%3]}
	}
	created, err := cluster.AddNodes(ctx, specs...)
	if err != nil {
		return err
	}

	queue, err := sandbox.StartSQS(ctx, tools, dir, sandbox.SQSOptions{Queues: []string{"lifeboat"}})
	if err != nil {
		return err
	}
	defer queue.Stop()
	aws := fakeaws.New(fakeaws.Options{SQSBackend: queue.Endpoint})
	if err := aws.Start(); err != nil {
		return err
	}
	defer aws.Close()

	imdsURLs := make([]string, len(created))
	for i, n := range created {
		s := specs[i]
		m, err := sandbox.StartIMDS(ctx, tools, dir, sandbox.IMDSOptions{InstanceID: instanceID(n.Spec.ProviderID), Zone: s.Zone, Hostname: n.Name})
		if err != nil {
			return err
		}
		defer m.Stop()
		imdsURLs[i] = m.URL
		aws.AddInstance(fakeaws.Instance{
			ID: instanceID(n.Spec.ProviderID), PrivateDNSName: n.Name, AvailabilityZone: s.Zone, AutoScalingGroup: "sandbox-workers",
			Tags: map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/sandbox": "owned"},
		})
	}
	// An instance of another cluster, as an account-wide EventBridge rule would report it.
	aws.AddInstance(fakeaws.Instance{ID: "i-0f0f0f0f0f0f0f0f0", PrivateDNSName: "ip-10-9-0-1.ec2.internal", AvailabilityZone: "us-east-1a",
		Tags: map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/other": "owned"}})

	list, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("Sandbox up in %.1fs (files in %s)\n\n", time.Since(start).Seconds(), dir)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREADY\tPROVIDER ID\tIMDS")
	for i, n := range list.Items {
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", n.Name, sandbox.IsNodeReady(&n), n.Spec.ProviderID, imdsURLs[i])
	}
	tw.Flush()
	fmt.Printf("\nKUBECONFIG=%s\nAWS_ENDPOINT=%s  (EC2, Auto Scaling, and SQS routed to goaws)\nQUEUE_URL=%s\n",
		cluster.KubeconfigPath, aws.URL(), queue.QueueURLs["lifeboat"])

	if !hold {
		fmt.Println("\nThe agent and controller are not built yet; stopping the sandbox. Run with --hold to keep it up.")
		return nil
	}
	fmt.Println("\nRunning until interrupted (Ctrl-C).")
	<-ctx.Done()
	return nil
}

// instanceID is the last element of aws:///<zone>/<instance-id>.
func instanceID(providerID string) string {
	for i := len(providerID) - 1; i >= 0; i-- {
		if providerID[i] == '/' {
			return providerID[i+1:]
		}
	}
	return providerID
}
