// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Nodegroup is an EKS managed node group known to the fake: its cluster, its name, and
// whether its node auto repair is on (nodeRepairConfig.enabled).
type Nodegroup struct {
	Cluster    string
	Name       string
	AutoRepair bool
	// NoRepairConfig leaves nodeRepairConfig out of the answer, as EKS does for a node group
	// made before node auto repair existed.
	NoRepairConfig bool
}

// PutNodegroup adds a managed node group, or replaces the one of that cluster and name (its
// repair turned on or off).
func (s *Server) PutNodegroup(g Nodegroup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodegroups == nil {
		s.nodegroups = map[string]Nodegroup{}
	}
	s.nodegroups[g.Cluster+"/"+g.Name] = g
}

// NodegroupLookups counts the DescribeNodegroup calls for the cluster's node group, answered
// or not.
func (s *Server) NodegroupLookups(cluster, name string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Service == "eks" && c.Action == "DescribeNodegroup" && c.Params.Get("clusterName") == cluster && c.Params.Get("nodegroupName") == name {
			n++
		}
	}
	return n
}

// eksNodegroupPath reads the cluster and node group of GET /clusters/{name}/node-groups/{nodegroupName}.
func eksNodegroupPath(r *http.Request) (cluster, nodegroup string, ok bool) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/clusters/")
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[1] != "node-groups" {
		return "", "", false
	}
	cluster, err1 := url.PathUnescape(parts[0])
	nodegroup, err2 := url.PathUnescape(parts[2])
	return cluster, nodegroup, err1 == nil && err2 == nil
}

// serveEKS answers DescribeNodegroup (REST-JSON); any other EKS request is refused.
func (s *Server) serveEKS(w http.ResponseWriter, r *http.Request) {
	cluster, name, ok := eksNodegroupPath(r)
	action := "DescribeNodegroup"
	if !ok || r.Method != http.MethodGet {
		action = r.Method + " " + r.URL.Path
	}
	at := time.Now()
	idx, reqID := s.record(Call{Service: "eks", Action: action, At: at, Params: url.Values{"clusterName": {cluster}, "nodegroupName": {name}}})
	w.Header().Set("X-Amzn-RequestId", reqID)
	w.Header().Set("Content-Type", "application/json")
	fail := func(status int, code, msg string) {
		s.setErrorCode(idx, code)
		w.Header().Set("X-Amzn-ErrorType", code)
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"message": msg})
	}
	if action != "DescribeNodegroup" {
		fail(http.StatusNotFound, "UnknownOperationException", "fakeaws: EKS "+action+" is not served")
		return
	}
	if f, ok := s.activeFault("eks", action, at); ok {
		fail(f.Status, f.Code, "fakeaws: injected fault")
		return
	}
	s.mu.Lock()
	g, known := s.nodegroups[cluster+"/"+name]
	s.mu.Unlock()
	if !known {
		fail(http.StatusNotFound, "ResourceNotFoundException", "No node group found for name: "+name+".")
		return
	}
	ng := map[string]any{
		"nodegroupName": g.Name, "clusterName": g.Cluster, "status": "ACTIVE",
		"nodegroupArn": "arn:aws:eks:us-east-1:123456789012:nodegroup/" + g.Cluster + "/" + g.Name + "/00000000-0000-0000-0000-000000000000",
	}
	if !g.NoRepairConfig {
		ng["nodeRepairConfig"] = map[string]any{"enabled": g.AutoRepair}
	}
	json.NewEncoder(w).Encode(map[string]any{"nodegroup": ng})
}
