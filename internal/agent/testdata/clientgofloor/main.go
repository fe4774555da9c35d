// SPDX-License-Identifier: Apache-2.0

// Command clientgofloor is the least a Kubernetes node agent built on client-go does: it
// builds a clientset from KUBECONFIG, reads the node NODE_NAME once, then waits for a signal.
// BenchmarkIdleAgent measures its resident memory beside the agent's, as the floor any
// client-go agent pays on the same machine and kernel.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "clientgofloor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, os.Getenv("NODE_NAME"), metav1.GetOptions{}); err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}
