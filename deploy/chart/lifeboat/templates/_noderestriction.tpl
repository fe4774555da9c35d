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
