// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func elbClient(s *Server) *elb.Client {
	return elb.NewFromConfig(awsConfig(), func(o *elb.Options) { o.BaseEndpoint = aws.String(s.URL()) })
}

func elbTarget(id string, port int32) elbtypes.TargetDescription {
	t := elbtypes.TargetDescription{Id: aws.String(id)}
	if port != 0 {
		t.Port = aws.Int32(port)
	}
	return t
}

// describeHealth describes a group's targets as id:port=state/reason.
func describeHealth(t *testing.T, s *Server, arn string, targets ...elbtypes.TargetDescription) []string {
	t.Helper()
	out, err := elbClient(s).DescribeTargetHealth(context.Background(), &elb.DescribeTargetHealthInput{
		TargetGroupArn: aws.String(arn), Targets: targets,
	})
	if err != nil {
		t.Fatalf("DescribeTargetHealth: %v", err)
	}
	var got []string
	for _, d := range out.TargetHealthDescriptions {
		port := aws.ToInt32(d.Target.Port)
		if hc := aws.ToString(d.HealthCheckPort); hc != fmt.Sprint(port) {
			t.Errorf("target %s: health check port %q, want the traffic port %d", aws.ToString(d.Target.Id), hc, port)
		}
		s := fmt.Sprintf("%s:%d=%s", aws.ToString(d.Target.Id), port, d.TargetHealth.State)
		if d.TargetHealth.Reason != "" {
			s += "/" + string(d.TargetHealth.Reason)
		}
		got = append(got, s)
	}
	return got
}

