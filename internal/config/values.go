// SPDX-License-Identifier: Apache-2.0

package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// value is a typed destination for one setting. Set validates the text and stores it; the
// returned error says what is wrong with the value without naming the setting, which the
// caller adds (so one message format serves env vars and flags alike).
type value interface {
	Set(raw string) error
	String() string
}

// boolFlag marks values that the flag package may set without an argument (`--dry-run`).
type boolFlag interface{ IsBoolFlag() bool }

type boolValue struct{ p *bool }

func (v boolValue) Set(raw string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(raw))
	if err != nil {
		return errors.New("not a boolean (use true or false)")
	}
	*v.p = b
	return nil
}
func (v boolValue) String() string   { return strconv.FormatBool(*v.p) }
func (v boolValue) IsBoolFlag() bool { return true }

// intValue accepts whole numbers in [min, max]; when minusOne is set, -1 ("unset" in NTH's
// vocabulary) is accepted as well, whatever the range.
type intValue struct {
	p        *int
	min, max int
	minusOne bool
}

func (v intValue) Set(raw string) error {
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil {
		return errors.New("not an integer")
	}
	if v.minusOne && n == -1 {
		*v.p = n
		return nil
	}
	if n < v.min || n > v.max {
		return fmt.Errorf("out of range (allowed: %s)", v.describeRange())
	}
	*v.p = n
	return nil
}

func (v intValue) describeRange() string {
	r := fmt.Sprintf("%d to %d", v.min, v.max)
	if v.max == maxInt {
		r = fmt.Sprintf("%d or more", v.min)
	}
	if v.minusOne && v.min > -1 {
		r = "-1 (off) or " + r
	}
	return r
}
func (v intValue) String() string { return strconv.Itoa(*v.p) }

const maxInt = int(^uint(0) >> 1)

type floatValue struct {
	p   *float64
	min float64
	// zeroAuto also takes 0, for "Lifeboat decides" (KUBE_API_QPS).
	zeroAuto bool
}

func (v floatValue) Set(raw string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if err != nil {
		return errors.New("not a number")
	}
	if f <= v.min && (f != 0 || !v.zeroAuto) {
		if v.zeroAuto {
			return fmt.Errorf("must be 0 (automatic) or greater than %g", v.min)
		}
		return fmt.Errorf("must be greater than %g", v.min)
	}
	*v.p = f
	return nil
}
func (v floatValue) String() string { return strconv.FormatFloat(*v.p, 'g', -1, 64) }

type stringValue struct{ p *string }

func (v stringValue) Set(raw string) error { *v.p = raw; return nil }
func (v stringValue) String() string       { return *v.p }

// objectNameValue is the name of a Kubernetes object (a DNS subdomain: lowercase letters,
// digits, '-' and '.', at most 253 characters, starting and ending with a letter or digit).
type objectNameValue struct{ p *string }

func (v objectNameValue) Set(raw string) error {
	raw = strings.TrimSpace(raw)
	if errs := validation.IsDNS1123Subdomain(raw); len(errs) > 0 {
		return errors.New("not a Kubernetes object name: " + strings.Join(errs, "; "))
	}
	*v.p = raw
	return nil
}
func (v objectNameValue) String() string { return *v.p }

// ipValue is an IP address to listen on, or empty for every interface.
type ipValue struct{ p *string }

func (v ipValue) Set(raw string) error {
	raw = strings.TrimSpace(raw)
	if raw != "" && net.ParseIP(raw) == nil {
		return errors.New("not an IP address (e.g. 127.0.0.1 or ::1); leave empty for every interface")
	}
	*v.p = raw
	return nil
}
func (v ipValue) String() string { return *v.p }

// enumValue accepts one of a fixed set of words, case-insensitively, and stores the canonical
// spelling.
type enumValue struct {
	p       *string
	allowed []string
}

func (v enumValue) Set(raw string) error {
	for _, a := range v.allowed {
		if strings.EqualFold(strings.TrimSpace(raw), a) {
			*v.p = a
			return nil
		}
	}
	return fmt.Errorf("not one of %s", strings.Join(v.allowed, ", "))
}
func (v enumValue) String() string { return *v.p }

