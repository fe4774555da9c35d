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

// API versions sent by aws-sdk-go-v2; they are what tells the two services
// apart, since both accept form POSTs on the same path and both have an
// action called DescribeTags.
const (
	ec2Version   = "2016-11-15"
	asgVersion   = "2011-01-01"
	asgNamespace = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
)

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
}

var asgActions = map[string]handler{
	"DescribeAutoScalingInstances":   (*Server).asgDescribeAutoScalingInstances,
	"DescribeLifecycleHooks":         (*Server).asgDescribeLifecycleHooks,
	"DescribeTags":                   (*Server).asgDescribeTags,
	"CompleteLifecycleAction":        (*Server).asgCompleteLifecycleAction,
	"RecordLifecycleActionHeartbeat": (*Server).asgRecordLifecycleActionHeartbeat,
}

// serveQuery handles an EC2 or Auto Scaling query-protocol request.
func (s *Server) serveQuery(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	parseErr := r.ParseForm()
	p := r.Form
	action, version := p.Get("Action"), p.Get("Version")
	var service string
	var actions map[string]handler
	switch version {
	case ec2Version:
		service, actions = "ec2", ec2Actions
	case asgVersion:
		service, actions = "autoscaling", asgActions
	default:
		service = "unknown"
	}
	idx, reqID := s.record(Call{Service: service, Action: action, Params: cloneValues(p), At: at})

	var result any
	var err error
	switch {
	case parseErr != nil:
		err = errorf("MalformedQueryString", "%v", parseErr)
	case action == "":
		err = errorf("MissingAction", "The request must contain the parameter Action")
	case service == "unknown":
		err = errorf("NoSuchVersion", "The requested version (%s) is not supported by fakeaws", version)
	default:
		// Faults come before routing: they model the service being unwell,
		// whatever the request.
		if f, ok := s.activeFault(service, action, at); ok {
			err = &apiError{Status: f.Status, Code: f.Code, Message: "fakeaws: injected fault"}
		} else if h, ok := actions[action]; ok {
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
	writeResult(w, service, action, reqID, result)
}

// ec2Meta is embedded in every EC2 response type, which names its root
// element <ActionResponse> with a static XMLName tag: EC2 responses have no
// Result wrapper, so the action's fields sit directly in the root.
type ec2Meta struct {
	RequestID string `xml:"requestId"`
}

func (m *ec2Meta) setRequestID(id string) { m.RequestID = id }

// asgEnvelope wraps an Auto Scaling result, whose type names its own
// <ActionResult> element through a static XMLName tag.
type asgEnvelope struct {
	XMLName   xml.Name
	Result    any
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

func writeResult(w http.ResponseWriter, service, action, reqID string, result any) {
	body := result
	switch service {
	case "ec2":
		result.(interface{ setRequestID(string) }).setRequestID(reqID)
	case "autoscaling":
		body = &asgEnvelope{
			XMLName:   xml.Name{Space: asgNamespace, Local: action + "Response"},
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
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	w.Write([]byte(xml.Header))
	w.Write(out)
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

// paging describes a service's page-size parameter and its error codes.
type paging struct {
	param              string // "MaxResults" or "MaxRecords"
	min, max, def      int    // def 0: everything in one page
	badValue, badToken string
}

var (
	ec2Paging         = paging{"MaxResults", 5, 1000, 0, "InvalidParameterValue", "InvalidPaginationToken"}
	asgInstancePaging = paging{"MaxRecords", 1, 50, 50, "ValidationError", "InvalidNextToken"}
	asgTagPaging      = paging{"MaxRecords", 1, 100, 50, "ValidationError", "InvalidNextToken"}
)

// page picks the window [start, end) of n items that the request's page size
// and NextToken select, and the token for the page after it ("" if none).
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
	if tok := p.Get("NextToken"); tok != "" {
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