func TestELBv2DescribeTargetGroups(t *testing.T) {
	s := startFake(t, Options{})
	web := s.AddTargetGroup(TargetGroup{Name: "web"})
	pods := s.AddTargetGroup(TargetGroup{Name: "pods", TargetType: "ip", Port: 8080})
	spare := s.AddTargetGroup(TargetGroup{Name: "spare", Unattached: true})
	if !regexp.MustCompile(`^arn:aws:elasticloadbalancing:us-east-1:000000000000:targetgroup/web/[0-9a-f]{16}$`).MatchString(web) {
		t.Errorf("ARN = %q", web)
	}
	if again := s.AddTargetGroup(TargetGroup{Name: "web"}); again != web {
		t.Errorf("re-adding web gave ARN %q, want %q", again, web)
	}

	tests := []struct {
		name     string
		in       elb.DescribeTargetGroupsInput
		want     []string // name/type/port/load balancers
		wantCode string
	}{
		{name: "all", want: []string{
			"web/instance/80/[" + LoadBalancerARN + "]", "pods/ip/8080/[" + LoadBalancerARN + "]", "spare/instance/80/[]",
		}},
		{name: "by arn", in: elb.DescribeTargetGroupsInput{TargetGroupArns: []string{spare, pods}}, want: []string{
			"pods/ip/8080/[" + LoadBalancerARN + "]", "spare/instance/80/[]",
		}},
		{name: "by name", in: elb.DescribeTargetGroupsInput{Names: []string{"web"}}, want: []string{"web/instance/80/[" + LoadBalancerARN + "]"}},
		{name: "by load balancer", in: elb.DescribeTargetGroupsInput{LoadBalancerArn: aws.String(LoadBalancerARN)}, want: []string{
			"web/instance/80/[" + LoadBalancerARN + "]", "pods/ip/8080/[" + LoadBalancerARN + "]",
		}},
		{name: "unknown name", in: elb.DescribeTargetGroupsInput{Names: []string{"web", "nope"}}, wantCode: "TargetGroupNotFound"},
		{name: "unknown arn", in: elb.DescribeTargetGroupsInput{TargetGroupArns: []string{web + "0"}}, wantCode: "TargetGroupNotFound"},
		{name: "malformed arn", in: elb.DescribeTargetGroupsInput{TargetGroupArns: []string{"web"}}, wantCode: "ValidationError"},
		{name: "names and arns", in: elb.DescribeTargetGroupsInput{Names: []string{"web"}, TargetGroupArns: []string{web}}, wantCode: "ValidationError"},
		{name: "unknown load balancer", in: elb.DescribeTargetGroupsInput{LoadBalancerArn: aws.String(LoadBalancerARN + "0")}, wantCode: "LoadBalancerNotFound"},
		{name: "page size too large", in: elb.DescribeTargetGroupsInput{PageSize: aws.Int32(401)}, wantCode: "ValidationError"},
		{name: "bad marker", in: elb.DescribeTargetGroupsInput{Marker: aws.String("garbage")}, wantCode: "ValidationError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := elbClient(s).DescribeTargetGroups(context.Background(), &tt.in)
			if code := errCode(t, err); code != tt.wantCode {
				t.Fatalf("error code = %q (%v), want %q", code, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			var got []string
			for _, g := range out.TargetGroups {
				got = append(got, fmt.Sprintf("%s/%s/%d/%v", aws.ToString(g.TargetGroupName), g.TargetType, aws.ToInt32(g.Port), g.LoadBalancerArns))
				if g.Protocol != elbtypes.ProtocolEnumHttp || aws.ToString(g.VpcId) != "vpc-fake" || aws.ToString(g.TargetGroupArn) == "" {
					t.Errorf("incomplete group: %+v", g)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("groups = %v, want %v", got, tt.want)
			}
			if out.NextMarker != nil {
				t.Errorf("NextMarker = %q, want none", aws.ToString(out.NextMarker))
			}
		})
	}

	// The SDK decodes an unknown group as its typed error.
	_, err := elbClient(s).DescribeTargetGroups(context.Background(), &elb.DescribeTargetGroupsInput{Names: []string{"nope"}})
	var nf *elbtypes.TargetGroupNotFoundException
	if !errors.As(err, &nf) || nf.ErrorMessage() != "One or more target groups not found" {
		t.Errorf("unknown name: %v, want TargetGroupNotFoundException", err)
	}
}

func TestELBv2DescribeTargetGroupsPagination(t *testing.T) {
	s := startFake(t, Options{})
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("tg-%d", i)
		want = append(want, name)
		s.AddTargetGroup(TargetGroup{Name: name})
	}
	p := elb.NewDescribeTargetGroupsPaginator(elbClient(s), &elb.DescribeTargetGroupsInput{PageSize: aws.Int32(3)})
	var got []string
	var pageSizes []int
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range out.TargetGroups {
			got = append(got, aws.ToString(g.TargetGroupName))
		}
		pageSizes = append(pageSizes, len(out.TargetGroups))
	}
	if !slices.Equal(got, want) || !slices.Equal(pageSizes, []int{3, 3, 1}) {
		t.Errorf("paged %v in pages %v, want %v in [3 3 1]", got, pageSizes, want)
	}
	calls := s.Calls()
	if len(calls) != 3 || calls[0].Params.Get("Marker") != "" || calls[1].Params.Get("Marker") == "" {
		t.Errorf("calls = %+v, want 3, the later ones with a Marker", calls)
	}
}

