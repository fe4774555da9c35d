{{/*
The agent's node restriction is part of every render, helm template included: an offline
render cannot know the target cluster (its .Capabilities are Helm's defaults, whose version
says nothing of the cluster), so it never leaves the policy out. Where .Capabilities are a live
cluster's (helm install and upgrade, template --validate, --dry-run=server: the API list then
names resources, such as v1/Node, besides group versions) and that cluster does not serve
ValidatingAdmissionPolicy, the install fails here with the setting that installs without it,
rather than with the API server's "no matches for kind".
*/}}
{{- define "lifeboat.requireAdmissionPolicy" -}}
{{- $apis := .Capabilities.APIVersions }}
{{- if and ($apis.Has "v1/Node") (not ($apis.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")) }}
{{- $was := "" }}
{{- if and (hasKey .Values.agent.nodeRestriction "required") (not .Values.agent.nodeRestriction.required) }}
{{- $was = " (agent.nodeRestriction.required=false no longer leaves it out)" }}
{{- end }}
{{- fail (printf "Kubernetes %s does not serve ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes 1.30 and later), which the agent's node restriction needs%s: upgrade the cluster, or set agent.nodeRestriction.enabled=false to install without it (every agent's token may then write any Node and delete any pod)" .Capabilities.KubeVersion.Version $was) }}
{{- end }}
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