// urlValue accepts an absolute URL with one of the given schemes, or nothing when optional.
type urlValue struct {
	p        *string
	schemes  []string
	optional bool
}

func (v urlValue) Set(raw string) error {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		if v.optional {
			*v.p = ""
			return nil
		}
		return errors.New("must not be empty")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !slices.Contains(v.schemes, strings.ToLower(u.Scheme)) {
		return fmt.Errorf("not an absolute %s URL", strings.Join(v.schemes, " or "))
	}
	*v.p = raw
	return nil
}
func (v urlValue) String() string { return *v.p }

// accountsValue is a comma-separated list of AWS account ids.
type accountsValue struct{ p *[]string }

func (v accountsValue) Set(raw string) error {
	var ids []string
	for id := range strings.SplitSeq(raw, ",") {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if !IsAccountID(id) {
			return fmt.Errorf("%q is not an AWS account id (12 digits)", id)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	*v.p = ids
	return nil
}
func (v accountsValue) String() string { return strings.Join(*v.p, ",") }

// headersValue is a JSON object of header names to string values (NTH's WEBHOOK_HEADERS).
type headersValue struct {
	p   *map[string]string
	raw *string
}

func (v headersValue) Set(raw string) error {
	m := map[string]string{}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return errors.New(`not a JSON object of strings (e.g. {"Content-type":"application/json"})`)
	}
	*v.p, *v.raw = m, raw
	return nil
}
func (v headersValue) String() string { return *v.raw }

// keyValuesValue is NTH's "key1=value1,key2=value2" list (KUBERNETES_EVENTS_EXTRA_ANNOTATIONS).
// Keys must be valid annotation keys: the API server rejects an Event carrying any other,
// so a bad key would otherwise silently lose every Event.
type keyValuesValue struct{ p *map[string]string }

func (v keyValuesValue) Set(raw string) error {
	m := map[string]string{}
	for pair := range strings.SplitSeq(raw, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("%q is not key=value (use key1=value1,key2=value2)", pair)
		}
		k = strings.TrimSpace(k)
		// Annotation keys are qualified names, case aside (as the API server checks them).
		if msgs := validation.IsQualifiedName(strings.ToLower(k)); len(msgs) > 0 {
			return fmt.Errorf("%q is not a valid annotation key: %s", k, strings.Join(msgs, "; "))
		}
		m[k] = strings.TrimSpace(val)
	}
	*v.p = m
	return nil
}

func (v keyValuesValue) String() string {
	keys := make([]string, 0, len(*v.p))
	for k := range *v.p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + (*v.p)[k]
	}
	return strings.Join(parts, ",")
}

// templateValue is a Go text/template; it is parsed at start so a typo is a start-up error
// rather than a lost webhook later.
type templateValue struct{ p *string }

func (v templateValue) Set(raw string) error {
	if _, err := template.New("webhook").Option("missingkey=error").Parse(raw); err != nil {
		return fmt.Errorf("not a valid Go template: %v", err)
	}
	*v.p = raw
	return nil
}
func (v templateValue) String() string { return *v.p }

// durationValue is a Go duration ("500ms", "2s") in [min, max], or 0 when zeroOff says 0
// turns the feature off.
type durationValue struct {
	p        *time.Duration
	min, max time.Duration
	zeroOff  bool
}

func (v durationValue) Set(raw string) error {
	d, err := time.ParseDuration(strings.TrimSpace(raw))
	if err != nil {
		return errors.New(`not a duration (e.g. "500ms" or "2s")`)
	}
	if (d < v.min || d > v.max) && (d != 0 || !v.zeroOff) {
		if v.zeroOff {
			return fmt.Errorf("out of range (allowed: 0s for off, or %s to %s)", v.min, v.max)
		}
		return fmt.Errorf("out of range (allowed: %s to %s)", v.min, v.max)
	}
	*v.p = d
	return nil
}
func (v durationValue) String() string { return v.p.String() }

// pathValue is an HTTP path such as /healthz.
type pathValue struct{ p *string }

func (v pathValue) Set(raw string) error {
	if !strings.HasPrefix(raw, "/") || strings.ContainsAny(raw, " ?#") {
		return errors.New("not an HTTP path starting with /")
	}
	*v.p = raw
	return nil
}
func (v pathValue) String() string { return *v.p }