func TestELBv2TargetLifecycle(t *testing.T) {
	const delay = 300 * time.Second
	fc := clocktesting.NewFakePassiveClock(time.Now())
	s := startFake(t, Options{Clock: fc})
	arn := s.AddTargetGroup(TargetGroup{Name: "web", Port: 30080, DeregistrationDelay: delay})
	client := elbClient(s)
	ctx := context.Background()
	register := func(targets ...elbtypes.TargetDescription) {
		t.Helper()
		if _, err := client.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: targets}); err != nil {
			t.Fatalf("RegisterTargets: %v", err)
		}
	}
	deregister := func(targets ...elbtypes.TargetDescription) {
		t.Helper()
		if _, err := client.DeregisterTargets(ctx, &elb.DeregisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: targets}); err != nil {
			t.Fatalf("DeregisterTargets: %v", err)
		}
	}

	register(elbTarget("i-0001", 0), elbTarget("i-0002", 8080))
	if err := s.RegisterTarget(arn, "i-0003", 0); err != nil {
		t.Fatal(err)
	}
	if got, want := describeHealth(t, s, arn), []string{"i-0001:30080=healthy", "i-0002:8080=healthy", "i-0003:30080=healthy"}; !slices.Equal(got, want) {
		t.Fatalf("after registration: %v, want %v", got, want)
	}

	// Without its port override i-0002 is another target, which is not
	// registered: the call succeeds and changes nothing. Unknown targets too.
	deregister(elbTarget("i-0002", 0), elbTarget("i-0404", 0))
	if state, registered := s.TargetState(arn, "i-0002"); state != "healthy" || !registered {
		t.Errorf("i-0002 deregistered without its port: %s, %v; want healthy, registered", state, registered)
	}

	deregister(elbTarget("i-0001", 0), elbTarget("i-0002", 8080))
	out, err := client.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{
		TargetGroupArn: aws.String(arn), Targets: []elbtypes.TargetDescription{elbTarget("i-0001", 0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if th := out.TargetHealthDescriptions[0].TargetHealth; th.State != elbtypes.TargetHealthStateEnumDraining ||
		th.Reason != elbtypes.TargetHealthReasonEnumDeregistrationInProgress || aws.ToString(th.Description) != "Target deregistration is in progress" {
		t.Errorf("right after deregistration: %s/%s/%q, want draining", th.State, th.Reason, aws.ToString(th.Description))
	}
	if state, registered := s.TargetState(arn, "i-0001"); state != "draining" || registered {
		t.Errorf("TargetState while draining = %s, %v; want draining, false", state, registered)
	}

	// Registering a draining target again puts it back in service.
	register(elbTarget("i-0002", 8080))
	if state, registered := s.TargetState(arn, "i-0002"); state != "healthy" || !registered {
		t.Errorf("re-registered draining target: %s, %v; want healthy, true", state, registered)
	}

	// Draining lasts the group's delay, to the instant.
	fc.SetTime(fc.Now().Add(delay - time.Nanosecond))
	if state, _ := s.TargetState(arn, "i-0001"); state != "draining" {
		t.Errorf("TargetState just before the delay is over = %s, want draining", state)
	}
	fc.SetTime(fc.Now().Add(time.Nanosecond))
	// The waiter code under test would use must see the end of draining.
	waiter := elb.NewTargetDeregisteredWaiter(client, func(o *elb.TargetDeregisteredWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 50*time.Millisecond
	})
	if err := waiter.Wait(ctx, &elb.DescribeTargetHealthInput{
		TargetGroupArn: aws.String(arn), Targets: []elbtypes.TargetDescription{elbTarget("i-0001", 0)},
	}, 5*time.Second); err != nil {
		t.Fatalf("TargetDeregistered waiter once the delay is over: %v", err)
	}
	if got, want := describeHealth(t, s, arn), []string{"i-0002:8080=healthy", "i-0003:30080=healthy"}; !slices.Equal(got, want) {
		t.Errorf("after draining: %v, want %v", got, want)
	}
	if state, registered := s.TargetState(arn, "i-0001"); state != "unused" || registered {
		t.Errorf("TargetState after draining = %s, %v; want unused, false", state, registered)
	}

	// A helper deregistration drains too, then the target is gone.
	if err := s.DeregisterTarget(arn, "i-0003"); err != nil {
		t.Fatal(err)
	}
	if got := describeHealth(t, s, arn); !slices.Contains(got, "i-0003:30080=draining/Target.DeregistrationInProgress") {
		t.Errorf("after DeregisterTarget: %v, want i-0003 draining", got)
	}
	fc.SetTime(fc.Now().Add(delay))
	if got := describeHealth(t, s, arn); slices.ContainsFunc(got, func(d string) bool { return strings.HasPrefix(d, "i-0003:") }) {
		t.Errorf("after its deregistration delay: %v, want i-0003 gone", got)
	}
}

func TestELBv2DeregistrationDelays(t *testing.T) {
	s := startFake(t, Options{})
	byDefault := s.AddTargetGroup(TargetGroup{Name: "default"})
	immediate := s.AddTargetGroup(TargetGroup{Name: "immediate", DeregistrationDelay: -1})
	for _, arn := range []string{byDefault, immediate} {
		if err := s.RegisterTarget(arn, "i-1", 0); err != nil {
			t.Fatal(err)
		}
		if err := s.DeregisterTarget(arn, "i-1"); err != nil {
			t.Fatal(err)
		}
	}
	if got := describeHealth(t, s, byDefault); !slices.Equal(got, []string{"i-1:80=draining/Target.DeregistrationInProgress"}) {
		t.Errorf("default delay: %v, want i-1 draining", got)
	}
	if got := describeHealth(t, s, immediate); len(got) != 0 {
		t.Errorf("no delay: %v, want no targets", got)
	}
}

func TestELBv2TargetStates(t *testing.T) {
	s := startFake(t, Options{})
	pods := s.AddTargetGroup(TargetGroup{Name: "pods", TargetType: "ip", Port: 8080})
	spare := s.AddTargetGroup(TargetGroup{Name: "spare", Unattached: true})
	web := s.AddTargetGroup(TargetGroup{Name: "web"})
	client := elbClient(s)
	ctx := context.Background()
	for _, r := range []struct {
		arn, id string
		port    int
	}{{pods, "10.0.1.5", 0}, {pods, "10.0.1.6", 9090}, {spare, "i-1", 0}, {web, "i-1", 0}} {
		if err := s.RegisterTarget(r.arn, r.id, r.port); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name    string
		arn     string
		targets []elbtypes.TargetDescription
		want    []string
	}{
		{"ip targets", pods, nil, []string{"10.0.1.5:8080=healthy", "10.0.1.6:9090=healthy"}},
		{"named ip target on any port", pods, []elbtypes.TargetDescription{elbTarget("10.0.1.6", 0)}, []string{"10.0.1.6:9090=healthy"}},
		{"unattached group", spare, nil, []string{"i-1:80=unused/Target.NotInUse"}},
		{"named unregistered targets", web, []elbtypes.TargetDescription{elbTarget("i-2", 0), elbTarget("i-1", 0), elbTarget("i-1", 81)},
			[]string{"i-2:80=unused/Target.NotRegistered", "i-1:80=healthy", "i-1:81=unused/Target.NotRegistered"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describeHealth(t, s, tt.arn, tt.targets...); !slices.Equal(got, tt.want) {
				t.Errorf("targets = %v, want %v", got, tt.want)
			}
		})
	}

	out, err := client.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{
		TargetGroupArn: aws.String(web), Targets: []elbtypes.TargetDescription{elbTarget("i-2", 0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := aws.ToString(out.TargetHealthDescriptions[0].TargetHealth.Description); d != "Target is not registered to the target group" {
		t.Errorf("unregistered target description = %q", d)
	}
	if state, registered := s.TargetState(spare, "i-1"); state != "unused" || !registered {
		t.Errorf("TargetState in unattached group = %s, %v; want unused, true", state, registered)
	}
	if state, registered := s.TargetState(web+"0", "i-1"); state != "" || registered {
		t.Errorf("TargetState in unknown group = %q, %v; want empty, false", state, registered)
	}

	// A target that does not fit the group's type fails the whole call.
	for _, tc := range []struct {
		arn, id string
	}{{pods, "i-1"}, {web, "10.0.0.1"}, {web, "ip-10-0-0-1.ec2.internal"}} {
		_, err := client.RegisterTargets(ctx, &elb.RegisterTargetsInput{
			TargetGroupArn: aws.String(tc.arn), Targets: []elbtypes.TargetDescription{elbTarget("10.0.9.9", 0), elbTarget(tc.id, 0)},
		})
		if code := errCode(t, err); code != "ValidationError" {
			t.Errorf("registering %s: code %q (%v), want ValidationError", tc.id, code, err)
		}
		if err := s.RegisterTarget(tc.arn, tc.id, 0); err == nil {
			t.Errorf("RegisterTarget(%s) succeeded", tc.id)
		}
	}
	if got := describeHealth(t, s, pods); len(got) != 2 {
		t.Errorf("a failed RegisterTargets registered some targets: %v", got)
	}
}

func TestELBv2Errors(t *testing.T) {
	s := startFake(t, Options{})
	arn := s.AddTargetGroup(TargetGroup{Name: "web"})
	unknown := strings.Replace(arn, "/web/", "/gone/", 1)
	client := elbClient(s)
	ctx := context.Background()
	targets := []elbtypes.TargetDescription{elbTarget("i-1", 0)}

	calls := map[string]func() error{
		"DescribeTargetHealth": func() error {
			_, err := client.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: aws.String(unknown)})
			return err
		},
		"RegisterTargets": func() error {
			_, err := client.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(unknown), Targets: targets})
			return err
		},
		"DeregisterTargets": func() error {
			_, err := client.DeregisterTargets(ctx, &elb.DeregisterTargetsInput{TargetGroupArn: aws.String(unknown), Targets: targets})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		var nf *elbtypes.TargetGroupNotFoundException
		if !errors.As(err, &nf) || !strings.Contains(nf.ErrorMessage(), unknown) {
			t.Errorf("%s on an unknown group: %v, want TargetGroupNotFoundException naming it", name, err)
		}
		var re *awshttp.ResponseError
		if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusBadRequest {
			t.Errorf("%s status: %v, want 400", name, err)
		}
	}
	if err := s.RegisterTarget(unknown, "i-1", 0); err == nil {
		t.Error("RegisterTarget on an unknown group succeeded")
	}
	if err := s.DeregisterTarget(unknown, "i-1"); err == nil {
		t.Error("DeregisterTarget on an unknown group succeeded")
	}

	// Requests the SDK refuses to send, posted raw.
	raw := []struct {
		name string
		form url.Values
		code string
	}{
		{"no target group", url.Values{"Action": {"DescribeTargetHealth"}}, "ValidationError"},
		{"no targets", url.Values{"Action": {"RegisterTargets"}, "TargetGroupArn": {arn}}, "ValidationError"},
		{"bad port", url.Values{"Action": {"DeregisterTargets"}, "TargetGroupArn": {arn}, "Targets.member.1.Id": {"i-1"}, "Targets.member.1.Port": {"0"}}, "ValidationError"},
	}
	for _, tt := range raw {
		tt.form.Set("Version", elbVersion)
		resp, err := http.PostForm(s.URL(), tt.form)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			XMLName xml.Name
			Code    string `xml:"Error>Code"`
			Type    string `xml:"Error>Type"`
		}
		err = xml.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusBadRequest || e.XMLName.Local != "ErrorResponse" || e.Code != tt.code || e.Type != "Sender" {
			t.Errorf("%s: %d <%s> %s/%s (%v), want 400 <ErrorResponse> %s/Sender", tt.name, resp.StatusCode, e.XMLName.Local, e.Code, e.Type, err, tt.code)
		}
	}
}

// TestELBv2Envelope checks the awsquery response shape with the SDK out of the way.
func TestELBv2Envelope(t *testing.T) {
	s := startFake(t, Options{})
	arn := s.AddTargetGroup(TargetGroup{Name: "web"})
	resp, err := http.PostForm(s.URL(), url.Values{
		"Action": {"RegisterTargets"}, "Version": {elbVersion}, "TargetGroupArn": {arn}, "Targets.member.1.Id": {"i-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		XMLName   xml.Name
		Result    *struct{} `xml:"RegisterTargetsResult"`
		RequestID string    `xml:"ResponseMetadata>RequestId"`
	}
	if err := xml.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	want := xml.Name{Space: elbNamespace, Local: "RegisterTargetsResponse"}
	if resp.StatusCode != http.StatusOK || body.XMLName != want || body.Result == nil || body.RequestID == "" {
		t.Errorf("got %d %+v, want 200 <%s xmlns=%s> with a result and a request ID", resp.StatusCode, body, want.Local, want.Space)
	}
}

func TestELBv2FaultsAndRecording(t *testing.T) {
	s := startFake(t, Options{})
	arn := s.AddTargetGroup(TargetGroup{Name: "web"})
	client := elbClient(s)
	ctx := context.Background()
	describe := func() error {
		_, err := client.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: aws.String(arn)})
		return err
	}

	s.SetFault(Fault{Service: "elasticloadbalancing", Action: "DescribeTargetHealth", Status: 400, Code: "Throttling"})
	if code := errCode(t, describe()); code != "Throttling" {
		t.Errorf("with a fault: code %q, want Throttling", code)
	}
	if _, err := client.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{}); err != nil {
		t.Errorf("fault on another action: %v", err)
	}
	s.ClearFaults()

	s.Deny("elasticloadbalancing", "")
	err := describe()
	var re *awshttp.ResponseError
	if code := errCode(t, err); code != "AccessDenied" || !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusForbidden {
		t.Errorf("denied: %v, want 403 AccessDenied", err)
	}
	s.ClearFaults()
	if err := describe(); err != nil {
		t.Errorf("after ClearFaults: %v", err)
	}

	calls := s.Calls()
	wantActions := []string{"DescribeTargetHealth", "DescribeTargetGroups", "DescribeTargetHealth", "DescribeTargetHealth"}
	wantCodes := []string{"Throttling", "", "AccessDenied", ""}
	if len(calls) != len(wantActions) {
		t.Fatalf("got %d calls, want %d", len(calls), len(wantActions))
	}
	for i, c := range calls {
		if c.Service != "elasticloadbalancing" || c.Action != wantActions[i] || c.ErrorCode != wantCodes[i] || c.Params.Get("Version") != elbVersion {
			t.Errorf("call %d = %+v, want elasticloadbalancing %s with code %q", i, c, wantActions[i], wantCodes[i])
		}
	}
	if n := s.CallCount("elasticloadbalancing", "DescribeTargetHealth"); n != 3 {
		t.Errorf("DescribeTargetHealth calls = %d, want 3", n)
	}
}

// TestELBv2Concurrent is for the race detector.
func TestELBv2Concurrent(t *testing.T) {
	s := startFake(t, Options{})
	arn := s.AddTargetGroup(TargetGroup{Name: "web", DeregistrationDelay: 10 * time.Millisecond})
	client := elbClient(s)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("i-%04d", i)
			if _, err := client.RegisterTargets(ctx, &elb.RegisterTargetsInput{
				TargetGroupArn: aws.String(arn), Targets: []elbtypes.TargetDescription{elbTarget(id, 0)},
			}); err != nil {
				t.Error(err)
			}
			if _, err := client.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: aws.String(arn)}); err != nil {
				t.Error(err)
			}
			if err := s.DeregisterTarget(arn, id); err != nil {
				t.Error(err)
			}
			s.TargetState(arn, id)
			s.AddTargetGroup(TargetGroup{Name: fmt.Sprintf("tg-%d", i)})
		})
	}
	wg.Wait()
	if n := s.CallCount("elasticloadbalancing", ""); n != 16 {
		t.Errorf("calls = %d, want 16", n)
	}
}
