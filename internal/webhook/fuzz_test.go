package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/config"
)

// FuzzTemplate parses arbitrary template text and renders it with a notification whose
// strings are arbitrary too: no panic, no error without WEBHOOK_TEMPLATE in it, never more
// than MaxBodyBytes; and the default template stays valid JSON whatever the values.
func FuzzTemplate(f *testing.F) {
	for _, seed := range []string{
		config.DefaultWebhookTemplate,
		`{"text":"{{ .EventID }} {{ .Kind }} {{ .NodeName }} {{ .StartTime }}"}`,
		`{{ range .Pods }}{{ . }},{{ end }}{{ range $k, $v := .NodeLabels }}{{ $k }}={{ $v }}{{ end }}`,
		`{{ .NodeLabels.team }}{{ index .NodeLabels "x" }}{{ $.JSON .Pods }}`,
		`{{ define "a" }}{{ template "a" . }}{{ end }}{{ template "a" . }}`,
		`{{ range 100 }}{{ printf "%2000s" "" }}{{ end }}`,
		`{{ range .StartTime.Unix }}{{ end }}`,
		`{{ env "HOME" }}`,
		`{{ if .Pods }}{{ len .Pods }}{{ else }}none{{ end }}{{ with .Description }}{{ . | printf "%q" }}{{ end }}`,
	} {
		f.Add(seed, `say "hi"`+"\n", "default/pod-0")
	}
	def, err := ParseTemplate(config.DefaultWebhookTemplate)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text, value, pod string) {
		n := notification()
		n.Description, n.NodeName, n.EventID = value, value, value
		n.Pods = append(n.Pods, pod)
		n.NodeLabels = map[string]string{value: pod}

		body, err := def.Render(n)
		if err != nil || !json.Valid(body) {
			t.Fatalf("default template: %v\n%q", err, body)
		}

		tmpl, err := ParseTemplate(text)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "WEBHOOK_TEMPLATE: ") {
				t.Fatalf("error %q does not name WEBHOOK_TEMPLATE", err)
			}
			return
		}
		body, err = tmpl.Render(n)
		switch {
		case err != nil && !strings.HasPrefix(err.Error(), "WEBHOOK_TEMPLATE: "):
			t.Fatalf("error %q does not name WEBHOOK_TEMPLATE", err)
		case err != nil && body != nil:
			t.Fatalf("error %v with a %d-byte body", err, len(body))
		case len(body) > MaxBodyBytes:
			t.Fatalf("rendered %d bytes, bound is %d", len(body), MaxBodyBytes)
		}
	})
}
