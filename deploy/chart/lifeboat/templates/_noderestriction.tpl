{{/*
Whether the target Kubernetes serves ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1
(1.30 and later). The version decides an offline render (helm template --kube-version), which
has no live API list; the API list still counts for a cluster whose version string does not
parse as expected.
*/}}
{{- define "lifeboat.servesAdmissionPolicy" -}}
{{- if or (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) }}true{{ end }}
{{- end }}

{{/*
Whether the agent may run with a boolean setting on: (dict "root" $ "key" "excludeFromLoadBalancers").
True when the agent's effective config turns it on, and also when the chart cannot see its
value (read from a Secret, or set in agent.extraEnv): refusing a write the agent needs would
make its cordon fail, since the cordon goes in the same patch.
*/}}
{{- define "lifeboat.agentMayHave" -}}
{{- $cfg := include "lifeboat.effectiveConfig" (dict "root" .root "component" "agent") | fromYaml }}
{{- $env := get (include "lifeboat.settingTable" . | fromYaml) .key }}
{{- $outside := hasKey (.root.Values.configFromSecret | default dict) .key }}
{{- range .root.Values.agent.extraEnv }}{{ if eq .name $env }}{{ $outside = true }}{{ end }}{{ end }}
{{- if or (include "lifeboat.on" (dict "config" $cfg "key" .key)) $outside }}true{{ end }}
{{- end }}
