// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// API versions sent by aws-sdk-go-v2; they are what tells the services
// apart, since all accept form POSTs on the same path and EC2 and Auto Scaling
// both have an action called DescribeTags.
const (
	ec2Version   = "2016-11-15"
	asgVersion   = "2011-01-01"
	asgNamespace = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
	elbVersion   = "2015-12-01"
	elbNamespace = "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"
)

// queryService is one of the query-protocol services the fake serves.
type queryService struct {
	name    string // Call.Service
	actions map[string]handler
	// namespace is the XML namespace of the awsquery response envelope; ""
	// for EC2, whose response types name their own root (see ec2Meta).
	namespace string
}

// queryServices are the services by API version.
var queryServices = map[string]queryService{
	ec2Version: {"ec2", ec2Actions, ""},
	asgVersion: {"autoscaling", asgActions, asgNamespace},
	elbVersion: {"elasticloadbalancing", elbActions, elbNamespace},
}

// apiError is an AWS error response.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// handler implements one action. It returns a value to be marshalled as XML
// (see writeResult) or an error, normally an *apiError.
type handler func(s *Server, p url.Values) (any, error)

var ec2Actions = map[string]handler{
	"DescribeInstances": (*Server).ec2DescribeInstances,
	"DescribeTags":      (*Server).ec2DescribeTags,
	// Status checks and scheduled events: instancestatus.go.
	"DescribeInstanceStatus": (*Server).ec2DescribeInstanceStatus,
	// Capacity reservations (a Capacity Block's end): capacityblock.go.
	"DescribeCapacityReservations": (*Server).ec2DescribeCapacityReservations,
	// Terminations and stopped instances: terminate.go.
	"TerminateInstances": (*Server).ec2TerminateInstances,
}

var asgActions = map[string]handler{
	"DescribeAutoScalingInstances":        (*Server).asgDescribeAutoScalingInstances,
	"DescribeAutoScalingGroups":           (*Server).asgDescribeAutoScalingGroups,
	"TerminateInstanceInAutoScalingGroup": (*Server).asgTerminateInstanceInAutoScalingGroup,
	"DescribeLifecycleHooks":              (*Server).asgDescribeLifecycleHooks,
	"DescribeTags":                        (*Server).asgDescribeTags,
	"CompleteLifecycleAction":             (*Server).asgCompleteLifecycleAction,
	"RecordLifecycleActionHeartbeat":      (*Server).asgRecordLifecycleActionHeartbeat,
	"SetInstanceHealth":                   (*Server).asgSetInstanceHealth,
}

var elbActions = map[string]handler{
	"DescribeTargetGroups": (*Server).elbDescribeTargetGroups,
	"DescribeTargetHealth": (*Server).elbDescribeTargetHealth,
	"RegisterTargets":      (*Server).elbRegisterTargets,
	"DeregisterTargets":    (*Server).elbDeregisterTargets,
}

// serveQuery handles an EC2, Auto Scaling or ELBv2 query-protocol request.
func (s *Server) serveQuery(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	parseErr := r.ParseForm()
	p := r.Form
	action, version := p.Get("Action"), p.Get("Version")
	svc, known := queryServices[version]
	if !known {
		svc.name = "unknown"
	}
	service := svc.name
	idx, reqID := s.record(Call{Service: service, Action: action, Params: cloneValues(p), At: at})

	var result any
	var err error
	switch {
	case parseErr != nil:
		err = errorf("MalformedQueryString", "%v", parseErr)
	case action == "":
		err = errorf("MissingAction", "The request must contain the parameter Action")
	case !known:
		err = errorf("NoSuchVersion", "The requested version (%s) is not supported by fakeaws", version)
	default:
		// Faults come before routing: they model the service being unwell,
		// whatever the request.
		if f, ok := s.activeFault(service, action, at); ok {
			err = &apiError{Status: f.Status, Code: f.Code, Message: "fakeaws: injected fault"}
		} else if h, ok := svc.actions[action]; ok {
			result, err = h(s, p)
		} else {
			err = errorf("InvalidAction", "The action %s is not valid for this web service.", action)
		}
	}
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{Status: http.StatusInternalServerError, Code: "InternalError", Message: err.Error()}
		}
		s.setErrorCode(idx, ae.Code)
		writeError(w, service, reqID, ae)
		return
	}
	writeResult(w, svc, action, reqID, result)
}

// ec2Meta is embedded in every EC2 response type, which names its root
// element <ActionResponse> with a static XMLName tag: EC2 responses have no
// Result wrapper, so the action's fields sit directly in the root.
type ec2Meta struct {
	RequestID string `xml:"requestId"`
}

func (m *ec2Meta) setRequestID(id string) { m.RequestID = id }

// queryEnvelope wraps an awsquery (Auto Scaling, ELBv2) result, whose type
// names its own <ActionResult> element through a static XMLName tag.
type queryEnvelope struct {
	XMLName   xml.Name
	Result    any
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

func writeResult(w http.ResponseWriter, svc queryService, action, reqID string, result any) {
	body := result
	if svc.namespace == "" {
		result.(interface{ setRequestID(string) }).setRequestID(reqID)
	} else {
		body = &queryEnvelope{
			XMLName:   xml.Name{Space: svc.namespace, Local: action + "Response"},
			Result:    result,
			RequestID: reqID,
		}
	}
	writeXML(w, http.StatusOK, body)
}

type ec2ErrorResponse struct {
	XMLName   xml.Name `xml:"Response"`
	Code      string   `xml:"Errors>Error>Code"`
	Message   string   `xml:"Errors>Error>Message"`
	RequestID string   `xml:"RequestID"`
}

type queryErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

// writeError writes e in the service's error format: ec2query for EC2 and
// awsquery (also used for unrecognised requests) otherwise.
func writeError(w http.ResponseWriter, service, reqID string, e *apiError) {
	if service == "ec2" {
		writeXML(w, e.Status, &ec2ErrorResponse{Code: e.Code, Message: e.Message, RequestID: reqID})
		return
	}
	writeXML(w, e.Status, &queryErrorResponse{
		Type: faultType(e.Status), Code: e.Code, Message: e.Message, RequestID: reqID,
	})
}

// faultType is the awsquery error Type: whose fault the error is.
func faultType(status int) string {
	if status >= 500 {
		return "Receiver"
	}
	return "Sender"
}

func writeXML(w http.ResponseWriter, status int, v any) {
	out, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, "fakeaws: marshal response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	body := append([]byte(xml.Header), out...)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	// A length rather than chunks, as AWS answers: the SDK stops reading at the end of the
	// XML document, and a chunked body's unread last chunk made the next request on the
	// same connection fail now and then ("use of closed network connection").
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// listParam returns the query list prefix.1, prefix.2, ... (e.g.
// "InstanceId" for EC2, "InstanceIds.member" for Auto Scaling).
func listParam(p url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := p[prefix+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

type filter struct {
	Name   string
	Values []string
}

// parseFilters reads prefix.N.Name with values prefix.N.<valueKey>.M:
// ("Filter", "Value") for EC2, ("Filters.member", "Values.member") for Auto
// Scaling.
func parseFilters(p url.Values, prefix, valueKey string) []filter {
	var out []filter
	for i := 1; ; i++ {
		base := prefix + "." + strconv.Itoa(i)
		name, ok := p[base+".Name"]
		if !ok {
			return out
		}
		out = append(out, filter{Name: name[0], Values: listParam(p, base+"."+valueKey)})
	}
}

// anyMatch reports whether any of values matches any of patterns, with match
// deciding what matching means.
func anyMatch(values, patterns []string, match func(pattern, v string) bool) bool {
	for _, v := range values {
		for _, pat := range patterns {
			if match(pat, v) {
				return true
			}
		}
	}
	return false
}

// wildcardMatch implements EC2 filter values, where * matches any run of
// characters and ? any single one.
func wildcardMatch(pattern, v string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == v
	}
	var re strings.Builder
	re.WriteString(`(?s)^`)
	for _, r := range pattern {
		switch r {
		case '*':
			re.WriteString(".*")
		case '?':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(v)
}

func equalMatch(pattern, v string) bool { return pattern == v }

// paging describes a service's page-size and token parameters and its error
// codes.
type paging struct {
	param              string // "MaxResults", "MaxRecords" or "PageSize"
	token              string // "NextToken", or "Marker" for ELBv2 (which answers NextMarker)
	min, max, def      int    // def 0: everything in one page
	badValue, badToken string
}

var (
	ec2Paging         = paging{"MaxResults", "NextToken", 5, 1000, 0, "InvalidParameterValue", "InvalidPaginationToken"}
	asgInstancePaging = paging{"MaxRecords", "NextToken", 1, 50, 50, "ValidationError", "InvalidNextToken"}
	asgTagPaging      = paging{"MaxRecords", "NextToken", 1, 100, 50, "ValidationError", "InvalidNextToken"}
	elbGroupPaging    = paging{"PageSize", "Marker", 1, 400, 400, "ValidationError", "ValidationError"}
)

// page picks the window [start, end) of n items that the request's page size
// and token select, and the token for the page after it ("" if none).
// Tokens are opaque to clients; here they just encode the next offset.
func (pg paging) page(p url.Values, n int) (start, end int, next string, err error) {
	size := pg.def
	if raw := p.Get(pg.param); raw != "" {
		v, convErr := strconv.Atoi(raw)
		if convErr != nil || v < pg.min || v > pg.max {
			return 0, 0, "", errorf(pg.badValue, "Value (%s) for parameter %s is invalid. Expecting a value between %d and %d.", raw, pg.param, pg.min, pg.max)
		}
		size = v
	}
	if tok := p.Get(pg.token); tok != "" {
		off, ok := strings.CutPrefix(tok, "fakeaws-")
		start, err = strconv.Atoi(off)
		if !ok || err != nil || start < 0 || start > n {
			return 0, 0, "", errorf(pg.badToken, "The token '%s' is invalid.", tok)
		}
	}
	end = n
	if size > 0 && start+size < n {
		end = start + size
		next = "fakeaws-" + strconv.Itoa(end)
	}
	return start, end, next, nil
}
